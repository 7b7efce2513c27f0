"""Issue 37, rows 10 and 11, through the real server on both databases: a posted run_id is its
token's own (api/routes/results.py, migration 0015), and a GPU uuid that differs only by case or
surrounding spaces is the same GPU, for posted results and for a worker's registration alike
(core/records/gpu_records.py normal_uuid)."""

import time

import httpx

from core.records.db import session_factory
from core.records.models import Job
from core.records.tokens import create_token
from tests.conftest import HTTP_TIMEOUT_S

GPU = {"uuid": "GPU-5c3e1a2b-0000-4000-8000-00000000abcd", "name": "NVIDIA H100 80GB HBM3", "model": "H100",
       "sm_count": 132}
RUN_ID = f"job-{GPU['uuid']}-42"


def posted(base: str, token: str, run_id: str, gpu: dict = GPU, gflops: float = 52.4) -> httpx.Response:
    row = {"variant": "naive", "m": 64, "n": 64, "k": 64, "verified": True, "rel_error": 1e-7, "median_ms": 0.01,
           "gflops": gflops, "n_samples": 10, "samples_ms": [0.01] * 10}
    return httpx.post(f"{base}/api/results", json={"run_id": run_id, "gpu": gpu, "results": [row]},
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)


def tokens(cfg, *names: str) -> list[str]:
    with session_factory(cfg)() as db:
        return [create_token(db, name, scopes=("results",)) for name in names]


def test_a_run_id_claimed_first_by_another_token_does_not_drop_the_real_post(cfg, live_server):
    base = live_server(cfg)
    real, squatter = tokens(cfg, "real-runner", "squatter")

    claimed = posted(base, squatter, RUN_ID, gflops=1.0)
    assert claimed.status_code == 201
    mine = posted(base, real, RUN_ID)
    assert mine.status_code == 201 and mine.json()["created"] is True, mine.text
    assert mine.json()["job_id"] != claimed.json()["job_id"]

    # The same token posting its run again is idempotent, as before; so is the squatter's.
    again = posted(base, real, RUN_ID)
    assert again.status_code == 200 and again.json() == {**mine.json(), "created": False}
    assert posted(base, squatter, RUN_ID).json()["job_id"] == claimed.json()["job_id"]
    job = httpx.get(f"{base}/api/jobs/{mine.json()['job_id']}", timeout=HTTP_TIMEOUT_S).json()
    assert [r["gflops"] for r in job["results"]] == [52.4]
    with session_factory(cfg)() as db:
        assert db.query(Job).filter(Job.run_id == RUN_ID).count() == 2


def test_look_alike_uuids_are_one_gpu_for_posts_and_workers(cfg, live_server, start_worker):
    base = live_server(cfg)
    maker, other = tokens(cfg, "maker", "other")
    assert posted(base, maker, "run-maker-0001", GPU).status_code == 201

    # Case and spaces changed: the same GPU, so the same record (one more run on it) ...
    shouting = {**GPU, "uuid": f"  {GPU['uuid'].upper()} "}
    assert posted(base, maker, "run-maker-0002", shouting).status_code == 201
    # ... whose identity another token cannot contradict under a look-alike uuid.
    renamed = {**GPU, "uuid": GPU["uuid"].lower() + "  ", "name": "NVIDIA H100 80GB HBM3 (mine)"}
    conflict = posted(base, other, "run-other-0001", renamed)
    assert conflict.status_code == 409 and conflict.json()["detail"]["uuid"] == GPU["uuid"], conflict.text

    # A worker that reports it in capitals registers (and, holding the database, takes over) the same record.
    start_worker(cfg, FAKE_GPU_UUID=GPU["uuid"].upper() + " ", FAKE_GPU_MODEL="H100")
    deadline = time.monotonic() + 240  # a loaded machine starts a worker slowly
    while not httpx.get(f"{base}/api/workers", timeout=HTTP_TIMEOUT_S).json() and time.monotonic() < deadline:
        time.sleep(0.1)  # polls the fleet until the worker has registered
    gpus = httpx.get(f"{base}/api/gpus", timeout=HTTP_TIMEOUT_S).json()
    assert [g["uuid"] for g in gpus] == [GPU["uuid"]], gpus
    assert [w["gpu_uuid"] for w in httpx.get(f"{base}/api/workers", timeout=HTTP_TIMEOUT_S).json()] == [GPU["uuid"]]
