"""Issue 53: a worker's GPU process warms up as the worker starts (worker/measure/warm_up.py), so the
first job after a start does not pay CuPy's first compiles. Over the CPU double: the warm-up's cases,
a failing one, and a real Celery worker whose first job runs in the very process it warmed."""

import re
import time

from core.records.db import upgrade_database
from core.settings import Settings
from tests.conftest import make_client, make_settings, wait_for_job
from tests.fake_gpu import CpuRunner
from worker.measure.cases import TimingPolicy
from worker.measure.warm_up import WARM_UP_KERNELS, warm_up

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


def test_one_case_per_precision_runs_and_a_failing_one_does_not_stop_the_rest(tmp_path, monkeypatch,
                                                                              shared_kernel_cache):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")  # FP8 is not applicable before sm_89
    report = warm_up(CpuRunner(), POLICY)
    assert report["ran"] == list(WARM_UP_KERNELS) and report["failed"] == []
    monkeypatch.setenv("FAKE_GPU_WRONG_VARIANT", "bf16_mma_sync")
    report = warm_up(CpuRunner(), POLICY)
    assert report["ran"] == [k for k in WARM_UP_KERNELS if k != "bf16_mma_sync"]
    assert len(report["failed"]) == 1 and report["failed"][0].startswith("bf16_mma_sync: ")


def test_a_worker_is_ready_once_warm_and_its_first_job_runs_in_the_process_it_warmed(tmp_path, pg_url, redis_url,
                                                                                   start_worker, shared_kernel_cache):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    worker = start_worker(cfg, GEMMWATCH_WARM_UP="1", GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache),
                          FAKE_GPU_COMPUTE_CAPABILITY="9.0")
    deadline = time.monotonic() + 120  # registration is the heartbeat thread's first act: polled for
    while "registered as" not in (log := worker.log_path.read_text(errors="replace")):
        assert time.monotonic() < deadline, log[-3000:]
        time.sleep(0.1)
    warmed = re.search(r"GPU process (\d+) warmed up in [\d.]+ s: (.*)", log)
    assert warmed, log[-3000:]
    assert warmed.group(2).startswith(", ".join(WARM_UP_KERNELS)) and "failed" not in warmed.group(2)
    # The worker joined the fleet and took jobs only once warm: the study of a CI run's time
    # (scripts/studies/ci_wall_time.sh) waits for it to be listed, as a person reads /api/workers.
    assert log.index("warmed up") < log.index("registered as") and log.index("warmed up") < log.index(" ready.")

    resp = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[32, 32, 32]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    for r in job["results"]:
        env = client.get(f"/api/results/{r['id']}").json()["env"]
        assert env["gpu"]["gpu_process_pid"] == int(warmed.group(1))  # not a second process started for the job


def test_a_warm_up_that_kills_its_process_leaves_the_worker_serving_from_a_fresh_one(tmp_path, pg_url, redis_url,
                                                                                   start_worker, shared_kernel_cache):
    """The first warm-up case dies as a sticky CUDA fault would (the CPU double's crash): the worker says so,
    still joins the fleet, and its first job runs in a GPU process of its own."""
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    worker = start_worker(cfg, GEMMWATCH_WARM_UP="1", GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache),
                          FAKE_GPU_CRASH_VARIANT="naive")
    log = worker.log_path.read_text(errors="replace")
    assert "the GPU process died while it warmed up" in log, log[-3000:]
    resp = client.post("/api/jobs", json={"variants": ["smem_tiled"], "sizes": [[32, 32, 32]]})
    job = wait_for_job(client, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    assert job["results"][0]["verified"]
