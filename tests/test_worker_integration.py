"""POST /api/jobs -> broker -> real Celery worker process -> database, on real services.

The GPU is replaced by tests/fake_gpu.py (a CPU double); everything else is the product.
"""

import pytest
from sqlalchemy import func, select

from core.records.db import session_factory, upgrade_database
from core.records.models import Gpu, Job, Result
from tests.conftest import make_client, make_settings, wait_for_job

SIZES = [[64, 48, 32], [7, 13, 5]]


@pytest.fixture(params=["redis+postgresql", "filesystem+sqlite"])
def stack(request, tmp_path, start_worker):
    """Production pairing (Redis broker, PostgreSQL) and the embedded one (no servers)."""
    if request.param == "redis+postgresql":
        cfg = make_settings(tmp_path, request.getfixturevalue("pg_url"), request.getfixturevalue("redis_url"))
    else:
        cfg = make_settings(tmp_path, request.getfixturevalue("sqlite_url"))
    upgrade_database(cfg)
    return cfg, make_client(cfg), start_worker


def count(cfg, model) -> int:
    with session_factory(cfg)() as db:
        return db.scalar(select(func.count()).select_from(model))


def test_job_runs_to_success_and_results_are_stored(stack):
    cfg, client, start_worker = stack
    start_worker(cfg)
    resp = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": SIZES,
                                          "commit": {"sha": "c0ffee12", "repo": "r", "branch": "main"}})
    assert resp.status_code == 202, resp.text
    assert resp.json()["status"] == "queued"
    job = wait_for_job(client, resp.json()["id"])

    assert job["status"] == "succeeded", job["error"]
    assert job["progress"] == {"done": 4, "total": 4}
    assert job["ran_on"] == "FAKE CPU double"
    assert [(r["variant"], r["m"], r["n"], r["k"]) for r in job["results"]] == [
        ("naive", 64, 48, 32), ("smem_tiled", 64, 48, 32), ("naive", 7, 13, 5), ("smem_tiled", 7, 13, 5)]
    for r in job["results"]:
        assert r["verified"] is True and r["rel_error"] < 1e-4
        assert r["gflops"] > 0 and r["cublas_gflops"] > 0 and r["pct_of_cublas"] > 0
        assert r["n_samples"] >= 10 and r["commit"] == "c0ffee12"
        assert r["gflops"] == pytest.approx(2 * r["m"] * r["n"] * r["k"] / (r["median_ms"] * 1e-3) / 1e9)
    assert count(cfg, Result) == 4 and count(cfg, Gpu) == 1

    listed = client.get("/api/results", params={"variant": "naive", "sha": "c0ffee", "m": 64}).json()
    assert [(r["variant"], r["m"]) for r in listed] == [("naive", 64)]
    detail = client.get(f"/api/results/{listed[0]['id']}").json()
    assert len(detail["samples_ms"]) == detail["n_samples"] >= 10
    assert detail["min_ms"] == min(detail["samples_ms"]) and detail["max_ms"] == max(detail["samples_ms"])
    assert detail["q1_ms"] <= detail["median_ms"] <= detail["q3_ms"]
    assert client.get("/api/results/424242").status_code == 404
    assert client.get("/api/gpus").json()[0]["model"] == "FAKE"


# Skinny shapes scaled for the CPU double: M walked at N=K=512, then one small N and one small K.
SKINNY = [[1, 512, 512], [16, 512, 512], [64, 512, 512], [512, 512, 512], [512, 16, 512], [512, 512, 16]]


