"""No writer can break a reader (issue 20, "Must show" 2), through the real server with reads behind
a token (GEMMWATCH_AUTH_READS), on PostgreSQL and on SQLite:

1. a real worker (CPU double) runs a job, so worker-written results are among the stored;
2. schemathesis runs stateful scenarios with a write token (POST /api/jobs and /api/results
   included): no answer is a 5xx;
3. every schema-valid extreme (tests/hostile_values.py) is posted and accepted;
4. every route of the app is classified (tests/route_walk.py): a new route that is not fails here;
   each class's auth holds (401 / 303 to the login / 403 from another origin); every page, export
   and API read answers 200 for every GPU, size, job and result stored, with the security headers;
5. the GPU and worker records the fleet made are unchanged.

GEMMWATCH_STATEFUL_CASES sets the number of schemathesis calls (default 200, about two minutes per
database; docs/BENCHMARKS.md has the 10,000-case run).
"""

import os
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import select

from api.app import create_app
from core.records.db import session_factory, upgrade_database
from core.records.models import Gpu, Worker, utcnow
from core.records.store import upsert_gpu
from core.records.tokens import create_token
from tests import hostile_values, route_walk
from tests.conftest import make_settings, wait_for_job
from tests.stateful_fuzz import run_stateful

CALLS = int(os.environ.get("GEMMWATCH_STATEFUL_CASES", "200"))
FLEET_GPU = {"uuid": "GPU-fleet-walk", "name": "NVIDIA H100 80GB HBM3", "model": "H100", "sm_count": 132,
             "compute_capability": "9.0", "memory_mib": 81559, "driver": "580.65"}
STATIC = {"/static/plotly/{path}": "plotly.min.js", "/static/dashboard/{path}": "dashboard.js",
          "/docs-assets/{path}": "swagger-ui-bundle.js"}
EVIL_ORIGIN = {"Origin": "http://evil.example"}


def fleet_records(cfg) -> list[tuple]:
    """The GPU and worker rows a worker made, as they stand (last_seen moves with any post naming the GPU)."""
    with session_factory(cfg)() as db:
        gpu = db.scalar(select(Gpu).where(Gpu.uuid == FLEET_GPU["uuid"]))
        worker = db.scalar(select(Worker).where(Worker.name == "gpu0@walk"))
        return [(gpu.name, gpu.model, gpu.sm_count, gpu.compute_capability, gpu.memory_mib, gpu.driver, gpu.owner_token_id),
                (worker.host, worker.gpu_id, worker.model, worker.queues, worker.version, worker.state)]


def plant_fleet(cfg) -> None:
    with session_factory(cfg)() as db:  # as worker/fleet.py registers: the database itself, no token
        gpu = upsert_gpu(db, FLEET_GPU)
        db.add(Worker(name="gpu0@walk", host="walk", gpu_id=gpu.id, gpu_index=0, model="H100",
                      queues=["gpu.H100", "gpu.any"], version="0.1.0", state="online", last_beat_at=utcnow()))
        db.commit()


def concrete(path: str, job_id: int, result_id: int) -> str:
    return (path.replace("{job_id}", str(job_id)).replace("{result_id}", str(result_id))
            .replace("{path}", STATIC.get(path, "")).replace("{name}", "naive"))


def read(client: httpx.Client, path: str, query: dict, allowed: set[int]) -> tuple | None:
    """What is wrong with this read's answer, or None."""
    resp = client.get(path, params=query)
    if resp.status_code not in allowed:
        return path, query, resp.status_code, resp.text[:200]
    if "script-src 'self';" not in resp.headers.get("content-security-policy", "") \
            or resp.headers.get("x-content-type-options") != "nosniff":
        return path, query, "security headers missing"
    return None


