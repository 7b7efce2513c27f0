"""Bruce-Lee-LY/cuda_hgemm's manifest (docs/examples/Bruce-Lee-LY-cuda_hgemm.gemmwatch.json, issue 36):
18 FP16 kernels of a public repository, each called through its own host launcher
`void name(half *A, half *B, half *C, size_t M, size_t N, size_t K)`, B column-major, C = A·B, FP16 sums,
built by nvcc with the repository's CMake Release flags.

The first tests need only the manifest: its entries are the repository's kernel files, each in the
repository's form, and each is a valid description (over stand-in files: the repository is not
vendored here). The others need the repository itself, `git archive 0d26c2e` of it, in
$CUDA_HGEMM_REPO or .devkit/repos/cuda_hgemm, or the bare mirror this workplace keeps; without it they
skip. There the folder is loaded as `gemmwatch ci` loads it (the source guard, include resolution
with common.h's host headers), each launch geometry is checked against what the launcher itself
computes, and each launcher is built for sm_90 through the worker's real path (nvcc in the
confined compile process), which needs a toolkit with cublas_v2.h (common.h includes it): the
nvidia-cublas wheel's headers beside the nvcc gemmwatch uses, or GEMMWATCH_NVCC naming one.
"""

import json
import os
import re
import shutil
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from core.description import compile_flags
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.description.kernel_includes import resolve as resolve_includes
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docs" / "examples" / "Bruce-Lee-LY-cuda_hgemm.gemmwatch.json"
MIRROR = Path("/work/.mirror/Bruce-Lee-LY+cuda_hgemm/repo")
COMMIT = "0d26c2e"
# Every kernel file of the repository at 0d26c2e (src/main.cu is its runner, src/cublas_tensor_op.cu
# its cuBLAS baseline).
KERNEL_FILES = ["src/simt_naive.cu"] + [f"src/wmma/wmma_{s}.cu" for s in (
    "naive", "base", "padding", "async", "async_pg2s", "async_pg2s_ps2r", "async_stage2", "async_stage3")] + [
    f"src/mma/mma_{s}.cu" for s in ("naive", "base", "permuted", "async", "async_pg2s", "async_pg2s_ps2r",
                                    "async_stage2", "async_stage3", "async_stage4")]
# CMakeLists.txt's CUDA_NVCC_FLAGS for a Release build, less -Xcompiler -fopenmp (host OpenMP, which only
# main.cu uses; refused by core/description/compile_flags.py) and -gencode (gemmwatch builds for the GPU it runs on).
RELEASE_FLAGS = ["-std=c++11", "--expt-relaxed-constexpr", "--use_fast_math", "-O3"]
LAUNCHER_PARAMS = ["A: __half*", "B: __half*", "C: __half*", "M: unsigned long", "N: unsigned long",
                   "K: unsigned long"]


def entries() -> list[dict]:
    return json.loads(MANIFEST.read_text())


def camel(stem: str) -> str:
    """simt_naive -> simtNaive, wmma_async_pg2s_ps2r -> wmmaAsyncPg2sPs2r (the repository's names)."""
    first, *rest = stem.split("_")
    return first + "".join(w[:1].upper() + w[1:] for w in rest)


# --- the manifest alone -----------------------------------------------------------------------------

def test_one_entry_per_kernel_file_of_the_repository():
    got = entries()
    assert sorted(e["source"] for e in got) == sorted(KERNEL_FILES)
    assert [e["name"] for e in got] == [f"cuda_hgemm_{Path(e['source']).stem}" for e in got]
    assert len({e["name"] for e in got}) == 18


def test_every_entry_is_the_repositorys_launcher_in_the_repositorys_form():
    for e in entries():
        stem = Path(e["source"]).stem
        assert e["launcher"] == camel(stem), e["name"]
        assert e["entry"] == camel(stem) + "Kernel", e["name"]
        assert e["args"] == ["A", "B", "C", "M", "N", "K"], e["name"]
        assert e["layout"] == {"A": "row", "B": "col", "C": "row"}, e["name"]
        assert (e["epilogue"], e["accumulate"], e["compute_mode"], e.get("output", "input")) == \
            ("ab_only", "fp16", "fp16", "input"), e["name"]
        assert (e["compiler"], e["flags"], e["include_dirs"]) == ("nvcc", RELEASE_FLAGS, ["src/common"]), e["name"]
        assert all(compile_flags.check_flag(f) == f for f in e["flags"])
        # What was left out of the repository's flags, and why, is said with each kernel.
        assert "-Xcompiler -fopenmp" in e["technique"] and "-gencode" in e["technique"], e["name"]
        assert e["seed"] == f"Bruce-Lee-LY/cuda_hgemm@{COMMIT} (MIT)"