def test_skinny_shapes_are_measured_as_asked_and_swept(stack):
    cfg, client, start_worker = stack
    start_worker(cfg)
    resp = client.post("/api/jobs", json={"variants": ["naive", "warp_tile"], "sizes": SKINNY,
                                          "commit": {"sha": "5c1a9e01", "repo": "r", "branch": "main"}})
    job = wait_for_job(client, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    # Each case ran at its own M, N and K (A is M×K, B is K×N: a swap would fail verification).
    assert [(r["m"], r["n"], r["k"]) for r in job["results"]] == [tuple(s) for s in SKINNY for _ in range(2)]
    for r in job["results"]:
        assert r["verified"] is True and r["rel_error"] < 1e-4 and r["n_samples"] >= 10
        assert r["gflops"] == pytest.approx(2 * r["m"] * r["n"] * r["k"] / (r["median_ms"] * 1e-3) / 1e9)
    # The dashboard's sweep of M at N=K=512 holds exactly the four cases measured there.
    body = client.get("/sweep", params={"mode": "cold", "vary": "m", "n": 512, "k": 512, "format": "json"}).json()
    assert [(r["variant"], r["m"]) for r in body["rows"]] == [
        (v, m) for v in ("naive", "warp_tile") for m in (1, 16, 64, 512)]
    assert all(r["gpu"] == "FAKE" and r["gflops"] > 0 for r in body["rows"])


def test_a_crashing_kernel_fails_its_job_and_the_worker_keeps_serving(stack):
    cfg, client, start_worker = stack
    start_worker(cfg, FAKE_GPU_CRASH_VARIANT="smem_tiled")
    bad = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled", "warp_tile"], "sizes": [[16, 16, 16]]}).json()
    job = wait_for_job(client, bad["id"])
    assert job["status"] == "failed"
    assert "smem_tiled 16x16x16 TILE=32: GPU process died (exit code 77)" in job["error"]
    # The case measured before the crash is kept, the crashed case says what became of it, and the
    # case after it ran on a fresh GPU process.
    naive, crashed, after = job["results"]
    assert [r["variant"] for r in job["results"]] == ["naive", "smem_tiled", "warp_tile"]
    assert crashed["status"] == "failed" and crashed["error"] == "GPU process died (exit code 77)"
    assert naive["verified"] and after["verified"] and after["gflops"] > 0
    assert after["env"]["gpu"]["gpu_process_pid"] != naive["env"]["gpu"]["gpu_process_pid"]

    good = client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]]}).json()
    good = wait_for_job(client, good["id"])
    assert good["status"] == "succeeded"
    # The crashed GPU process was replaced; the new one is kept for the job after.
    pid = good["results"][0]["env"]["gpu"]["gpu_process_pid"]
    assert pid != job["results"][0]["env"]["gpu"]["gpu_process_pid"]
    again = wait_for_job(client, client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[8, 8, 8]]}).json()["id"])
    assert again["results"][0]["env"]["gpu"]["gpu_process_pid"] == pid


def test_a_wrong_kernel_is_reported_unverified_with_no_speed(stack):
    cfg, client, start_worker = stack
    start_worker(cfg, FAKE_GPU_WRONG_VARIANT="naive")
    job = wait_for_job(client, client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[32, 32, 32]]}).json()["id"])
    assert job["status"] == "failed"
    (r,) = job["results"]
    assert r["verified"] is False and r["gflops"] is None and r["rel_error"] > 1e-4
    assert "wrong result" in r["error"] and "wrong result" in job["error"]
    assert r["status"] == "incorrect"  # not "failed": the kernel ran, and its C was wrong


def test_a_hanging_case_is_killed_at_the_time_limit_and_the_job_s_other_cases_still_run(stack):
    cfg, client, start_worker = stack
    start_worker(cfg, FAKE_GPU_HANG_VARIANT="naive", GEMMWATCH_CASE_TIMEOUT_S="2")
    job = wait_for_job(client, client.post("/api/jobs", json={"variants": ["smem_tiled", "naive", "warp_tile"],
                                                                "sizes": [[8, 8, 8], [16, 16, 16]]}).json()["id"])
    assert job["status"] == "failed"
    assert "naive 8x8x8 BLOCK=32: exceeded the 2 s case time limit; killed" in job["error"]
    by_case = {(r["variant"], r["m"]): r for r in job["results"]}
    assert len(by_case) == 6  # every case has its result: none lost with the killed process
    for size in (8, 16):
        hung = by_case[("naive", size)]
        assert hung["status"] == "failed" and hung["gflops"] is None
        assert hung["error"] == "exceeded the 2 s case time limit; killed with its GPU process"
        assert all(by_case[(v, size)]["verified"] for v in ("smem_tiled", "warp_tile"))


