"""Nothing lost: a worker killed mid-job, a broker restart, a database restart.

Real processes throughout: Celery workers, a private redis-server, the machine's PostgreSQL and one of
the test's own (tests/private_postgres.py) where it is restarted.
"""

import shutil
import signal
import subprocess
import time

import pytest
import redis
from sqlalchemy import select

from core.records.db import session_factory, upgrade_database
from core.records.models import Result
from tests.conftest import make_client, make_settings, wait_for_job
from tests.parallel import free_port
from tests.private_postgres import PrivatePostgres

# A running job is queued again once its heartbeat is this old. Not less: on a loaded machine a
# live worker's job heartbeat was seen 11 s old (load 10 on 2 cores; 3 s apart before that), and its
# own reaper took its job back from under it.
FAST_REAPER = {"GEMMWATCH_HEARTBEAT_STALE_S": "30", "GEMMWATCH_REQUEUE_AFTER_S": "2", "GEMMWATCH_REAPER_INTERVAL_S": "1"}
# The worker a test kills never takes its own job back: that is the other worker's reaper's to do,
# after the kill, and a loaded machine's late heartbeat must not do it first.
NEVER_REAPS_ITS_OWN = {**FAST_REAPER, "GEMMWATCH_HEARTBEAT_STALE_S": "3600"}


def result_rows(cfg, job_id) -> list[int]:
    with session_factory(cfg)() as db:
        return sorted(db.scalars(select(Result.case_index).where(Result.job_id == job_id)))


@pytest.mark.long
def test_kill_9_mid_job_then_another_worker_finishes_it_with_each_result_once(tmp_path, pg_url, redis_url, start_worker,
                                                                                  hold):
    cfg = make_settings(tmp_path, pg_url, redis_url, **FAST_REAPER)
    upgrade_database(cfg)
    client = make_client(cfg)
    doomed = start_worker(cfg, **hold.env, **NEVER_REAPS_ITS_OWN)
    job_id = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled", "cublas"], "sizes": [[16, 16, 16]]}).json()["id"]
    # Case 0 runs, case 1 is held: the kill lands mid-job however slow the machine (a sleeping case
    # let a loaded run's job finish before the kill, and it read "succeeded", not "running").
    hold.release(0)
    hold.reached(1)
    wait_for_job(client, job_id, until=("running",))
    assert client.get(f"/api/jobs/{job_id}").json()["progress"]["done"] == 1  # case 0's row was written first
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.proc.wait()
    assert client.get(f"/api/jobs/{job_id}").json()["status"] == "running"  # as the dead worker left it
    assert hold.count() == 2  # the held case never finished

    start_worker(cfg, **FAST_REAPER)  # its reaper finds the silent job and queues it again
    job = wait_for_job(client, job_id, timeout=300)  # a deadline for a loaded machine: it costs nothing when met
    assert job["status"] == "succeeded", job["error"]
    assert result_rows(cfg, job_id) == [0, 1, 2]  # each case stored exactly once
    assert [r["variant"] for r in job["results"]] == ["naive", "smem_tiled", "cublas"]


def wait_for_redis(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.ping()
            return
        except redis.ConnectionError:
            assert proc.poll() is None, f"redis-server exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"redis-server not answering after {timeout} s"
            time.sleep(0.05)


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of the test's own, so it can be killed and restarted (it keeps nothing on disk)."""
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    cmd = [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
           "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    state = {"proc": subprocess.Popen(cmd, stdout=subprocess.DEVNULL)}

    def restart():
        state["proc"].kill()
        state["proc"].wait()
        state["proc"] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        wait_for_redis(url, state["proc"])

    wait_for_redis(url, state["proc"])
    yield url, restart
    state["proc"].kill()
    state["proc"].wait()


def test_a_broker_restart_loses_no_queued_job(tmp_path, pg_url, private_redis, start_worker):
    url, restart = private_redis
    cfg = make_settings(tmp_path, pg_url, url, **FAST_REAPER)
    upgrade_database(cfg)
    client = make_client(cfg)
    # No worker yet: the jobs wait in Redis, which then restarts empty.
    ids = [client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[8, 8, 8]]}).json()["id"] for _ in range(3)]
    restart()
    start_worker(cfg, **FAST_REAPER)  # its reaper sees queued jobs and an empty queue
    for job_id in ids:
        assert wait_for_job(client, job_id, timeout=90)["status"] == "succeeded"


@pytest.fixture
def private_pg():
    """A PostgreSQL server of the test's own: restarting the machine's would cut every other
    test's connections, in the other xdist workers and in anyone else's test run."""
    server = PrivatePostgres().start()
    yield server
    server.stop()


def test_a_database_restart_is_survived_by_api_and_worker(tmp_path, private_pg, redis_url, start_worker, hold):
    cfg = make_settings(tmp_path, private_pg.url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, **hold.env)
    job_id = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[8, 8, 8]]}).json()["id"]
    hold.reached(0)  # running, its first case held: every result is written after the restart

    private_pg.restart()
    hold.release()

    # The same app object answers again (pool pre-ping), and the worker's writes went through.
    job = wait_for_job(client, job_id, timeout=90)
    assert job["status"] == "succeeded", job["error"]
    assert result_rows(cfg, job_id) == [0, 1]
    assert client.get("/healthz").json()["database"] == "ok"
