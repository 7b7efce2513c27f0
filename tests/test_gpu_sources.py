"""A job's own source on a real GPU worker: the guards hold there, and honest sources still run.

Run on the lent H100 (`gpu` marker). Layer 1 through the API; layer 2 by the compile step as
the GPU worker's own process calls it, past layer 1; then a job with its own templated kernel,
and one with headers of its own, host and CUDA includes, is compiled in the confined process
(CUDA's header folders readable, nothing else), loaded by the GPU process and verified.
"""

import pytest

from core.records.db import upgrade_database
from tests.conftest import make_client, make_settings, wait_for_job
from tests.descriptions import one_file
from tests.test_compile_sandbox import CANARIES, KERNEL, assert_nothing_leaked, job_past_layer_1, past_layer_one  # noqa: F401
from worker.compile import compiler

pytestmark = pytest.mark.gpu

TEMPLATED = """
template <int TILE>
__global__ void my_gemm(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
"""


# A kernel as a repository holds it: a header of its own in a folder, host and CUDA includes.
WITH_HEADERS = {
    "src/my_gemm.cu": '#include <cstdio>\n#include <cuda_fp16.h>\n#include "common/tile.cuh"\n' + TEMPLATED,
    "src/common/tile.cuh": "#pragma once\n#include <algorithm>\ntypedef unsigned int index_t;\n",
}


def mine(**extra) -> dict:
    return one_file("mine", TEMPLATED, "my_gemm<16>", [16, 16], [16, 16], **extra)


@pytest.fixture
def make_stack(tmp_path, sqlite_url, redis_url, start_worker):
    def make(**env):
        cfg = make_settings(tmp_path, sqlite_url, redis_url)
        upgrade_database(cfg)
        # Planted in the worker's own environment (worker_env drops the test process's GEMMWATCH_*);
        # its DATABASE_URL and BROKER_URL stay real so that it can work.
        canaries = {k: v for k, v in CANARIES.items() if not k.endswith("_URL")}
        worker = start_worker(cfg, runner=None, GEMMWATCH_CASE_TIME_CAP_S="1", **canaries, **env)
        return cfg, make_client(cfg), worker

    return make


@pytest.fixture
def stack(make_stack):
    return make_stack()


def test_this_gpu_machine_confines_the_compiler(tmp_path):
    from core.settings import Settings

    found = compiler.probe(Settings(GEMMWATCH_DATA_DIR=str(tmp_path)))
    assert found.version and found.available, found.detail


@pytest.mark.parametrize("path", ["/etc/passwd", "/proc/self/environ"])
def test_layer_2_on_the_gpu_machine(tmp_path, monkeypatch, path):
    from core.settings import Settings
    from worker.compile.compiler import CompileError

    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(CompileError) as failed:
        compiler.compile_kernel(f'#include "{path}"\n' + KERNEL, name="evil.cu", options=["-arch=sm_90"],
                                untrusted=False, cfg=Settings(GEMMWATCH_DATA_DIR=str(tmp_path)))
    assert "cannot open source file" in str(failed.value)
    assert_nothing_leaked(str(failed.value))


def test_hostile_sources_are_refused_then_an_honest_templated_one_runs(stack):
    cfg, client, worker = stack
    for text in ('#include "/proc/self/environ"\n', '%:inc\\\nlude "/etc/passwd"\n', "#if __has_include(</etc/passwd>)\n#endif\n"):
        evil = one_file("evil", text + TEMPLATED, "my_gemm<16>", [16, 16], [16, 16])
        resp = client.post("/api/jobs", json={"sources": [evil], "sizes": [[64, 64, 64]]})
        assert resp.status_code == 422 and "root:" not in resp.text
    body = {"sources": [mine()], "variants": ["mine", "smem_tiled"], "sizes": [[1000, 1003, 997]]}
    job = wait_for_job(client, client.post("/api/jobs", json=body).json()["id"], timeout=180)
    assert job["status"] == "succeeded", job["error"]
    assert all(r["verified"] for r in job["results"]) and len(job["results"]) == 2
    assert "compiler confinement: Landlock" in worker.log()
    assert_nothing_leaked(worker.log())


def test_a_kernel_with_headers_of_its_own_and_system_includes_runs_on_the_gpu(stack):
    cfg, client, worker = stack
    source = {"name": "mine", "files": WITH_HEADERS, "source": "src/my_gemm.cu", "entry": "my_gemm<16>",
              "block": [16, 16], "grid": {"tile": [16, 16]}}
    job = wait_for_job(client, client.post("/api/jobs", json={"sources": [source], "sizes": [[1000, 1003, 997]]}).json()["id"],
                       timeout=180)
    assert job["status"] == "succeeded" and job["results"][0]["verified"], job["error"]
    assert_nothing_leaked(worker.log())


def test_a_job_past_layer_1_on_a_gpu_worker_leaks_nothing_then_a_normal_job_runs(make_stack, past_layer_one):
    """Must-show 1 on the GPU: jobs that include /proc/self/environ and /etc/passwd, stored
    without the API's check, reach the GPU worker's compile step (layer 1 taken out of that
    worker) and fail with nothing of the worker's environment (canaries planted by the fixture)
    in their error or the worker's log."""
    cfg, client, worker = make_stack(**past_layer_one)
    for path in ("/proc/self/environ", "/etc/passwd"):
        job = job_past_layer_1(cfg, client, f'#include "{path}"\n' + KERNEL)
        assert job["status"] == "failed" and "Permission denied" in job["error"], job
        assert_nothing_leaked(job["error"])
        assert cfg.resolved_database_url not in job["error"] and cfg.broker_url not in job["error"]
    body = {"sources": [mine()], "sizes": [[512, 512, 512]]}
    job = wait_for_job(client, client.post("/api/jobs", json=body).json()["id"], timeout=180)
    assert job["status"] == "succeeded" and job["results"][0]["verified"], job["error"]
    assert_nothing_leaked(worker.log())
