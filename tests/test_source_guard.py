"""Layer 1 on its own: directives read as the preprocessor reads them, whatever the spelling, and
every #include led to a file the kernel carries, a stand-in, or an allowed CUDA header.

Hypothesis builds directives the way an attacker would spell them (splices inside words,
comments between tokens, digraphs, trigraphs, every newline convention) and checks that each
forbidden one is refused at its own line, while the same noise around allowed directives
passes: a guard that refused everything would fail the second half.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.description import kernel_includes
from core.description.builtins import KERNELS_DIR
from core.description.kernel_includes import IncludeRefused
from core.description.source_guard import ALLOWED_DIRECTIVES, SourceRefused, check_source

# An include is a directive of its own now, but never of a file outside the kernel.
FORBIDDEN_DIRECTIVES = ["include", "include_next", "import", "embed", "assert", "ident", "sccs"]
FILES = ['"/etc/passwd"', "</proc/self/environ>", '"../../worker/.env"', '"x/../../../etc/passwd"',
         "<cuda/../../../etc/passwd>", '"cuda/std/../../../../proc/self/environ"', "<passwd>", '"environ"']
REFUSED = (SourceRefused, IncludeRefused)
ROOT = Path(__file__).resolve().parent.parent


def layer_one(text: str, files: dict[str, str] | None = None) -> kernel_includes.Headers:
    """What the API, the CLI and the worker each run on a kernel: the guard over every file the
    source reaches, and where each #include leads."""
    return kernel_includes.resolve({"job.cu": text, **(files or {})}, "job.cu")

newline = st.sampled_from(["\n", "\r\n", "\r"])
# What may stand between the '#' and the directive's name without changing its meaning.
gap = st.lists(st.sampled_from([" ", "\t", "/* c */", "/**/", "\\\n", "\\\r\n", "/*\\\n*/"]), max_size=3).map("".join)
hash_sign = st.sampled_from(["#", "%:", "??="])