def test_the_flags_the_manifest_leaves_out_are_those_gemmwatch_refuses_or_sets_itself():
    with pytest.raises(ValueError, match="not allowed"):
        compile_flags.check_flag("-Xcompiler -fopenmp")
    # -gencode is taken now, as the target's minimum: the manifest's kernels build for any GPU anyway.
    assert compile_flags.parse(["-gencode arch=compute_90,code=sm_90"]).target == "sm_90+"


STAND_IN_COMMON = '#pragma once\n#include "cublas_v2.h"\n#include "cuda_fp16.h"\n#include "mma.h"\n#include <unistd.h>\n'


def stand_in(entry: dict) -> dict:
    """The entry over stand-in files: its source declaring its kernel and launcher, and a common.h
    with the repository's host headers, reached as the repository reaches it (include_dirs)."""
    source = (f'#include "common.h"\n__global__ void {entry["entry"]}(const half *A, const half *B, half *C, '
              f"size_t M, size_t N, size_t K) {{}}\nvoid {entry['launcher']}(half *A, half *B, half *C, size_t M, "
              f"size_t N, size_t K) {{}}\n")
    return {**entry, "files": {entry["source"]: source, "src/common/common.h": STAND_IN_COMMON}}


@pytest.mark.parametrize("index", range(18))
def test_each_entry_is_a_valid_description_of_a_b_column_major_fp16_sum_gemm(index):
    desc = KernelDescription.model_validate(stand_in(entries()[index]))
    assert desc.form.key() == "rcr+ab+acc16"
    assert desc.precision.describe()["accumulate"] == "float16"
    launch = resolve(desc, {}, H100_FIGURES, "job")
    assert launch.launcher == desc.launcher and launch.compiler == "nvcc"
    # A block's dynamic shared memory fits an H100's 227 KiB per block; past 48 KiB the launcher asks for it.
    assert 0 <= launch.dynamic_smem(4096, 4096, 4096) <= 227 * 1024


def test_a_folder_of_stand_ins_reaches_common_h_through_include_dirs(tmp_path):
    """Loaded as `gemmwatch ci` loads a folder (files left out of the manifest): each kernel carries the
    common.h its source includes from src/wmma/ or src/mma/, found through include_dirs, and its host
    headers (cublas_v2.h, unistd.h) are left to nvcc's own search."""
    for entry in entries():
        for path, text in stand_in(entry)["files"].items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(text)
    shutil.copyfile(MANIFEST, tmp_path / "gemmwatch.json")
    for desc in load_folder(tmp_path):
        assert set(desc.files) == {desc.source, "src/common/common.h"}, desc.name
        system = resolve_includes(desc.files, desc.source, desc.include_dirs, compiler="nvcc").system
        assert {"cublas_v2.h", "unistd.h"} <= system, desc.name


# --- with the repository -----------------------------------------------------------------------------

def _archived(into: Path) -> bool:
    given = os.environ.get("CUDA_HGEMM_REPO")
    for folder in ([Path(given)] if given else []) + [ROOT / ".devkit" / "repos" / "cuda_hgemm"]:
        if (folder / "src" / "common" / "common.h").is_file():
            shutil.copytree(folder, into)
            return True
    if (MIRROR / "HEAD").is_file() and shutil.which("git"):
        tar = subprocess.run(["git", "-C", str(MIRROR), "archive", COMMIT], capture_output=True, timeout=60)
        if tar.returncode == 0:
            into.mkdir()
            with tarfile.open(fileobj=BytesIO(tar.stdout)) as archive:
                archive.extractall(into, filter="data")
            return True
    return False


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cuda_hgemm") / "repo"
    if not _archived(folder):
        pytest.skip(f"Bruce-Lee-LY/cuda_hgemm@{COMMIT} is not here ($CUDA_HGEMM_REPO, .devkit/repos/cuda_hgemm "
                    f"or {MIRROR}): the repository is not vendored into the tests")
    shutil.copyfile(MANIFEST, folder / "gemmwatch.json")
    return folder