def check_auth(url: str, token: str, job_id: int, result_id: int) -> None:
    """Each class of route holds its line, on a real job and result."""
    anonymous = httpx.Client(base_url=url, follow_redirects=False, timeout=120)
    writer = {"Authorization": f"Bearer {token}"}
    bodies = {"/api/jobs": {"variants": ["naive"], "sizes": [[8, 8, 8]]},
              "/api/results": hostile_values.batches()[2] | {"run_id": "auth-check-0001"},
              "/api/jobs/{job_id}/confirm": {}}
    for method, path in sorted(route_walk.PUBLIC):
        resp = anonymous.get(concrete(path, job_id, result_id))
        # 200, or a redirect to another public page (/redoc leads to /docs).
        assert resp.status_code == 200 or (resp.status_code == 307 and resp.headers["location"] in
                                           {p for _, p in route_walk.PUBLIC}), path
    for _, path in sorted(route_walk.API_READS):
        assert anonymous.get(concrete(path, job_id, result_id)).status_code == 401, path
    for _, path in sorted(route_walk.PAGES):
        resp = anonymous.get(concrete(path, job_id, result_id))
        assert resp.status_code == 303 and resp.headers["location"].startswith("/login?next="), path
    for _, path in sorted(route_walk.API_WRITES):
        target, body = concrete(path, job_id, result_id), bodies.get(path)
        assert anonymous.post(target, json=body).status_code == 401, path
        assert anonymous.post(target, json=body, headers={**writer, **EVIL_ORIGIN}).status_code == 403, path
    for _, path in sorted(route_walk.FORM_WRITES):
        target = concrete(path, job_id, result_id)
        assert anonymous.post(target, data={"token": token}, headers=EVIL_ORIGIN).status_code == 403, path
        assert anonymous.post(target, data={"token": token}).status_code == 403, path  # no Origin, no Referer
    same_site = anonymous.post(f"/jobs/{job_id}/cancel", headers={"Origin": url})  # this origin, no session
    assert same_site.status_code == 303 and same_site.headers["location"].startswith("/login?next=")


# About two minutes per database on an idle machine. A loaded one (load 13-18 on 2 cores, a fresh-clone
# `make test`, where both databases' walks failed) gives each process a sixth of a core or less: several
# times that, past the 900 s this limit was. A limit for that machine, which costs nothing when met.
@pytest.mark.long
@pytest.mark.timeout(3600 + 4 * CALLS)
def test_no_writer_breaks_a_reader(tmp_path, database_url, live_server, start_worker):
    cfg = make_settings(tmp_path, database_url)
    upgrade_database(cfg)
    assert not route_walk.unclassified(create_app(cfg)), "a route without a decision: add it to tests/route_walk.py"
    assert not route_walk.stale(create_app(cfg)), "tests/route_walk.py names a route the app no longer has"
    with session_factory(cfg)() as db:
        token = create_token(db, "ci-runner")  # jobs and results: what every CI runner holds
    plant_fleet(cfg)
    before = fleet_records(cfg)
    # Schemathesis posts job after job with one token and no worker drains them as fast: the per-token
    # queue cap (issue 37, row 7; its own test is tests/test_job_weight.py) raised out of the way.
    url = live_server(cfg, GEMMWATCH_AUTH_READS="true", GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN="1000000")
    writer = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)

    # 1. results as a worker writes them. Its reaper would mark the planted worker offline once it
    # has been silent 30 s (a busy machine's first job takes longer): not a writer's doing, so the
    # rule is out of this test's way (tests/test_fleet.py tests it).
    worker = start_worker(cfg, GEMMWATCH_WORKER_OFFLINE_AFTER_S="3600")
    job = writer.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[32, 32, 32], [8, 16, 24]],
                                         "commit": {"sha": "feed0001", "branch": "main"}})
    # Its first job starts a GPU process and compiles two kernels cold: minutes on a loaded machine.
    assert wait_for_job(writer, job.json()["id"], timeout=900)["status"] == "succeeded"
    worker.stop()  # the fuzzed jobs stay queued: a 16384^3 case would take the CPU double hours

    made = run_stateful(url, token, CALLS)  # 2. raises on the first 5xx
    print(f"schemathesis: {sum(made.values())} calls;", sorted(made.items()))
    assert not [k for k in made if k[1] >= 500]
    assert made[("POST /api/results", 201)] >= 1 and made[("POST /api/jobs", 202)] >= 1, made

    for body in hostile_values.batches():  # 3.
        assert writer.post("/api/results", json=body).status_code == 201, body["run_id"]
    for body in hostile_values.jobs():
        assert writer.post("/api/jobs", json=body).status_code == 202

    have = route_walk.stored(cfg)  # 4.
    check_auth(url, token, have["jobs"][0][0], have["results"][0])
    urls = route_walk.read_urls(have)
    unread = {path for _, path in route_walk.API_READS | route_walk.PAGES} - {route_walk.route_of(u[0]) for u in urls}
    assert not unread, f"reads the walk does not make: add them to tests/route_walk.py read_urls: {unread}"
    with ThreadPoolExecutor(4) as pool:  # as many as the server's threads (GEMMWATCH_API_THREADS)
        failures = [f for f in pool.map(lambda url: read(writer, *url), urls) if f]
    print(f"walk: {len(urls)} reads of {len(have['jobs'])} jobs, {len(have['series'])} sizes and modes,"
          f" {len(have['models'])} GPU models, {len(have['names'])} GPU names; {len(failures)} failed")
    assert not failures, failures[:10]
    assert len(have["jobs"]) >= 10 and len(have["series"]) >= 10

    assert fleet_records(cfg) == before  # 5.