@st.composite
def spliced(draw, word: str, splices=("\\\n", "\\\r\n", "\\ \n")) -> str:
    """The word with backslash-newline splices at random places inside it (a backslash, spaces
    and a newline splices in GCC and Clang, not in every compiler: forbidden words use it too)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(word) - 1)), max_size=3)))
    parts, last = [], 0
    for cut in cuts:
        parts.append(word[last:cut])
        last = cut
    parts.append(word[last:])
    return draw(st.sampled_from(splices)).join(parts)


@st.composite
def preamble(draw) -> tuple[str, int]:
    """Harmless lines before the attack; returns the text and how many lines it spans."""
    lines = draw(st.lists(st.sampled_from(["int a;", "// note", "/* block */", "#define X 1", "", "  "]), max_size=5))
    nl = draw(newline)
    return "".join(line + nl for line in lines), len(lines)


@settings(max_examples=300, deadline=None)
@given(preamble(), st.data())
def test_forbidden_directives_are_refused_at_their_line_however_spelled(pre, data):
    text, lines_before = pre
    name = data.draw(st.sampled_from(FORBIDDEN_DIRECTIVES))
    attack = (data.draw(st.sampled_from(["", " ", "\t"])) + data.draw(hash_sign) + data.draw(gap)
              + data.draw(spliced(name)) + " " + data.draw(st.sampled_from(FILES)))
    with pytest.raises(REFUSED) as refused:
        layer_one(text + attack + data.draw(newline) + "__global__ void k() {}\n")
    assert refused.value.line == lines_before + 1
    # A backslash and spaces before the newline splice for some compilers only: where the
    # directive's name is cut so, the refusal may be that ambiguity itself, at the same line.
    assert name in str(refused.value) or ("\\ " in attack and "backslash" in str(refused.value))


@settings(max_examples=200, deadline=None)
@given(preamble(), st.data())
def test_the_same_noise_around_allowed_directives_passes(pre, data):
    text, _ = pre
    name = data.draw(st.sampled_from(sorted(ALLOWED_DIRECTIVES - {"pragma", "line", "error", "warning"})))
    argument = {"define": " Y 2", "undef": " Y", "if": " 1", "ifdef": " Y", "ifndef": " Y", "elif": " 0",
                "include": data.draw(st.sampled_from([' "mine.cuh"', " <cstdio>", " <cuda_fp16.h>", ' "cuda/pipeline"']))
                }.get(name, "")
    directive = data.draw(hash_sign) + data.draw(gap) + data.draw(spliced(name, ("\\\n", "\\\r\n"))) + argument
    layer_one(text + directive + data.draw(newline) + "__global__ void k() {}\n", {"mine.cuh": "#pragma once\n"})


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["__has_include", "__has_include_next", "__has_embed", "__pragma"]), st.data())
def test_file_probing_operators_are_refused_even_when_spliced(word, data):
    with pytest.raises(SourceRefused, match=word):
        check_source(f"#if defined(X) && {data.draw(spliced(word))}(\"/etc/passwd\")\n#endif\n")


@pytest.mark.parametrize("text, line, words", [
    ('int a;\n#pragma GCC dependency "/etc/passwd"\n', 2, ["#pragma GCC"]),
    ('_Pragma("GCC dependency \\"/etc/passwd\\"")\n', 1, ["_Pragma"]),
    ("#define P(x) _Pragma(#x)\n", 1, ["literal string"]),
    ('#line 7 "/etc/passwd"\n', 1, ["no path"]),
    ('#line 7 "../secrets.h"\n', 1, ["no path"]),
    ('#line 7 "a.cu" 3\n', 1, ["no path"]),
    ("#define X include\n#X </etc/passwd>\n", 2, ["#X"]),
    ('int x; /*\n*/ #include "/etc/passwd"\n', 2, ["#include"]),
    ('const char *s = R"(\n#include "/etc/passwd"\n)";\n', 1, ["raw string"]),
    ("/* never closed\n#include </etc/passwd>\n", 1, ["unterminated"]),
    ('// comment ??/\n#include "/etc/passwd"\n', 2, ["#include"]),
    ("int a;\x00\n", 1, ["NUL"]),
    ('int a;\x1a#include "/etc/passwd"\n', 1, ["control character"]),
    ('int a;\n_Pr\\u0061gma("GCC dependency \\"/etc/passwd\\"")\n', 2, ["universal character name"]),
    ('#if __has_incl\\u0075de("/etc/passwd")\n#endif\n', 1, ["universal character name"]),
    ('int a;\n#if 0x1p-__has_include("/etc/passwd")\n#endif\n', 2, ["number that runs into"]),
    ("int a = 1'_Pragma(\"once\");\n", 1, ["number that runs into"]),
])
def test_other_ways_in_are_refused(text, line, words):
    with pytest.raises(SourceRefused) as refused:
        check_source(text)
    assert refused.value.line == line
    for word in words:
        assert word in str(refused.value)


@pytest.mark.parametrize("text", [
    "#pragma unroll 4\nint x = 1'000'000;\n",
    "const char c = '#';\nconst char *s = \"#include <x>\";\n",
    '_Pragma("unroll")\n#pragma nv_diag_suppress 177\n',
    "#ifdef WIN32\n#pragma warning(disable : 4996)\n#endif\n#pragma nv_exec_check_disable\n",
    "#if 0\ndon't stop me now\n#endif\n",
    "#\n#line 40\n#error stop here\n",
    '#line 1 "common.cuh"\n__device__ int x;\n#line 1 "smem_tiled.cu"\n',
    "#define STR(x) #x\nconst char *s = STR(include);\n",
])
def test_ordinary_kernel_code_passes(text):
    check_source(text)


@pytest.mark.parametrize("paste", ["##", "%:%:"])
def test_token_pasting_passes_the_guard_and_compiles(paste):
    """A logging macro pastes away the comma before an empty __VA_ARGS__, a kernel name is pasted
    together: allowed since issue 22. What pasting could assemble (_Pragma, __has_include) is left
    to layer 2 (test_a_probe_assembled_by_pasting_sees_nothing_outside_cudas_headers)."""
    source = (f"#define LOG(fmt, ...) printf(fmt, {paste}__VA_ARGS__)\n#define CAT(a, b) a {paste} b\n"
              '__global__ void CAT(k, ernel)() { LOG("k ran\\n"); LOG("k ran %d times\\n", 3); }\n')
    layer_one(source)
    assert "NVRTC_SUCCESS" in nvrtc_log(source, offer_header=False)


def test_each_problem_is_named_once_whichever_readings_find_it():
    """Four readings of one file find the same #import: it is named once. A backslash and a space
    before the newline splice for some compilers only: what each reading finds is named."""
    with pytest.raises(SourceRefused) as refused:
        check_source("int a;\n#import <x>\n")
    assert [(p.line, p.reason.split(" is ")[0]) for p in refused.value.problems] == [(2, "directive #import")]
    with pytest.raises(SourceRefused) as refused:
        check_source('#inc\\ \nlude "/etc/passwd"\n#pragma GCC poison x\n')
    found = [(p.line, p.reason.split(" (")[0]) for p in refused.value.problems]
    assert found == [(1, "a backslash outside a string that does not end its line"),  # where it does not splice
                     (1, "an #include must spell its file as \"path\" or <path>"),  # where it does
                     (1, "directive #inc is not allowed in job sources"),  # where it does not
                     (3, "#pragma GCC is not allowed in job sources")]


@pytest.mark.parametrize("path", sorted(KERNELS_DIR.glob("*.cu*")), ids=lambda p: p.name)
def test_every_builtin_kernel_file_would_pass_as_a_jobs_own_source(path):
    """`gemmwatch ci` sends a commit's own versions of the ladder's files as job sources."""
    check_source(path.read_text())


@pytest.mark.parametrize("text, where", [
    ("__global__ void k() {}\n// fine\n%:  inc\\\nlude </proc/self/environ>\n", "mine.cu, line 3"),
    ('#include "util.cuh"\n__global__ void k() {}\n', "util.cuh, line 2"),
    ('#include "sub/none.cuh"\n__global__ void k() {}\n', "mine.cu, line 1"),
])
def test_a_refusal_is_a_422_that_names_the_file_and_line(client, text, where):
    util = '#pragma once\n#include <sys/socket.h>\n'  # a header the kernel carries includes what it may not
    resp = client.post("/api/jobs", json={"sources": [{"name": "mine", "files": {"mine.cu": text, "util.cuh": util},
                                                       "source": "mine.cu", "entry": "k", "block": [1],
                                                       "grid": {"tile": [1, 1]}}], "sizes": [[8, 8, 8]]})
    assert resp.status_code == 422, resp.text
    message = " ".join(d["msg"] for d in resp.json()["detail"])
    assert where in message and "#include" in message
    assert client.get("/api/jobs").json() == []  # nothing stored


# A folder with three problems in two files: the source's own two, and one in the header it includes.
THREE_PROBLEMS = {"src/mine.cu": '#include "util.cuh"\n#import <x>\n__global__ void k() {}\n#pragma GCC dependency "x"\n',
                  "src/util.cuh": "#pragma once\n#include <sys/socket.h>\n"}
THREE_PLACES = ["src/mine.cu, line 2", "src/mine.cu, line 4", "src/util.cuh, line 2"]


def assert_all_three_in_order(text: str) -> None:
    at = [text.find(place) for place in THREE_PLACES]
    assert -1 not in at and at == sorted(at), text


@pytest.mark.parametrize("command", [["ci", "--server", "http://127.0.0.1:9", "--commit", "feed0003", "--parents", ""],
                                     ["run"]], ids=["ci", "run"])
def test_every_problem_of_a_folder_is_named_at_once_before_anything_is_posted(tmp_path, command):
    for path, text in THREE_PROBLEMS.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "gemmwatch.json").write_text(json.dumps([{"name": "mine", "source": "src/mine.cu", "entry": "k",
                                                           "block": [1], "grid": {"tile": [1, 1]}}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
    run = subprocess.run([sys.executable, "-m", "cli.main", *command, "--kernels-dir", str(tmp_path)],
                         env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert_all_three_in_order(run.stderr)


def test_every_problem_of_a_kernel_is_named_at_once_in_the_422(client):
    resp = client.post("/api/jobs", json={"sources": [{"name": "mine", "files": THREE_PROBLEMS, "source": "src/mine.cu",
                                                       "entry": "k", "block": [1], "grid": {"tile": [1, 1]}}],
                                          "sizes": [[8, 8, 8]]})
    assert resp.status_code == 422, resp.text
    assert_all_three_in_order(" ".join(d["msg"] for d in resp.json()["detail"]))


# The guard judged against the compiler itself. NVRTC takes headers from memory: "x.h" is
# offered with a body that stops the compile, so a source that reads it or even probes for it
# (__has_include) compiles differently with the header offered and without. Hypothesis strings
# together pieces an attacker would use; whatever the guard passes must not see the header.

# Token pasting is not among them: it passes the guard, and a probe it assembles is left to layer 2
# (test_a_probe_assembled_by_pasting_sees_nothing_outside_cudas_headers).
PIECES = ["#", "%:", "??=", " ", "\t", "\f", "\v", "\\\n", "\\\r\n", "\\ \n", "\n", "\r\n", "\r",
          "\x0c", "\u2028", "\u0085", "/*c*/", "/*\n*/", "//c", "include", "inc", "lude", "include_next", "import",
          "embed", "__has_include", "__has_", "_Pragma", "pragma", "define", "if", "line", "error", "once",
          "push_macro", "X", "H", "1", "1'", "0x1p-", "1e+", "R", "\\u0069", '"x.h"', "<x.h>", "(", ")", '"', "'",
          "#define H #\n", "#define I include\n", "#define P(x) x\n", "#define S(x) #x\n", "H I \"x.h\"\n",
          "P(#include \"x.h\")\n", "#if 1\n", "#endif\n", "\ufeff", "\u00a0", "\u200b", "\u3000"]


def nvrtc_log(source: str, offer_header: bool) -> str:
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    headers, names = ([b"#error HEADER_WAS_READ\n"], [b"x.h"]) if offer_header else ([], [])
    status, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"job.cu", len(headers), headers, names)
    try:
        result = nvrtc.nvrtcCompileProgram(prog, 2, [b"-arch=sm_90", b"-std=c++17"])[0]
        size = nvrtc.nvrtcGetProgramLogSize(prog)[1]
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        return f"{result}\n{log.decode(errors='replace')}"
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@pytest.mark.parametrize("source", ['#include "x.h"\n', '%:inc\\\nlude "x.h"\n', '\f\v# /*c*/ include <x.h>\n',
                                    '#if __has_include("x.h")\n#error HEADER_WAS_SEEN\n#endif\n'])
def test_the_oracle_sees_a_plain_read_or_probe(source):
    """The compiler-side check below can fail: these spellings (all refused) do see the header."""
    with pytest.raises(REFUSED):
        layer_one(source)
    assert nvrtc_log(source, offer_header=True) != nvrtc_log(source, offer_header=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=16).map("".join))
def test_whatever_the_guard_passes_never_reaches_a_header_in_nvrtc(source):
    """x.h is no file of the kernel: whatever layer 1 passes must compile the same with it
    offered in memory or not, so no include or probe the guard let through can reach it."""
    try:
        layer_one(source)
    except REFUSED:
        return
    with_header = nvrtc_log(source, offer_header=True)
    assert "HEADER_WAS_READ" not in with_header
    assert with_header == nvrtc_log(source, offer_header=False), "the source saw whether x.h exists"


def test_a_probe_assembled_by_pasting_sees_nothing_outside_cudas_headers(tmp_path):
    """The guard lets token pasting through, and pasting can assemble __has_include. Run in the
    confined compile process, such a probe finds a CUDA header (so it does work) and nothing
    else: /etc/passwd, the process's environment and this very file are as absent as a file that
    does not exist. (Where the compiler cannot be confined and GEMMWATCH_UNCONFINED_SOURCES=warn
    lets job sources through anyway, it would tell whether a file exists: docs/SECURITY.md.)"""
    from core.settings import Settings
    from worker.compile import compiler

    dirs = kernel_includes.toolkit_include_dirs()
    if not dirs:
        pytest.skip("no CUDA headers in this environment")
    settings = Settings(GEMMWATCH_DATA_DIR=str(tmp_path))

    def found(path: str) -> bool:
        source = (f'#define CAT(a, b) a##b\n#if CAT(__has_, include)("{path}")\n#error PROBE_FOUND\n'
                  "#else\n#error PROBE_ABSENT\n#endif\n")
        layer_one(source)
        with pytest.raises(compiler.CompileError) as failed:
            compiler.compile_kernel(source, name="job.cu", options=["-arch=sm_90", *(f"-I{d}" for d in dirs)],
                                    untrusted=True, cfg=settings, include_dirs=dirs)
        assert ("directive: PROBE_FOUND" in str(failed.value)) != ("directive: PROBE_ABSENT" in str(failed.value))
        return "directive: PROBE_FOUND" in str(failed.value)

    assert found("cuda_fp16.h")
    for path in ["/etc/passwd", "/proc/self/environ", __file__, "/etc/no-such-file"]:
        assert not found(path), path


@pytest.mark.parametrize("space", ["\ufeff", "\u00a0", "\u200b", "\u3000"])
def test_a_unicode_space_before_the_hash_makes_no_directive(space):
    """Tried past the guard (issue 19 review): a byte-order mark or a Unicode space before '#'
    hides the line from the guard, which takes it for no directive. The compiler agrees: it
    reports the character as an unrecognized token and never reads the header."""
    source = space + '#include "x.h"\n'
    check_source(source)
    with_header = nvrtc_log(source, offer_header=True)
    assert "HEADER_WAS_READ" not in with_header and "unrecognized token" in with_header
    assert with_header == nvrtc_log(source, offer_header=False)


def test_a_directive_made_by_a_macro_is_no_directive():
    """The guard passes a '#' that comes out of a macro: in C and C++ a directive is only ever
    spelled in the source. The compiler agrees: it reports the '#' and never reads the header."""
    source = '#define H #\n#define I include\nH I "x.h"\n'
    check_source(source)
    with_header = nvrtc_log(source, offer_header=True)
    assert "HEADER_WAS_READ" not in with_header and '"#" not expected here' in with_header
    assert with_header == nvrtc_log(source, offer_header=False)


def test_this_projects_kernels_folder_is_accepted_by_the_api(client):
    from core.description.kernel_folder import load_folder

    sources = [d.model_dump(mode="json") for d in load_folder(KERNELS_DIR)]
    resp = client.post("/api/jobs", json={"sources": sources, "sizes": [[64, 64, 64]]})
    assert resp.status_code == 202, resp.text[:500]
    assert sorted(resp.json()["variants"]) == sorted(s["name"] for s in sources)


@pytest.mark.parametrize("text", ['#include /*\n*/ "/etc/passwd"\n', "#include <cuda_fp16.h /*\n*/ >\n",
                                  '#line 1 /*\n*/ "/etc/passwd"\n', '#include "' + "a/" * 300 + 'b.h"\n',
                                  "/*\n*/#include_next <x.h>/*\n*/#define A\n"])
def test_an_operand_spread_over_multi_line_comments_is_still_read_whole(text):
    """The linear guard (issue 37, row 2) finds each line's end once; a comment spanning lines ends
    none, so an #include's or #line's operand continues past it, as the preprocessor reads it."""
    with pytest.raises(REFUSED):
        layer_one(text)


