"""A compile log as its reader may see it (layer 3 of 3 against a hostile job source).

A compiler quotes the lines it complains about. A job that got a file of the worker's machine
read (past layers 1 and 2) would get its text back in the log, so the log of a job's source
shows what is located in the job's own files, and in CUDA's headers (public, the same on every
machine: a kernel engineer needs "mma.h(55): cannot open source file crt/mma.h" to see that a
toolkit is incomplete). Anything located elsewhere, a host header under /usr/include included,
is replaced by one line saying that it was withheld: a host header's lines are not the job's,
and their text could help probe the machine.

Three formats are read, each a location at the start of a line:
  - EDG's, which NVRTC and nvcc's front end write: `path(12): error: ...` (also warning, remark,
    note, catastrophic error, internal error);
  - gcc's, where nvcc runs the host compiler: `path:12:5: error: ...`, `path:12: note: ...`,
    `path: In function '...':`, `path: Assembler messages:`;
  - gcc's include chain: `In file included from path:3:` and its `                 from path:5,` lines.
A location line and the lines after it up to the next location (the quoted source, the caret,
continuation lines, all indented) are kept or withheld together, with the include chain that
leads to it. Paths are judged once normalized (`src/../../../etc/passwd` is /etc/passwd).
A log cut to its head and tail (issue 37, row 3) says so on a line of its own; what follows that
line, up to the next location, is withheld, since its location was cut away.
"""

import os
import posixpath
import re

from core.description.kernel_includes import is_toolkit_header
from core.text_bounds import MARKER_LINE

WITHHELD = "[a diagnostic located outside the job's source was withheld]"

# file(line): severity -- how EDG (NVRTC, nvcc's front end) starts a diagnostic.
_DIAGNOSTIC = re.compile(
    r"^(?P<file>\S.*?)\((?P<line>\d+)\): (?:catastrophic error|internal error|error|warning|remark|note)\b")
# file:line[:column]: what -- gcc, and the assembler it runs; file: In function ... -- gcc's context.
_GCC_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? \S")
_GCC_CONTEXT = re.compile(r"^(?P<file>[^\s:][^:]*): (?:In |At |Assembler messages:)")
_INCLUDED_FROM = re.compile(r"^In file included from (?P<file>[^\s:][^:]*)(?::\d+)?[:,]$")
_FROM = re.compile(r"^ +from (?P<file>[^\s:][^:]*)(?::\d+)?[:,]$")  # only inside an include chain
# Lines of the compiler's own that end whatever diagnostic came before them.
_SUMMARY = re.compile(r"^(?:\d+ (?:catastrophic )?errors? detected in the compilation of "
                      r"|[Cc]ompilation terminated\.$|Error limit reached\.$|Remark: The warnings can be suppressed )")
# Names gcc gives what is no file: the command line (nvcc's -include cuda_runtime.h), built-ins.
_NO_FILE = frozenset({"<command-line>", "<built-in>"})

_LINE_MARKER = re.compile(r'^[ \t]*#[ \t]*line[ \t]+\d+[ \t]+"([A-Za-z0-9_][A-Za-z0-9_.\-]*)"', re.M)


def own_file_names(source: str, name: str) -> set[str]:
    """The job's source, and the parts it names itself with #line (the ladder's preludes:
    layer 1 lets a #line give a plain name, never a path)."""
    return {name, *_LINE_MARKER.findall(source)}


def own_file_names_of(headers: dict[str, str]) -> set[str]:
    """The names NVRTC gives the in-memory headers in its diagnostics: the job's own files and our
    stand-ins, as their includes spell them (never a file of the toolkit)."""
    names = set(headers)
    for text in headers.values():
        names |= set(_LINE_MARKER.findall(text))
    return names


def _location(line: str, in_chain: bool) -> re.Match | None:
    """The match of a line that starts a diagnostic (its `file` group), else None."""
    for pattern in (_DIAGNOSTIC, _GCC_DIAGNOSTIC, _GCC_CONTEXT, _INCLUDED_FROM):
        m = pattern.match(line)
        if m:
            return m
    return _FROM.match(line) if in_chain else None


