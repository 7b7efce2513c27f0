"""The warm-up of a worker's GPU process on a GPU (worker/measure/warm_up.py, issue 53): through
gpu_process.start_warm, as the worker's start runs it, every precision's case runs on this GPU, and a
job's case then runs in the same, warmed process."""

import pytest

from tests.test_gpu import POLICY
from worker import gpu_process
from worker.measure.cases import builtin_case
from worker.measure.warm_up import WARM_UP_KERNELS

pytestmark = pytest.mark.gpu

RUNNER = "worker.measure.runner:CupyRunner"


def test_the_worker_s_gpu_process_warms_every_precision_then_runs_a_job_s_case_itself():
    report = gpu_process.start_warm(RUNNER, POLICY, timeout_s=300)
    try:
        assert report is not None
        assert report["failed"] == [] and report["ran"] == list(WARM_UP_KERNELS)  # all five on sm_90
        gpu, conn = gpu_process.acquire(RUNNER, POLICY)
        conn.send("job")
        kind, identity = conn.recv()
        assert kind == "identity" and identity["gpu_process_pid"] == report["pid"]
        conn.send(builtin_case("smem_tiled", 1000, 1003, 997, seed=3))
        assert conn.recv() == ("started", 0)
        kind, _, outcome = conn.recv()
        assert kind == "result" and outcome.verified, outcome.error
        conn.send(None)
        assert conn.recv() == ("done",)
    finally:
        gpu_process.discard()