def test_a_pragma_split_by_a_multi_line_comment_is_still_allowed():
    layer_one('#pragma /*\n*/ unroll\nextern "C" __global__ void k() {}\n')


def test_the_headers_nvrtc_takes_are_listed_once_however_many_includes_it_refuses():
    """cuda-samples' matrixMul.cu includes three headers NVRTC cannot take: each is named with its
    line and the nvcc advice, and the long list of what NVRTC takes comes once."""
    text = "#include <helper_cuda.h>\n#include <helper_functions.h>\n#include <cuda_profiler_api.h>\n__global__ void k() {}\n"
    with pytest.raises(IncludeRefused) as refused:
        kernel_includes.resolve({"m.cu": text}, "m.cu")
    said = str(refused.value)
    for line, name in enumerate(["helper_cuda.h", "helper_functions.h", "cuda_profiler_api.h"], start=1):
        assert f"m.cu, line {line}: #include <{name}> is neither a file of the kernel" in said, said
    assert said.count('set "compiler": "nvcc"') == 3 and said.count("NVRTC takes:") == 1, said


@pytest.mark.parametrize("spelled, allowed", [
    ('"helper_cuda ptx.h"', True), ('<helper_cuda ptx.h>', True), ('"my kernels/a b.cuh"', True),
    ('"two  spaces.h"', False), ('"ends with space.h "', False), ('" starts.h"', False),
    ('"dir /x.h"', False), ('"dir/ x.h"', False), ('"tab\there.h"', False),
])
def test_a_space_is_allowed_alone_between_two_characters_of_an_include(spelled, allowed):
    """A name may hold a space (salykova/sgemm.cu's "helper_cuda ptx.h"), but only as a file's name does: one,
    between two of its characters; never doubled, at either end of a name, or beside a '/'."""
    text = f"#include {spelled}\n"
    if allowed:
        assert {include.name for include in check_source(text)} == {spelled[1:-1]}
    else:
        with pytest.raises(SourceRefused, match="must spell its file"):
            check_source(text)
