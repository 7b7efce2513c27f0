"""CUDA's headers from the toolkit that compiles, wherever several CUDA installs sit side by side.

The H100 image held NVRTC 13 beside torch's CUDA 12 wheels: the first folder with cuda_fp16.h
was CUDA 12's nvidia/cuda_runtime/include, which has no crt/mma.h, so `#include <mma.h>` failed
with "1 catastrophic error" (issue 22). Here a machine with two CUDA header folders is built in a
temporary folder, and the folder of the compiler's own release must be taken, in either order.
"""

from pathlib import Path

import pytest

from core.description import kernel_includes
from core.settings import Settings
from worker.compile import compiler

WMMA = """#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void wmma_tile(const half *a, const half *b, float *c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}
"""


@pytest.fixture(autouse=True)
def no_installs_of_this_machine(monkeypatch):
    """The search sees the folders a test builds, and this environment's wheels (the NVRTC wheel's
    headers, release 13.5 on CI), never an explicit override or CUDA_HOME."""
    for name in ("GEMMWATCH_CUDA_INCLUDE_DIRS", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    kernel_includes.toolkit_include_dirs.cache_clear()
    yield
    kernel_includes.toolkit_include_dirs.cache_clear()


def fake_toolkit(home: Path, release: str, mma: bool) -> Path:
    """A toolkit's layout with just enough headers to be told apart: CUDART_VERSION, cuda_fp16.h,
    libcu++ in include/cccl, crt/mma.h where `mma`, and lib64/libnvrtc.so."""
    include = home / "include"
    (include / "cccl" / "cuda").mkdir(parents=True)
    major, minor = release.split(".")
    (include / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION  {int(major) * 1000 + int(minor) * 10}\n")
    (include / "cuda_fp16.h").write_text("// fp16\n")
    (include / "mma.h").write_text('#include "crt/mma.h"\n')
    if mma:
        (include / "crt").mkdir()
        (include / "crt" / "mma.h").write_text("// crt/mma.h\n")
    (home / "lib64").mkdir()
    (home / "lib64" / "libnvrtc.so").write_text("")
    return home


@pytest.fixture
def two_installs(tmp_path):
    """CUDA 12.4 without crt/mma.h (torch's wheels on the H100 image), CUDA 13.7 with it."""
    return fake_toolkit(tmp_path / "cuda-12.4", "12.4", mma=False), fake_toolkit(tmp_path / "cuda-13.7", "13.7", mma=True)


@pytest.mark.parametrize("order", ["12 first", "13 first"])
@pytest.mark.parametrize("version, taken", [("13.7", 1), ("12.4", 0)])
def test_the_headers_of_the_compilers_own_release_are_taken_in_either_order(two_installs, monkeypatch, order,
                                                                             version, taken):
    installs = two_installs if order == "12 first" else two_installs[::-1]
    monkeypatch.setattr(kernel_includes, "SYSTEM_TOOLKITS", tuple(str(home) for home in installs))
    chosen = two_installs[taken].resolve() / "include"
    assert kernel_includes.toolkit_include_dirs(None, version) == (str(chosen), str(chosen / "cccl"))


def test_the_nvrtc_librarys_own_toolkit_loses_to_the_compilers_release(two_installs, monkeypatch):
    """The NVRTC library pinned in CUDA 12.4's folder is searched first, but the compiler says
    13.7 (a library from a folder of another release, as a link can make it): 13.7's headers."""
    old, new = two_installs
    monkeypatch.setattr(kernel_includes, "SYSTEM_TOOLKITS", (str(new),))
    assert kernel_includes.search_roots(str(old / "lib64" / "libnvrtc.so"))[0] == old.resolve() / "include"
    assert kernel_includes.toolkit_include_dirs(str(old / "lib64" / "libnvrtc.so"), "13.7")[0] == str(
        new.resolve() / "include")


def test_an_explicit_list_of_folders_is_taken_as_it_is(two_installs, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_CUDA_INCLUDE_DIRS", f"{two_installs[0]}/include")
    explicit = Settings().cuda_include_dirs  # the setting, read from the environment as every setting is
    assert kernel_includes.toolkit_include_dirs(None, "13.7", explicit) == (f"{two_installs[0]}/include",)


def test_the_release_of_a_folder_of_headers_is_its_cudart_version(two_installs):
    assert kernel_includes.cuda_release(two_installs[1] / "include") == (13, 7)
    assert kernel_includes.cuda_release(two_installs[1]) is None


def test_an_nvcc_reads_the_headers_of_its_own_toolkit(two_installs):
    """nvcc's include folders are those nvcc.profile gives it: <toolkit>/include (or
    targets/<arch>/include, a link to it in a toolkit's layout) and its cccl folder."""
    old, new = two_installs
    (new / "bin").mkdir()
    (new / "bin" / "nvcc").write_text("")
    (new / "targets" / "x86_64-linux").mkdir(parents=True)
    (new / "targets" / "x86_64-linux" / "include").symlink_to(new / "include")
    include = new.resolve() / "include"
    assert kernel_includes.nvcc_include_dirs(str(new / "bin" / "nvcc")) == (str(include), str(include / "cccl"))


def nvrtc_version() -> str:
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def test_a_wmma_kernel_including_mma_h_compiles_beside_a_cuda_12_install(tmp_path, monkeypatch):
    """The must-show on CI: the NVRTC wheel of this environment, and beside it a CUDA 12 header
    folder without crt/mma.h that is searched first (as the NVRTC library's own toolkit). The
    headers of NVRTC's release are taken and the WMMA kernel compiles for sm_90 (no GPU needed)."""
    version = nvrtc_version()
    cuda12 = fake_toolkit(tmp_path / "cuda-12.4", "12.4", mma=False)
    monkeypatch.setattr(kernel_includes, "SYSTEM_TOOLKITS", ())
    headers = kernel_includes.resolve({"wmma.cu": WMMA}, "wmma.cu")
    assert headers.needs_toolkit
    dirs = kernel_includes.toolkit_include_dirs(str(cuda12 / "lib64" / "libnvrtc.so"), version)
    if not dirs or kernel_includes.cuda_release(Path(dirs[0])) != tuple(map(int, version.split("."))):
        pytest.skip(f"no CUDA headers of NVRTC's release {version} in this environment")
    assert (Path(dirs[0]) / "crt" / "mma.h").is_file()
    built = compiler.compile_kernel(WMMA, name="wmma.cu", options=["-arch=sm_90", *(f"-I{d}" for d in dirs)],
                                    untrusted=True, cfg=Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data")),
                                    headers=headers.by_name, include_dirs=dirs)
    assert built.cubin_path.stat().st_size > 0


def test_a_header_the_nvcc_in_use_lacks_but_a_full_toolkit_has_is_said_with_the_nvcc_to_set(tmp_path, monkeypatch):
    """The nvidia-cuda-nvcc wheel carries part of the toolkit: cuda-samples' matrixMul.cu includes
    <cuda_profiler_api.h>, which it lacks and /usr/local/cuda-13.0 had. nvcc's log says which file;
    the hint says which toolkit has it and what to set. A header no toolkit has gets no hint."""
    from worker.compile import nvcc

    wheel, full = tmp_path / "wheel" / "cu13", tmp_path / "cuda-13.0"
    for toolkit in (wheel, full):
        (toolkit / "bin").mkdir(parents=True)
        (toolkit / "bin" / "nvcc").write_text("")
        (toolkit / "include").mkdir()
    (full / "include" / "gw_profiler_api.h").write_text("#pragma once\n")
    monkeypatch.setenv("CUDA_HOME", str(full))
    log = "matrixMul.cu:44:10: fatal error: gw_profiler_api.h: No such file or directory\ncompilation terminated.\n"
    hint = nvcc.missing_header_hint(log, str(wheel / "bin" / "nvcc"))
    assert f"gw_profiler_api.h is a CUDA toolkit header that the nvcc in use ({wheel}/bin/nvcc) lacks" in hint, hint
    assert f"set GEMMWATCH_NVCC={full.resolve()}/bin/nvcc" in hint, hint
    # the toolkit in use is no other toolkit, and a header nobody has is left to nvcc's own words
    assert nvcc.missing_header_hint(log, str(full / "bin" / "nvcc")) == ""
    assert nvcc.missing_header_hint(log.replace("gw_profiler_api.h", "gw_nowhere.h"), str(wheel / "bin" / "nvcc")) == ""
    for header in ("cublas_v2.h", "cublasLt.h"):  # gemm-zoo's runner includes cuBLASLt's
        assert "install gemmwatch[gpu]" in nvcc.missing_header_hint(
            f"k.cu:1:10: fatal error: {header}: No such file or directory\n", str(wheel / "bin" / "nvcc"))