def test_the_repository_with_the_manifest_loads_as_gemmwatch_ci_loads_it(repo):
    kernels = load_folder(repo)
    assert [k.name for k in kernels] == [e["name"] for e in entries()]
    for k in kernels:
        assert set(k.files) == {k.source, "src/common/common.h", "src/common/logging.h", "src/common/ptx.h",
                                "src/common/util.h"}, k.name
        assert re.search(rf"\bvoid {k.launcher}\(half \*A, half \*B, half \*C, size_t M, size_t N, size_t K\)",
                         k.files[k.source]), k.name
        assert re.search(rf"__global__ void {k.entry}\(", k.files[k.source]), k.name
        system = resolve_includes(k.files, k.source, k.include_dirs, compiler="nvcc").system
        assert {"cublas_v2.h", "unistd.h", "sys/syscall.h", "mma.h", "cuda_fp16.h"} <= system, k.name


def _defines(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^#define (\w+) ([^/\n]+)", text, re.M)}


def _arguments(text: str) -> list[str]:
    """A call's arguments, split at its own commas (not those of a call inside it)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


def _evaluate(expr: str, defines: dict[str, str], extra: dict[str, int]) -> int:
    """A C expression of the launcher's (defines, div_ceil, std::max, sizeof(half)) at the given sizes."""
    expr = expr.replace("std::max", "max").replace("sizeof(half)", "2").replace("div_ceil", "cdiv")
    for _ in range(4):  # defines that name defines
        expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: defines.get(m.group(0), m.group(0)), expr)
    for name, value in extra.items():
        expr = re.sub(rf"\b{re.escape(name)}\b", str(value), expr)
    assert re.fullmatch(r"[0-9 +*/%(),cdivmax]+", expr), expr  # nothing but arithmetic is evaluated
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}},  # noqa: S307 - checked above
                    {"max": max, "cdiv": lambda a, b: -(-a // b)}))


@pytest.mark.parametrize(("m", "n", "k"), [(4096, 4096, 4096), (512, 2048, 1024), (8192, 256, 96)])
def test_block_grid_and_shared_memory_are_what_each_launcher_computes(repo, m, n, k):
    for desc in load_folder(repo):
        text = desc.files[desc.source]
        launcher = text[text.index(f"void {desc.launcher}("):]
        defines = _defines(text)
        block = _arguments(re.search(r"dim3 block\(([^)]*)\)", launcher).group(1))
        block = [_evaluate(b, defines, {}) for b in block]
        sizes = {"M": m, "N": n, "K": k}
        grid = [_evaluate(g.replace("block.x", str(block[0])).replace("block.y", str(block[-1])), defines, sizes)
                for g in _arguments(re.search(r"dim3 grid\((.*)\);", launcher).group(1))]
        smem = 0
        if found := re.search(r"size_t smem_max_size =\s*(std::max\(.*?\));", text, re.S):
            smem = _evaluate(" ".join(found.group(1).split()), defines, {})
        launch = resolve(desc, {}, H100_FIGURES, "job")
        assert list(launch.block) + [1] * (3 - len(launch.block)) == block + [1] * (3 - len(block)), desc.name
        assert list(launch.grid(m, n, k)) == grid + [1] * (3 - len(grid)), desc.name
        assert launch.dynamic_smem(m, n, k) == smem, desc.name


def _worker_toolkit_has_cublas() -> bool:
    from worker.compile.nvcc import nvcc_path, toolkit_root

    nvcc = nvcc_path(Settings())
    return bool(nvcc) and (Path(toolkit_root(nvcc)) / "include" / "cublas_v2.h").is_file()


@pytest.mark.parametrize("name", [f"cuda_hgemm_{Path(p).stem}" for p in KERNEL_FILES])
def test_each_launcher_builds_for_sm_90_through_the_workers_nvcc(repo, name, shared_kernel_cache):
    from worker.compile import compiler, launcher_library
    from worker.arguments import kernel_args
    from worker.launch.host_jail import landlock_abi

    if landlock_abi() < 4 or shutil.which("g++") is None:
        pytest.skip("needs Landlock ABI 4 and g++ (nvcc's host compiler)")
    if not _worker_toolkit_has_cublas():
        pytest.skip("the nvcc gemmwatch builds with has no cublas_v2.h in its toolkit (the repository's common.h "
                    "includes it): put the nvidia-cublas wheel's headers beside it, or name one in GEMMWATCH_NVCC")
    desc = next(d for d in load_folder(repo, [name]))
    cfg = Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    launch = resolve(desc, {}, H100_FIGURES, "job")
    library = launcher_library.build(launch, "9.0", cfg)
    assert library.compiler.startswith("nvcc "), library.compiler
    assert library.plan.describe() == LAUNCHER_PARAMS
    built = compiler.compile_launch(launch, "9.0", cfg)  # the entry, whose resources a case reports
    assert kernel_args.load(built, launch, lambda symbol: symbol).function.startswith(f"_Z{len(desc.entry)}{desc.entry}")
