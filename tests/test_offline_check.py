"""`gemmwatch check`: a kernels folder built here with no GPU and no server, as a worker builds it.
The real CLI in a process of its own, the real compilers (NVRTC, nvcc, Triton) and the real folder
loader; each refusal tried by writing the folder a user would get wrong."""

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
ARGS8 = "int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C"
BODY = ("int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (r < M && c < N) { float s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];\n"
        "        C[r * N + c] = alpha * s + beta * C[r * N + c]; }\n")


def check(folder: Path, *options: str, cwd: Path) -> subprocess.CompletedProcess:
    # a generous compile limit: nvcc and Triton on a busy 2-core machine
    env = {**os.environ, "GEMMWATCH_DATA_DIR": str(cwd / "data"), "COLUMNS": "400", "GEMMWATCH_COMPILE_TIMEOUT_S": "300"}
    return subprocess.run([sys.executable, "-m", "cli.main", "check", "--kernels-dir", str(folder), *options],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def kernel(name: str, source: str, entry: str) -> dict:
    return {"name": name, "technique": f"{name}: one thread per element of C", "source": source, "entry": entry,
            "block": [16, 16], "grid": {"tile": [16, 16]}}


def row(out: str, name: str) -> str:
    """The table's row of one kernel."""
    found = [line for line in out.splitlines() if line.startswith(f"│ {name} ")]
    assert len(found) == 1, out
    return found[0]


@pytest.fixture
def folder(tmp_path) -> Path:
    """A folder a user got partly wrong: one kernel right, one that does not compile, one whose
    parameters are not its args, one whose entry no file defines."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ok.cu").write_text(f'extern "C" __global__ void gemm_ok({ARGS8}) {{\n    {BODY}}}\n')
    (repo / "broken.cu").write_text(f'extern "C" __global__ void gemm_broken({ARGS8}) {{\n'
                                    "    int r = threadIdx.x\n    C[r] = 0;\n}\n")
    (repo / "short.cu").write_text('extern "C" __global__ void gemm_short(int M, int N, int K, const float* A, '
                                   'const float* B, float* C) {}\n')
    (repo / "gemmwatch.json").write_text(json.dumps([
        kernel("ok", "ok.cu", "gemm_ok"), kernel("broken", "broken.cu", "gemm_broken"),
        kernel("short", "short.cu", "gemm_short"), kernel("elsewhere", "ok.cu", "gemm_nowhere")]))
    return repo


def test_each_kernel_is_built_and_each_failure_named_with_the_compilers_own_words(folder, tmp_path):
    run = check(folder, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "built for compute capability 9.0 (H100 SXM's figures)" in out
    assert " yes " in row(out, "ok") and "NVRTC" in row(out, "ok") and "8 args fit its parameters" in row(out, "ok")
    assert " no " in row(out, "broken") and 'broken.cu(3): error: expected a ";"' in row(out, "broken")
    assert " no " in row(out, "short") and "gemm_short takes 6 parameter(s)" in row(out, "short")
    assert " no " in row(out, "elsewhere") and "gemm_nowhere" in row(out, "elsewhere")
    # below the table, each log whole: the line the compiler pointed at, and its count of errors
    assert "      C[r] = 0;" in out and '1 error detected in the compilation of "broken.cu"' in out


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_a_failure_reads_by_its_error_line_where_the_log_starts_elsewhere(tmp_path, compiler):
    """A log whose first lines are a warning (or nvcc's "In file included from ..."): the table
    shows the error itself."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "inc.h").write_text("__device__ inline int helper() { int never_read = 1; return 2; }\n"
                                "__device__ inline int broken() { return 1 }\n")
    (repo / "k.cu").write_text(f'#include "inc.h"\nextern "C" __global__ void gemm_ok({ARGS8}) {{\n    {BODY}}}\n')
    (repo / "gemmwatch.json").write_text(json.dumps([{**kernel("broken_header", "k.cu", "gemm_ok"),
                                                       "compiler": compiler}]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    shown = row(run.stdout, "broken_header")
    assert "inc.h" in shown and "error" in shown and "never_read" not in shown, shown
    assert "never_read" in run.stdout.split("broken_header:")[-1]  # the warning is in the whole log below


def test_a_folder_that_builds_exits_0_and_a_subset_is_only_that_subset(folder, tmp_path):
    run = check(folder, "--variants", "ok", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 kernels of" in run.stdout and "broken" not in run.stdout
    run = check(FIXTURES / "kernel_repo", cwd=tmp_path)  # a template entry with tunables among them
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(tunables: TILE_M 64, TILE_N 64, THREAD_M 8)" in row(run.stdout, "column_strip")
    assert all(" yes " in row(run.stdout, name) for name in ("rowwise", "column_strip", "colmajor"))


@pytest.mark.parametrize("include", ['"/etc/hostname"', '"../outside.h"'])
def test_a_source_that_reaches_outside_its_folder_is_refused_as_a_worker_refuses_it(tmp_path, include):
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "outside.h").write_text("#define SECRET_WORD 424242\n")
    (repo / "k.cu").write_text(f"#include {include}\n"
                               f'extern "C" __global__ void gemm_ok({ARGS8}) {{\n    {BODY}}}\n')
    (repo / "gemmwatch.json").write_text(json.dumps([kernel("reach", "k.cu", "gemm_ok")]))
    run = check(repo, cwd=tmp_path)
    said = run.stdout + run.stderr
    assert run.returncode == 2 and "source refused: k.cu, line 1" in run.stderr, said
    assert "424242" not in said and "┏" not in run.stdout


@pytest.mark.parametrize("options,said", [
    (("--arch", "7.5"), "no reference GPU for compute capability 7.5; known: 8.0, 8.9, 9.0"),
    (("--variants", "ok,okk"), "no kernel named okk in its gemmwatch.json"),
])
def test_options_that_cannot_be_met_are_refused_with_exit_2(folder, tmp_path, options, said):
    run = check(folder, *options, cwd=tmp_path)
    assert run.returncode == 2 and said in run.stderr, run.stdout + run.stderr
    assert "┏" not in run.stdout  # refused before anything is built


def test_a_folder_without_a_manifest_or_with_a_bad_one_is_refused_with_exit_2(folder, tmp_path):
    run = check(tmp_path, cwd=tmp_path)
    assert run.returncode == 2 and "no gemmwatch.json describes its kernels" in run.stderr, run.stderr
    (folder / "gemmwatch.json").write_text('[{"name": "ok", "source": "ok.cu"')
    run = check(folder, cwd=tmp_path)
    assert run.returncode == 2 and "not JSON" in run.stderr, run.stderr


def test_an_nvcc_launcher_a_triton_kernel_and_a_triton_wrapper_s_kernel_are_built(tmp_path):
    run = check(FIXTURES / "launcher_repo", "--variants", "launcher_run_sgemm_tiled,launcher_sgemm_tiled", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "launcher run_sgemm_tiled: 9 args fit its parameters" in row(run.stdout, "launcher_run_sgemm_tiled")
    # The kernel it launches is found in its build, as a worker finds it for its resources.
    assert re.search(r"entry sgemm_tiled<32>; \d+ registers", row(run.stdout, "launcher_run_sgemm_tiled"))
    assert "nvcc" in row(run.stdout, "launcher_sgemm_tiled") and " yes " in row(run.stdout, "launcher_sgemm_tiled")
    run = check(FIXTURES / "triton_repo", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " yes " in row(run.stdout, "triton_matmul_fp16") and "Triton" in row(run.stdout, "triton_matmul_fp16")
    run = check(FIXTURES / "triton_wrapper_repo", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("wrapped_matmul_fp16", "wrapped_persistent_fp16"):  # read on stand-ins, then built as by hand
        assert " yes " in row(run.stdout, name) and "entry scaled_matmul" in row(run.stdout, name), run.stdout


def test_a_wrapper_that_cannot_be_read_or_makes_another_c_fails_the_check_with_the_reason(tmp_path):
    """Read with no GPU, as a worker reads it: a wrapper making two launches, and an FP8 wrapper making an
    FP16 C described with FP8's default BF16 C, each a "no" saying why; the same FP8 wrapper described with
    "output": "fp16" builds, its float scales fitting the cubin's parameters."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "wrappers.py").write_text((FIXTURES / "triton_wrapper_repo" / "wrappers.py").read_text())
    wrapped = {"language": "triton", "source": "wrappers.py"}
    kernels = [{"name": "twice", **wrapped, "wrapper": "twice", "compute_mode": "fp16"},
               {"name": "fp8_bf16_c", **wrapped, "wrapper": "split_k_fp8", "compute_mode": "fp8"},
               {"name": "fp8_fp16_c", **wrapped, "wrapper": "split_k_fp8", "compute_mode": "fp8", "output": "fp16"}]
    (folder / "gemmwatch.json").write_text(json.dumps(kernels))
    run = check(folder, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert " no " in row(run.stdout, "twice") and "made 2 Triton launches" in run.stdout, run.stdout
    assert " no " in row(run.stdout, "fp8_bf16_c") and 'say "output": "fp16"' in run.stdout, run.stdout
    assert " yes " in row(run.stdout, "fp8_fp16_c"), run.stdout
    assert "entry split_k_scaled: 14 args fit" in row(run.stdout, "fp8_fp16_c"), run.stdout
    run = check(FIXTURES / "helion_kernel", cwd=tmp_path)  # Helion writes its Triton code on the worker
    assert run.returncode == 0 and "not checked" in row(run.stdout, "helion_pinned"), run.stdout + run.stderr


LOCAL_ARRAY = ("__device__ int pick(int i) { return i; }\n"
               f'extern "C" __global__ void gemm_local({ARGS8}) {{\n'
               "    float scratch[64];\n"
               "    for (int i = 0; i < 64; ++i) scratch[i] = A[i * (threadIdx.x + 1) % (M * K)];\n"
               "    C[threadIdx.x] = scratch[(threadIdx.x * 7 + K) % 64];\n}\n")


def test_the_resources_said_are_the_ones_cuobjdump_reads_from_the_same_cubin():
    """Registers, the stack frame and static shared memory read from the cubin with no GPU, against
    cuobjdump's REG, STACK and SHARED for the same file: built-ins of every kind, and a kernel whose
    local array is indexed at run time (so it lives in its stack frame, in local memory)."""
    import re

    from core.description.builtins import builtin_kernels
    from core.description.kernel import resolve
    from core.description.kernel_description import KernelDescription
    from core.settings import Settings
    from tests.fake_gpu import H100_FIGURES
    from worker.compile import compiler, cubin_info, nvcc

    tool = nvcc.toolkit_program("cuobjdump")
    if tool is None:
        pytest.skip("needs cuobjdump (gemmwatch[compile])")
    local = KernelDescription.model_validate({**kernel("local", "k.cu", "gemm_local"), "files": {"k.cu": LOCAL_ARRAY}})
    descriptions = [builtin_kernels()[n] for n in ("naive", "warp_tile_large", "bf16_wgmma_persistent")] + [local]
    seen_local = False
    for desc in descriptions:
        built = compiler.compile_launch(resolve(desc, None, H100_FIGURES, "builtin"), "9.0", Settings())
        (only,) = built.kernels
        ours = cubin_info.resources(built.cubin_path.read_bytes(), only["symbol"])
        theirs = subprocess.run([tool, "--dump-resource-usage", str(built.cubin_path)], capture_output=True, text=True,
                                check=True).stdout
        figures = {k: int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED):(\d+)", theirs)}
        assert ours["registers"] == figures["REG"] and ours["stack_bytes"] == figures["STACK"], (desc.name, ours, theirs)
        assert ours.get("static_shared_bytes", 0) == figures["SHARED"], (desc.name, ours, theirs)
        seen_local |= ours["stack_bytes"] > 0
    assert seen_local  # the local array did land in the stack frame: the figure was tried where it is not 0


def test_a_kernel_row_says_its_registers_and_its_stack_frame(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "k.cu").write_text(LOCAL_ARRAY)
    (repo / "gemmwatch.json").write_text(json.dumps([kernel("local", "k.cu", "gemm_local")]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"; \d+ registers, [\d,]+ B stack frame", row(run.stdout, "local")), row(run.stdout, "local")


def test_a_launchers_entry_the_build_does_not_make_is_a_failure_not_a_pass(tmp_path):
    """The entry of a launcher's description is built by the worker for its resources: a misspelt one
    fails the job's case there, so it fails here too, with the launcher itself building."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "launcher_repo", repo)
    manifest = json.loads((repo / "gemmwatch.json").read_text())
    kernels = manifest["kernels"] if isinstance(manifest, dict) else manifest
    [described] = [k for k in kernels if k["name"] == "launcher_run_sgemm_tiled"]
    (repo / "gemmwatch.json").write_text(json.dumps([{**described, "entry": "sgemm_tilde<32>"}]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert " no " in row(run.stdout, "launcher_run_sgemm_tiled")
    assert "sgemm_tilde" in run.stdout.split("launcher_run_sgemm_tiled", 2)[-1], run.stdout


def test_a_file_with_host_code_built_by_nvrtc_is_told_to_use_nvcc(tmp_path):
    """NVRTC refuses a .cu that holds its repository's main: the failure says what builds such a file,
    not only NVRTC's own advice (-default-device, which would make the host code device code)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "with_main.cu").write_text(f'extern "C" __global__ void gemm_ok({ARGS8}) {{\n    {BODY}}}\n'
                                       "int main() { float* p; cudaMalloc(&p, 4); return 0; }\n")
    (repo / "gemmwatch.json").write_text(json.dumps([kernel("with_main", "with_main.cu", "gemm_ok")]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    failure = run.stdout.split("\nwith_main:\n", 1)[-1]
    assert "host functions are not allowed in JIT mode" in failure, run.stdout
    assert 'set "compiler": "nvcc"' in failure, run.stdout
    # Built as the hint says, the same file builds.
    (repo / "gemmwatch.json").write_text(json.dumps([{**kernel("with_main", "with_main.cu", "gemm_ok"),
                                                      "compiler": "nvcc"}]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 0 and " yes " in row(run.stdout, "with_main"), run.stdout + run.stderr


def test_check_run_inside_a_repository_writes_nothing_into_it(tmp_path):
    """Run from the repository's own folder, as a user would, with no GEMMWATCH_DATA_DIR: its builds go
    to the user's cache folder (XDG_CACHE_HOME), not into a `.gemmwatch/` of untracked files there."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ok.cu").write_text(f'extern "C" __global__ void gemm_ok({ARGS8}) {{\n    {BODY}}}\n')
    (repo / "gemmwatch.json").write_text(json.dumps([kernel("ok", "ok.cu", "gemm_ok")]))
    before = sorted(p.name for p in repo.iterdir())
    env = {k: v for k, v in os.environ.items() if k != "GEMMWATCH_DATA_DIR"} | {
        "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT), "COLUMNS": "400",
        "GEMMWATCH_COMPILE_TIMEOUT_S": "300"}
    run = subprocess.run([sys.executable, "-m", "cli.main", "check"], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0 and " yes " in row(run.stdout, "ok"), run.stdout + run.stderr
    assert sorted(p.name for p in repo.iterdir()) == before
    assert any((tmp_path / "cache" / "gemmwatch").rglob("*.cubin")), list((tmp_path / "cache").rglob("*"))


TEMPLATED_ON_A_TYPE = ("namespace cfg { template <typename T, int BM, int STAGES = 2> struct Tile { using type = T; }; }\n"
                       "using real = float;\n"
                       f"template <typename Config>\n__global__ void gemm_cfg({ARGS8}) {{\n    {BODY}}}\n"
                       "template __global__ void gemm_cfg<cfg::Tile<float, 16>>(int, int, int, float, const float*, "
                       "const float*, float, float*);\n")


def test_an_entry_templated_on_a_namespaced_type_is_found_by_either_compiler(tmp_path):
    """CuTe's and CUTLASS's way: a kernel instantiated on a configuration type, named as C++ names it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "k.cu").write_text(TEMPLATED_ON_A_TYPE)
    entry = "gemm_cfg<cfg::Tile<float, 16>>"
    (repo / "gemmwatch.json").write_text(json.dumps([kernel("by_nvrtc", "k.cu", entry),
                                                     {**kernel("by_nvcc", "k.cu", entry), "compiler": "nvcc"}]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("by_nvrtc", "by_nvcc"):
        assert f"entry {entry}: 8 args fit its parameters" in row(run.stdout, name)
    # Spelled through an alias, its default argument left out, as C++ lets it be: the demangler's full
    # name (gemm_cfg<cfg::Tile<float, 16, 2> >) is the one instance of the template the build made.
    spelled = "gemm_cfg<cfg::Tile<real, 16>>"
    (repo / "gemmwatch.json").write_text(json.dumps([kernel("by_nvrtc", "k.cu", spelled),
                                                     {**kernel("by_nvcc", "k.cu", spelled), "compiler": "nvcc"}]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    # Two instances of the template in the build: which one is meant is not guessed.
    (repo / "k.cu").write_text(TEMPLATED_ON_A_TYPE + "template __global__ void gemm_cfg<cfg::Tile<float, 32>>(int, int, "
                                                     "int, float, const float*, const float*, float, float*);\n")
    run = check(repo, "--variants", "by_nvcc", cwd=tmp_path)
    assert run.returncode == 1 and "matches more than one" in run.stdout, run.stdout + run.stderr


def test_a_cuda_samples_style_kernel_builds_as_it_is(tmp_path):
    """cuda-samples' matrixMul.cu as it ships: <cuda_profiler_api.h> (not in the nvcc wheel's toolkit
    until its own wheel), <helper_cuda.h> from Common/ (include_dirs), and in that header MSVC's
    `#pragma warning` under #ifdef WIN32. Its six-line manifest builds with no file changed."""
    repo = tmp_path / "repo"
    (repo / "Common").mkdir(parents=True)
    (repo / "Common" / "helper_cuda.h").write_text("#pragma once\n#ifdef WIN32\n#pragma warning(disable : 4996)\n#endif\n"
                                                 "inline int helper_value() { return 1; }\n")
    (repo / "matrixMul.cu").write_text("#include <cuda_profiler_api.h>\n#include <helper_cuda.h>\n"
                                       f"template <int BLOCK_SIZE>\n__global__ void mm({ARGS8}) {{\n    {BODY}}}\n"
                                       "template __global__ void mm<16>(int, int, int, float, const float*, const float*, "
                                       "float, float*);\n")
    (repo / "gemmwatch.json").write_text(json.dumps([{**kernel("matrixmul", "matrixMul.cu", "mm<16>"), "compiler": "nvcc",
                                                      "include_dirs": ["Common"]}]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 0 and " yes " in row(run.stdout, "matrixmul"), run.stdout + run.stderr


def test_a_header_whose_name_holds_a_space_builds_as_it_is(tmp_path):
    """salykova/sgemm.cu's kernels include "helper_cuda ptx.h" (found through its CMake's `-I common`), and its
    launcher takes alpha and beta as `const float*` in a header (`src/sgemm.cuh`). Both compilers build the
    kernel, from a folder whose own name holds a space too, and nvcc the launcher; the manifest names no shim."""
    repo = tmp_path / "repo"
    (repo / "common").mkdir(parents=True)
    (repo / "src" / "my kernels").mkdir(parents=True)
    (repo / "common" / "helper_cuda ptx.h").write_text("#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n")
    (repo / "src" / "my kernels" / "basic.cuh").write_text(
        f'#include "helper_cuda ptx.h"\n__global__ void basic({ARGS8}) {{\n    {BODY}}}\n')
    (repo / "src" / "sgemm.cuh").write_text(
        '#include "my kernels/basic.cuh"\n'
        "void sgemm(int m, int n, int k, const float* alpha, const float* A, const float* B, const float* beta,\n"
        "           float* C) {\n"
        "    basic<<<dim3((n + 15) / 16, (m + 15) / 16), dim3(16, 16)>>>(m, n, k, *alpha, A, B, *beta, C);\n}\n")
    launcher = {"name": "by_launcher", "source": "src/sgemm.cuh", "launcher": "sgemm", "entry": "basic",
                "compiler": "nvcc", "include_dirs": ["common"], "flags": ["-DGPUCC=90"]}
    (repo / "gemmwatch.json").write_text(json.dumps([
        {**kernel("by_nvrtc", "src/my kernels/basic.cuh", "basic"), "include_dirs": ["common"]},
        {**kernel("by_nvcc", "src/my kernels/basic.cuh", "basic"), "include_dirs": ["common"], "compiler": "nvcc"},
        launcher]))
    run = check(repo, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("by_nvrtc", "by_nvcc", "by_launcher"):
        assert " yes " in row(run.stdout, name), run.stdout