def test_a_case_that_leaves_the_gpu_unusable_fails_alone(stack):
    """A sticky CUDA error: the case's own error is its result, and the cases after it run on a fresh
    GPU process (the child said so and exited), not lost with the spoilt one."""
    cfg, client, start_worker = stack
    start_worker(cfg, FAKE_GPU_STICKY_VARIANT="smem_tiled")
    job = wait_for_job(client, client.post("/api/jobs", json={"variants": ["naive", "smem_tiled", "warp_tile"],
                                                                "sizes": [[16, 16, 16]]}).json()["id"])
    assert job["status"] == "failed"
    assert "smem_tiled 16x16x16 TILE=32 left the GPU unusable (sticky CUDA error)" in job["error"]
    naive, spoilt, after = job["results"]
    assert spoilt["variant"] == "smem_tiled" and "cudaErrorIllegalAddress" in spoilt["error"]
    assert naive["verified"] and after["variant"] == "warp_tile" and after["verified"]
    assert after["env"]["gpu"]["gpu_process_pid"] != naive["env"]["gpu"]["gpu_process_pid"]


def test_jobs_for_a_gpu_model_go_to_that_models_queue(stack):
    cfg, client, start_worker = stack
    start_worker(cfg, queues="gpu.FAKE")
    job = client.post("/api/jobs", json={"variants": ["cublas"], "sizes": [[8, 8, 8]], "gpu": "FAKE"}).json()
    assert job["queue"] == "gpu.FAKE"
    done = wait_for_job(client, job["id"])
    assert done["status"] == "succeeded" and done["results"][0]["variant"] == "cublas"


def test_broker_down_gives_503_and_the_job_is_kept_as_failed(tmp_path, pg_url):
    cfg = make_settings(tmp_path, pg_url, "redis://127.0.0.1:1/0")  # nothing listens on port 1
    upgrade_database(cfg)
    client = make_client(cfg)
    resp = client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[8, 8, 8]]})
    assert resp.status_code == 503 and "broker unreachable" in resp.json()["detail"]
    with session_factory(cfg)() as db:
        (job,) = db.scalars(select(Job)).all()
        assert job.id == resp.json()["id"] and job.status == "failed" and "broker unreachable" in job.error


def test_progress_moves_case_by_case_while_the_job_runs(stack, hold):
    cfg, client, start_worker = stack
    start_worker(cfg, **hold.env)
    job_id = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[8, 8, 8]]}).json()["id"]
    hold.reached(0)
    # Case 0 is on the device: nothing stored; the worker writes its start once the GPU process says so.
    held = wait_for_job(client, job_id, until=("running",))
    while not held["current_case"]:
        held = client.get(f"/api/jobs/{job_id}").json()
    assert held["progress"] == {"done": 0, "total": 2} and held["results"] == []
    assert held["current_case"].startswith("naive 8x8x8")
    hold.release(0)
    hold.reached(1)  # case 0 returned and was stored, case 1 held: the job stays midway however slow the machine
    # Case 1's start is written as the GPU process tells it, beside the hold: wait until it has landed.
    midway = client.get(f"/api/jobs/{job_id}").json()
    while midway["current_case"].startswith("naive 8x8x8"):
        midway = client.get(f"/api/jobs/{job_id}").json()
    assert midway["status"] == "running" and midway["progress"] == {"done": 1, "total": 2}
    assert [r["variant"] for r in midway["results"]] == ["naive"]
    assert midway["current_case"] == "smem_tiled 8x8x8 TILE=32"
    hold.release(1)
    assert wait_for_job(client, job_id)["progress"] == {"done": 2, "total": 2}
