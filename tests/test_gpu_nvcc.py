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