def _lines_with_locations(text: str):
    """Each line of a log, with the match of its location where it starts a diagnostic."""
    in_chain = False
    for line in text.splitlines():
        m = _location(line, in_chain)
        in_chain = m is not None and m.re in (_INCLUDED_FROM, _FROM)
        yield line, m


def rename_files(text: str, shown_as: dict[str, str] | None = None, build_dir: str | None = None) -> str:
    """Each location names what the kernel engineer knows: a header the kernel carries by its path
    in the kernel's folder, not the name its #include spelled ("src/kernels/10_warptiling.cuh(12):
    error"), and a file of an nvcc build by its path under the build folder, not the worker's
    absolute path ("src/k.cu(12): error" for /tmp/gemmwatch-build-x/src/k.cu)."""
    if not shown_as and not build_dir:
        return text
    out = []
    for line, m in _lines_with_locations(text):
        if m:
            path = _under(m.group("file"), build_dir) or m.group("file")
            line = line[: m.start("file")] + (shown_as or {}).get(path, path) + line[m.end("file"):]
        elif build_dir and _SUMMARY.match(line):  # ... in the compilation of "/tmp/.../src/k.cu".
            line = line.replace(posixpath.normpath(build_dir) + "/", "")
        out.append(line)
    return "\n".join(out)


def filter_log(text: str, own_names: str | set[str], toolkit_dirs: tuple[str, ...] = (),
               build_dir: str | None = None) -> str:
    """Keep what is located in the job's own files (`own_names`: as NVRTC names them, or paths
    under `build_dir` for an nvcc build) and in CUDA's headers (under one of `toolkit_dirs`, or a
    CUDA header by its bare name, as NVRTC may name one); replace every other diagnostic, with the
    lines that belong to it, by one WITHHELD line. Line numbers stay as they are. An include chain
    goes with the diagnostic it leads to: shown or withheld with it."""
    own = {own_names} if isinstance(own_names, str) else set(own_names)
    out: list[str] = []
    chain: list[str] = []
    keeping = True
    for line, m in _lines_with_locations(text):
        if m and m.re in (_INCLUDED_FROM, _FROM):
            chain.append(line)
            continue
        if chain and not m:  # a chain that leads to no diagnostic: nothing to judge it by
            _withhold(out)
            chain = []
        if m:
            keeping = _shown(m.group("file"), own, toolkit_dirs, build_dir)
        elif MARKER_LINE.match(line):
            # A log cut to its head and tail (worker/compile/compile_sandbox.py): the tail starts inside a
            # diagnostic whose location was left out, so it is withheld up to the next location.
            out.append(line)
            keeping = False
            continue
        elif _SUMMARY.match(line):
            keeping = True
        if keeping:
            out += [*chain, line]
        else:
            _withhold(out)
        chain = []
    if chain:
        _withhold(out)
    return "\n".join(out)


def _withhold(out: list[str]) -> None:
    if out[-1:] != [WITHHELD]:  # one line says it for what was withheld in a row
        out.append(WITHHELD)


def _shown(path: str, own: set[str], toolkit_dirs: tuple[str, ...], build_dir: str | None) -> bool:
    if path in own or path in _NO_FILE:
        return True
    if not posixpath.isabs(path):
        normal = posixpath.normpath(path)
        # A relative name is the job's own (nvcc run in its build folder names src/k.cu), or a CUDA
        # header NVRTC names by its bare name; never one that climbs.
        return normal in own or (not normal.startswith("..") and _cuda_header_name(normal))
    inside = _under(path, build_dir)
    if inside is not None:
        return inside in own
    return any(_under(path, folder) is not None for folder in toolkit_dirs)


def _cuda_header_name(name: str) -> bool:
    return is_toolkit_header(name) or name.startswith("crt/")


def _under(path: str, folder: str | None) -> str | None:
    """`path` relative to `folder` where it lies beneath it, both normalized and with links
    resolved (nvcc writes <toolkit>/bin/../include/...; /usr/local/cuda is often a link);
    else None."""
    if not folder or not posixpath.isabs(path):
        return None
    for p, f in ((posixpath.normpath(path), posixpath.normpath(folder)), (os.path.realpath(path), os.path.realpath(folder))):
        if p.startswith(f.rstrip("/") + "/"):
            return p[len(f.rstrip("/")) + 1:]
    return None
