"""tests/fixtures/launcher_repo on the H100 (issue 35): kernel files holding their launchers and
host code, built by nvcc with the repository's flags, each parameter passed in the type its cubin
declares (size_t sizes, __half alpha and beta, 64-bit extern "C" sizes), and a WMMA kernel that
includes <mma.h>, built by nvcc and by NVRTC (its headers from the toolkit of the NVRTC in use).

Through a real GPU worker (the API, Redis, the worker's GPU process); every kernel verified at an
odd size, where a size passed as 32 bits to a size_t parameter would shift every parameter after
it and fail the check.
"""

from pathlib import Path

import pytest

from core.description.kernel_folder import load_folder
from tests.conftest import wait_for_job

pytestmark = pytest.mark.gpu

REPO = Path(__file__).parent / "fixtures" / "launcher_repo"


def test_the_launcher_repository_verifies_on_the_gpu(gpu_stack):
    client = gpu_stack
    sources = [d.model_dump(mode="json") for d in load_folder(REPO)]
    posted = client.post("/api/jobs", json={"sources": sources, "sizes": [[1000, 1003, 997], [64, 4096, 256]]})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=600)
    assert job["status"] == "succeeded", job["error"]
    got = {(r["variant"], r["m"]): r for r in job["results"]}
    assert len(got) == 2 * len(sources)
    bad = {k: r["error"] for k, r in got.items() if not r["verified"]}
    assert not bad, bad
    for (name, _m), r in got.items():
        compiler = r["env"]["resources"]["compiler"]
        assert compiler.startswith("nvcc 13." if name.startswith("launcher_") else "NVRTC "), (name, compiler)
        assert r["gflops"] and r["gflops"] > 0
    assert got[("launcher_sgemm_tiled", 1000)]["env"]["launch"]["params"][:3] == [
        "M: unsigned long", "N: unsigned long", "K: unsigned long"]
    assert got[("launcher_hgemm_half_scalars", 1000)]["env"]["launch"]["params"][3] == "alpha: __half"


def test_a_wrong_wmma_kernel_is_refused_on_the_gpu(gpu_stack):
    """The check is live for the tensor-core kernel: one k-step skipped is unverified."""
    client = gpu_stack
    desc = next(d for d in load_folder(REPO) if d.name == "launcher_wmma_hgemm").model_dump(mode="json")
    desc["files"]["src/wmma_kernel.cuh"] = desc["files"]["src/wmma_kernel.cuh"].replace(
        "for (int k0 = 0; k0 < K; k0 += 16)", "for (int k0 = 16; k0 < K; k0 += 16)")
    desc["name"] = "wmma_skips_a_step"
    job = wait_for_job(client, client.post("/api/jobs", json={"sources": [desc], "sizes": [[256, 256, 256]]}).json()["id"],
                       timeout=300)
    (result,) = job["results"]
    assert not result["verified"] and result["gflops"] is None, result
    assert "wrong result" in result["error"], result["error"]


# A kernel as YHs_Sample's and CuTe's are written: rows' lengths passed in bytes, worked out from the
# case's sizes by `args` expressions, and the kernel a template on a namespaced configuration type.
BYTE_STRIDES = """namespace cfg { template <typename T, int TILE, int STAGES = 2> struct Tile { using type = T; }; }
using real = float;
template <typename Config>
__global__ void gemm_bytes(const float* A, const float* B, float* C, int M, int N, int K, int a_row_bytes,
                           long b_row_bytes) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M || c >= N) return;
    const char* a = reinterpret_cast<const char*>(A) + (long)r * a_row_bytes;
    float s = 0;
    for (int k = 0; k < K; ++k)
        s += reinterpret_cast<const float*>(a)[k]
             * reinterpret_cast<const float*>(reinterpret_cast<const char*>(B) + k * b_row_bytes)[c];
    C[(long)r * N + c] = s;
}
template __global__ void gemm_bytes<cfg::Tile<float, 16>>(const float*, const float*, float*, int, int, int, int, long);
"""


def byte_strides_kernel(name: str, entry: str, a_row_bytes: str, compiler: str) -> dict:
    return {"name": name, "technique": "one thread per element of C, rows' lengths in bytes",
            "files": {"k.cu": BYTE_STRIDES}, "source": "k.cu", "entry": entry, "compiler": compiler,
            "args": ["A", "B", "C", "M", "N", "K", a_row_bytes, "=N * 4"], "block": [16, 16], "grid": {"tile": [16, 16]}}


def test_args_expressions_and_an_entry_templated_on_a_namespaced_type_verify_on_the_gpu(gpu_stack):
    """Each case's K * 4 and N * 4 reach the kernel in its parameters' own types (int, long); the entry
    spelled through an alias with a default argument left out is, for nvcc, the one instance the build
    made; with K * 2 the kernel reads A wrong and the check refuses it."""
    client = gpu_stack
    sources = [byte_strides_kernel("bytes_nvrtc", "gemm_bytes<cfg::Tile<float, 16>>", "=K * 4", "nvrtc"),
               byte_strides_kernel("bytes_nvcc_alias", "gemm_bytes<cfg::Tile<real, 16>>", "=K * 4", "nvcc")]
    posted = client.post("/api/jobs", json={"sources": sources, "sizes": [[1000, 1003, 997], [64, 4096, 256]]})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=600)
    assert job["status"] == "succeeded", job["error"]
    got = {(r["variant"], r["m"]): r for r in job["results"]}
    assert len(got) == 4, got.keys()
    for r in got.values():
        assert r["verified"] and r["error"] is None, (r["variant"], r["m"], r["error"])
        assert r["env"]["launch"]["params"][-2:] == ["=K * 4: int", "=N * 4: long"], r["env"]["launch"]
    # Half a row's bytes: each thread reads A's rows at the wrong place (K even, so the floats stay
    # aligned: an odd K would fault on a misaligned read instead, a case's error as well).
    wrong = byte_strides_kernel("bytes_half_a_row", "gemm_bytes<cfg::Tile<float, 16>>", "=K * 2", "nvcc")
    job = wait_for_job(client, client.post("/api/jobs", json={"sources": [wrong], "sizes": [[64, 4096, 256]]}).json()["id"],
                       timeout=600)
    (result,) = job["results"]
    assert not result["verified"] and "wrong result" in result["error"], result["error"]
