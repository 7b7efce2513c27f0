"""The fleet: real Celery workers register, beat, go offline, serve their own GPU model's queue;
a job nobody serves says why it waits (API, job page, CLI, CI hook); /metrics counts it all.

Workers are real processes on a real broker; the CPU double stands in for each one's GPU and
reports the model it is given (FAKE_GPU_MODEL), so one machine plays several nodes.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from importlib.metadata import version

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from core.records.db import session_factory, upgrade_database
from core.records.models import Job, Worker
from tests.conftest import ROOT, make_client, make_settings, wait_for_job, worker_env
from worker.reaper import reap

FAST_BEATS = {"GEMMWATCH_WORKER_BEAT_S": "0.3"}


@pytest.fixture
def fleet_cfg(tmp_path, pg_url, redis_url):
    """Production pairing: PostgreSQL and a Redis broker, as a fleet of nodes shares them."""
    # Offline after 5 s of silence (beats every 0.3 s): far past any beat's lateness on a loaded
    # 2-core machine, short enough for the tests that wait for a killed worker to read offline.
    cfg = make_settings(tmp_path, pg_url, redis_url, GEMMWATCH_WORKER_OFFLINE_AFTER_S="5")
    upgrade_database(cfg)
    return cfg


def poll(fetch, until, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if until(value):
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not met after {timeout} s; last: {value}")


def workers_by_name(client) -> dict:
    return {w["name"]: w for w in client.get("/api/workers").json()}


def node(w) -> str:
    return f"{w.name}@{socket.gethostname() if w.host == '%h' else w.host}"


def test_worker_registers_beats_runs_and_signs_off(fleet_cfg, start_worker, hold):
    client = make_client(fleet_cfg)
    assert client.get("/api/workers").json() == [] and client.get("/api/gpus").json() == []
    w = start_worker(fleet_cfg, **hold.env, **FAST_BEATS)
    name = node(w)
    # Registered and beating: on a loaded 2-core machine a beat can come later than the 2 s after
    # which readers call a worker offline (one fresh-clone run read "offline" here, at 2 s), which is the
    # reader's rule working, not this worker's registration failing.
    me = poll(lambda: workers_by_name(client).get(name), lambda x: x is not None and x["state"] == "idle",
              what="registration")
    assert me["host"] == socket.gethostname() and me["model"] == "FAKE" and me["gpu"] == "FAKE CPU double"
    assert me["queues"] == ["gpu.any"] and me["version"] == version("gemmwatch")
    assert me["state"] == "idle" and me["job"] is None and me["jobs_last_day"] == 0
    # Known before any job ran: the GPU it registered with.
    assert [g["model"] for g in client.get("/api/gpus").json()] == ["FAKE"]

    first_beat = me["last_beat_at"]
    poll(lambda: workers_by_name(client)[name]["last_beat_at"], lambda t: t > first_beat, 5, "a later heartbeat")

    job_id = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[32, 32, 32]] * 2}).json()["id"]
    hold.reached(0)  # its first case held: the worker reads "running" until the test lets it go
    busy = poll(lambda: workers_by_name(client)[name], lambda x: x["state"] == "running", what="running state")
    assert busy["job"]["id"] == job_id and busy["job"]["progress"]["total"] == 4
    hold.release()
    job = wait_for_job(client, job_id)
    assert job["status"] == "succeeded" and job["worker"] == name
    after = poll(lambda: workers_by_name(client)[name], lambda x: x["state"] == "idle", what="idle again")
    assert after["jobs_last_day"] == 1 and after["job"] is None

    w.stop()  # a clean exit: stopped at once, not offline only when the beats are missed
    gone = poll(lambda: workers_by_name(client)[name], lambda x: x["state"] == "stopped", 30, "sign-off")  # a loaded CI machine took over 10 s
    assert gone["since"] is not None


def test_a_silent_worker_is_marked_offline(fleet_cfg, start_worker):
    client = make_client(fleet_cfg)
    w = start_worker(fleet_cfg, **FAST_BEATS)
    name = node(w)
    poll(lambda: workers_by_name(client).get(name), lambda x: x and x["state"] == "idle", what="registration")
    os.kill(w.proc.pid, signal.SIGKILL)  # no sign-off: only the silence tells
    w.proc.wait()
    # Readers judge the silence themselves, before any reaper ran...
    seen = poll(lambda: workers_by_name(client)[name], lambda x: x["state"] == "offline", 30, "offline")
    assert seen["since"] == seen["last_beat_at"]
    with session_factory(fleet_cfg)() as db:
        assert db.scalar(select(Worker.state).where(Worker.name == name)) == "online"
    # ...and the reaper records it, since the last beat.
    reap(fleet_cfg)
    with session_factory(fleet_cfg)() as db:
        row = db.scalar(select(Worker).where(Worker.name == name))
        assert row.state == "offline" and row.offline_since == row.last_beat_at


def run_cli(cfg, *args, timeout=60) -> subprocess.CompletedProcess:
    env = worker_env(cfg, runner=None)
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.long
def test_a_job_nobody_serves_says_why_it_waits(fleet_cfg, start_worker, live_server):
    client = make_client(fleet_cfg)
    job = client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]], "gpu": "A100"}).json()
    want = "waiting: no live worker serves gpu.A100; last seen never"
    assert client.get(f"/api/jobs/{job['id']}").json()["waiting"] == want
    assert [j["waiting"] for j in client.get("/api/jobs").json()] == [want]
    page = client.get(f"/jobs/{job['id']}")
    assert want in page.text
    assert client.get(f"/jobs/{job['id']}", params={"format": "json"}).json()["job"]["waiting"] == want

    # The CLI and the CI hook print it, and the hook still ends with exit 3 at its timeout.
    base = live_server(fleet_cfg)
    token = client.headers["Authorization"].split()[1]
    sub = run_cli(fleet_cfg, "submit", "--server", base, "--token", token, "--variants", "naive", "--size", "16",
                  "--gpu", "A100", "--timeout", "3")
    assert sub.returncode == 3 and "no live worker serves gpu.A100" in sub.stdout + sub.stderr
    ci = run_cli(fleet_cfg, "ci", "--server", base, "--token", token, "--commit", "ab12cd34", "--variants", "naive",
                 "--size", "16", "--gpu", "A100", "--timeout", "3", "--parents", "")
    assert ci.returncode == 3, ci.stdout + ci.stderr
    assert "no live worker serves gpu.A100" in ci.stderr

    # A worker that served the queue once and went away: when it was last seen.
    w = start_worker(fleet_cfg, "gpu.A100", FAKE_GPU_MODEL="A100", FAKE_GPU_UUID="GPU-a100", **FAST_BEATS)
    ran = wait_for_job(client, job["id"])
    assert ran["status"] == "succeeded" and ran["waiting"] is None
    os.kill(w.proc.pid, signal.SIGKILL)
    w.proc.wait()
    last = poll(lambda: workers_by_name(client)[node(w)], lambda x: x["state"] == "offline", 30, "offline")
    late = client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]], "gpu": "A100"}).json()
    said = client.get(f"/api/jobs/{late['id']}").json()["waiting"]
    assert said.startswith("waiting: no live worker serves gpu.A100; last seen 20")
    assert last["last_beat_at"][:19].replace("T", " ") in said


@pytest.mark.long
def test_jobs_behind_a_busy_worker_say_so(fleet_cfg, start_worker, hold):
    client = make_client(fleet_cfg)
    start_worker(fleet_cfg, **hold.env, **FAST_BEATS)
    post = lambda: client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]] * 3}).json()["id"]  # noqa: E731
    first, second = post(), post()
    hold.reached(0)  # the first job's first case held: the worker is busy until the test says
    poll(lambda: client.get(f"/api/jobs/{first}").json()["status"], lambda s: s == "running", what="first running")
    # Busy as readers see it: its beat names the job (the running state, written beside the claim).
    poll(lambda: [w["state"] for w in client.get("/api/workers").json()], lambda s: s == ["running"], what="worker busy")
    said = client.get(f"/api/jobs/{second}").json()["waiting"]
    assert said == "waiting: all 1 live worker(s) serving gpu.any are busy; 1 job(s) queued on it"
    hold.release()
    assert wait_for_job(client, second)["status"] == "succeeded"


def metric_samples(client) -> dict:
    text = client.get("/metrics").text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_jobs_queues_workers_results_and_latency(fleet_cfg, start_worker):
    client = make_client(fleet_cfg)
    w = start_worker(fleet_cfg, **FAST_BEATS)
    poll(lambda: workers_by_name(client).get(node(w)), lambda x: x is not None, what="registration")
    done = wait_for_job(client, client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"],
                                                               "sizes": [[32, 32, 32]]}).json()["id"])
    assert done["status"] == "succeeded"
    for _ in range(2):
        client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]], "gpu": "A100"})

    m = metric_samples(client)
    assert m[("gemmwatch_jobs", (("state", "succeeded"),))] == 1
    assert m[("gemmwatch_jobs", (("state", "queued"),))] == 2
    assert m[("gemmwatch_queue_depth", (("queue", "gpu.A100"),))] == 2
    assert m[("gemmwatch_workers", (("model", "FAKE"), ("state", "idle")))] == 1
    assert m[("gemmwatch_workers_online", ())] == 1
    assert m[("gemmwatch_results_stored_total", ())] == 2
    # Every stored case was timed; each bucket counts the cases at or under its bound.
    assert m[("gemmwatch_case_duration_seconds_count", ())] == 2
    assert 0 < m[("gemmwatch_case_duration_seconds_sum", ())] < 60
    assert m[("gemmwatch_case_duration_seconds_bucket", (("le", "+Inf"),))] == 2
    assert m[("gemmwatch_case_duration_seconds_bucket", (("le", "0.1"),))] <= 2
    # wait_for_job polled GET /api/jobs/{job_id}: one series for the route, not one per job.
    gets = m[("gemmwatch_http_request_duration_seconds_count",
              (("method", "GET"), ("route", "/api/jobs/{job_id}"), ("status", "200")))]
    assert gets >= 1
    assert not any(dict(labels).get("route", "").startswith("/api/jobs/1") for _, labels in m)
    posts = m[("gemmwatch_http_request_duration_seconds_count",
               (("method", "POST"), ("route", "/api/jobs"), ("status", "202")))]
    assert posts == 3


def test_two_nodes_each_serve_their_own_model(fleet_cfg, start_worker):
    """Two workers with their own host names and GPU models on one Redis and one PostgreSQL."""
    client = make_client(fleet_cfg)
    start_worker(fleet_cfg, "gpu.H100", host="node-a", FAKE_GPU_MODEL="H100", FAKE_GPU_UUID="GPU-node-a-0", **FAST_BEATS)
    start_worker(fleet_cfg, "gpu.H200", host="node-b", FAKE_GPU_MODEL="H200", FAKE_GPU_UUID="GPU-node-b-0", **FAST_BEATS)
    fleet = poll(lambda: client.get("/api/workers").json(), lambda ws: len(ws) == 2, what="both registered")
    assert sorted((w["host"], w["model"], tuple(w["queues"])) for w in fleet) == [
        ("node-a", "H100", ("gpu.H100",)), ("node-b", "H200", ("gpu.H200",))]

    ids = {model: [client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[16, 16, 16]], "gpu": model}).json()["id"]
                   for _ in range(2)] for model in ("H200", "H100")}
    for model, job_ids in ids.items():
        for job_id in job_ids:
            job = wait_for_job(client, job_id)
            assert job["status"] == "succeeded"
            assert job["ran_on"] == f"{model} CPU double"
            assert job["worker"].endswith("@node-a" if model == "H100" else "@node-b")
    with session_factory(fleet_cfg)() as db:
        assert len(db.scalars(select(Job)).all()) == 4
    assert sorted(w["jobs_last_day"] for w in client.get("/api/workers").json()) == [2, 2]
    page = client.get("/fleet").text
    assert "node-a" in page and "node-b" in page and "H100 CPU double" in page and "H200 CPU double" in page
    exported = client.get("/fleet", params={"format": "json"}).json()["rows"]
    assert sorted((r["host"], r["gpu"], r["state"], r["jobs_last_day"], r["queues"]) for r in exported) == [
        ("node-a", "H100 CPU double", "idle", 2, "gpu.H100"), ("node-b", "H200 CPU double", "idle", 2, "gpu.H200")]


def test_no_beat_lands_after_the_sign_off(tmp_path, database_url):
    """sign_off stops the beat loop before it writes "stopped": with beats 5 ms apart, a loop left
    running marks the row online again within a few ms (on a loaded machine a real worker's exit
    read offline, not stopped, that way)."""
    from worker import fleet

    cfg = make_settings(tmp_path, database_url, GEMMWATCH_WORKER_BEAT_S="0.005",
                        GEMMWATCH_RUNNER="tests.fake_gpu:CpuRunner")
    upgrade_database(cfg)
    thread = fleet.start_heartbeat_thread(cfg, "signing-off@host", ["gpu.any"])

    def row():
        with session_factory(cfg)() as db:
            return db.scalar(select(Worker).where(Worker.name == "signing-off@host"))

    first = poll(row, lambda w: w is not None and w.state == "online", 10, "registration")
    poll(row, lambda w: w.last_beat_at > first.last_beat_at, 10, "a beat")
    fleet.sign_off(cfg, "signing-off@host")
    # Once the loop has ended, every beat it would ever write has landed (no sleep to guess when):
    # the row still says "stopped", so none landed after the sign-off. A loop left running never
    # ends, and the join's deadline (generous: a loaded machine) fails the test.
    thread.join(60)
    assert not thread.is_alive() and row().state == "stopped"


def test_a_model_no_worker_ever_had_is_answered_with_the_models_there_are():
    """`--gpu A100x` (a typo) waits like any job, but its reason names the models the fleet's workers
    have served, live or not, so the typo shows; a model that had a worker says when it was last seen."""
    from datetime import datetime, timezone

    from core.jobs.fleet import Fleet, WorkerView

    beat = datetime(2026, 11, 29, 6, 0, tzinfo=timezone.utc)
    workers = [WorkerView(Worker(name=f"w{i}", queues=queues, last_beat_at=beat), state, None)
               for i, (queues, state) in enumerate([(["gpu.H200", "gpu.any"], "idle"),
                                                    (["gpu.H100", "gpu.any"], "offline")])]
    fleet = Fleet(workers)
    typo = fleet.waiting_reason(Job(status="queued", queue="gpu.A100x"))
    assert typo == ("waiting: no live worker serves gpu.A100x; last seen never; the GPU models workers have "
                    "served: H100, H200")
    gone = fleet.waiting_reason(Job(status="queued", queue="gpu.H100"))
    assert gone == "waiting: no live worker serves gpu.H100; last seen 2026-11-29 06:00:00 UTC"
    assert fleet.waiting_reason(Job(status="queued", queue="gpu.H200")) is None
