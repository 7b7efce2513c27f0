"""Cancelling jobs: POST /api/jobs/{id}/cancel, through real Celery workers with the CPU double.

A queued job never runs (its worker logs the skip and the row shows no start); a running one
stops at the next case boundary, keeps the results it has and ends `cancelled`; a case still
running after the grace period goes with its GPU process. The worker serves the next job
normally either way. The reaper never queues a cancelled job again.
"""

import os
import subprocess
import sys
import time
from datetime import timedelta

import httpx
from sqlalchemy import select, update

from core.records.tokens import create_token
from core.records.db import session_factory, upgrade_database
from core.records.models import Job, Result, utcnow
from tests.conftest import HTTP_TIMEOUT_S, ROOT, make_client, make_settings, wait_for_job
from worker.reaper import reap

SIZES = [[16, 16, 16], [24, 16, 8], [8, 8, 8]]


def post(client, variants=("naive",), sizes=SIZES) -> int:
    resp = client.post("/api/jobs", json={"variants": list(variants), "sizes": sizes})
    assert resp.status_code == 202, resp.text
    return resp.json()["id"]


def wait_until(check, timeout: float = 180, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached after {timeout} s")


def row(cfg, job_id: int) -> Job:
    with session_factory(cfg)() as db:
        return db.get(Job, job_id)


def stored_results(cfg, job_id: int) -> list[Result]:
    with session_factory(cfg)() as db:
        return list(db.scalars(select(Result).where(Result.job_id == job_id).order_by(Result.case_index)))


def test_a_cancelled_queued_job_never_runs(cfg, client, start_worker):
    job_id = post(client)  # no worker yet: it waits in the queue
    resp = client.post(f"/api/jobs/{job_id}/cancel")
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "cancelled" and resp.json()["finished_at"] is not None

    worker = start_worker(cfg)  # receives the cancelled job's message first, then the next one's
    later = post(client, sizes=[[8, 8, 8]])
    assert wait_for_job(client, later)["status"] == "succeeded"

    assert f"job {job_id} skipped: cancelled before it ran" in worker.log()
    cancelled = row(cfg, job_id)
    assert cancelled.status == "cancelled" and cancelled.started_at is None and cancelled.worker is None
    assert stored_results(cfg, job_id) == []


def test_a_running_job_stops_at_a_case_boundary_and_keeps_its_results(cfg, client, start_worker, hold):
    # A grace far past the held case's end: this test is the case boundary, not the grace's kill.
    start_worker(cfg, **hold.env, GEMMWATCH_CANCEL_GRACE_S="300")
    job_id = post(client, variants=("naive", "smem_tiled"))  # 6 cases
    hold.release(0)
    hold.release(1)
    hold.reached(2)  # cases 0 and 1 done, case 2 in hand and held: the cancel lands mid-job, however slow the machine
    wait_until(lambda: row(cfg, job_id).progress_done == 2, what="two cases done")
    cancelled_at = utcnow()
    resp = client.post(f"/api/jobs/{job_id}/cancel")
    assert resp.status_code == 200 and resp.json()["status"] == "cancelled"
    hold.release()  # the case in hand goes on, and every later one would (none comes)

    # The worker finishes the case in hand, stops, and notes how far the job got.
    job = wait_until(lambda: (j := row(cfg, job_id)).error and j, what="the worker's stop")
    results = stored_results(cfg, job_id)
    assert job.status == "cancelled" and job.current_case is None
    assert job.error == "cancelled after 3 of 6 cases"
    assert [r.case_index for r in results] == [0, 1, 2] and job.progress_done == 3  # the case in hand kept
    assert all(r.verified and r.gflops > 0 for r in results)
    assert job.finished_at >= cancelled_at

    # The GPU process was not disturbed: the next job runs normally, in the same one.
    later = wait_for_job(client, post(client, sizes=[[8, 8, 8]]))
    assert later["status"] == "succeeded" and len(later["results"]) == 1
    # No case ran after the stop: the worker runs one job at a time, so a case of the cancelled
    # job would have been stored before the later job began; and the device saw 3 of its cases + 1.
    assert len(stored_results(cfg, job_id)) == len(results)
    assert hold.count() == 4
    pid = results[0].env["gpu"]["gpu_process_pid"]
    assert later["results"][0]["env"]["gpu"]["gpu_process_pid"] == pid


def test_a_case_that_outlives_the_grace_period_goes_with_its_gpu_process(cfg, client, start_worker):
    start_worker(cfg, FAKE_GPU_HANG_VARIANT="smem_tiled", GEMMWATCH_CANCEL_GRACE_S="1")
    job_id = post(client, variants=("naive", "smem_tiled"), sizes=[[16, 16, 16]])
    wait_until(lambda: (row(cfg, job_id).current_case or "").startswith("smem_tiled"), what="the endless case")
    assert client.post(f"/api/jobs/{job_id}/cancel").json()["status"] == "cancelled"

    job = wait_until(lambda: (j := row(cfg, job_id)).error and j, what="the worker's stop")
    assert job.status == "cancelled" and job.current_case is None
    assert job.error.startswith("cancelled after 1 of 2 cases\nsmem_tiled 16x16x16")
    assert job.error.endswith("still running 1 s after the job was cancelled; stopped with its GPU process")
    results = stored_results(cfg, job_id)  # the stopped case has a result that says so
    assert [(r.variant, r.status) for r in results] == [("naive", "passed"), ("smem_tiled", "cancelled")]
    assert results[0].verified and not results[1].verified and results[1].gflops is None
    assert results[1].error == "still running 1 s after the job was cancelled; stopped with its GPU process"

    later = wait_for_job(client, post(client, sizes=[[8, 8, 8]]))
    assert later["status"] == "succeeded"
    assert later["results"][0]["env"]["gpu"]["gpu_process_pid"] != results[0].env["gpu"]["gpu_process_pid"]


def test_cancel_answers_404_409_401_and_422(cfg, client):
    assert client.post("/api/jobs/424242/cancel").status_code == 404
    assert client.post("/api/jobs/424242/cancel").json()["detail"] == "no job 424242"
    bad = client.post("/api/jobs/0/cancel")
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["path", "job_id"]

    job_id = post(client)
    anonymous = make_client(cfg, "other")
    anonymous.headers.pop("Authorization")
    refused = anonymous.post(f"/api/jobs/{job_id}/cancel")
    assert refused.status_code == 401 and "token" in refused.json()["detail"]
    assert row(cfg, job_id).status == "queued"  # a refused cancel changes nothing

    assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
    again = client.post(f"/api/jobs/{job_id}/cancel")
    assert again.status_code == 409
    assert again.json()["detail"].startswith(f"job {job_id} already ended (cancelled at ")

    finished = post(client)
    with session_factory(cfg)() as db:
        db.execute(update(Job).where(Job.id == finished).values(status="succeeded", finished_at=utcnow()))
        db.commit()
    ended = client.post(f"/api/jobs/{finished}/cancel")
    assert ended.status_code == 409 and "(succeeded at " in ended.json()["detail"]
    assert row(cfg, finished).status == "succeeded"


def test_the_reaper_never_queues_a_cancelled_job_again(cfg, client):
    silent, cancelled = post(client), post(client)
    long_ago = utcnow() - timedelta(hours=1)
    with session_factory(cfg)() as db:  # both lost their worker an hour ago
        db.execute(update(Job).where(Job.id.in_([silent, cancelled]))
                   .values(status="running", heartbeat_at=long_ago, started_at=long_ago))
        db.commit()
    assert client.post(f"/api/jobs/{cancelled}/cancel").json()["status"] == "cancelled"

    assert reap(cfg) == [silent]
    assert row(cfg, silent).status == "queued"
    assert row(cfg, cancelled).status == "cancelled"


def test_gemmwatch_cancel_from_the_shell(tmp_path, sqlite_url, live_server):
    cfg = make_settings(tmp_path, sqlite_url)
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "shell")
    url = live_server(cfg)
    job_id = httpx.post(f"{url}/api/jobs", json={"variants": ["naive"], "sizes": [[8, 8, 8]]},
                        headers={"Authorization": f"Bearer {token}"}, timeout=HTTP_TIMEOUT_S).json()["id"]

    def gemmwatch(*args, token=token):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
        env.update(PYTHONPATH=str(ROOT), GEMMWATCH_DATA_DIR=str(tmp_path / "elsewhere"), COLUMNS="200")
        if token:
            env["GEMMWATCH_TOKEN"] = token
        return subprocess.run([sys.executable, "-m", "cli.main", *args, "--server", url], env=env,
                              capture_output=True, text=True, timeout=120)

    refused = gemmwatch("cancel", str(job_id), token=None)
    assert refused.returncode == 2 and "401" in refused.stdout and row(cfg, job_id).status == "queued"

    done = gemmwatch("cancel", str(job_id))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"job {job_id} cancelled (0/1 cases done" in done.stdout
    assert row(cfg, job_id).status == "cancelled"

    again = gemmwatch("cancel", str(job_id))
    assert again.returncode == 1 and f"409: job {job_id} already ended (cancelled" in again.stdout
    missing = gemmwatch("cancel", "424242")
    assert missing.returncode == 1 and "404: no job 424242" in missing.stdout
