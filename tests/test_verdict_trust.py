"""Issue 49, row 2: no token turns another's regression into "ok".

As reported: any `results` token posted results under the victim's base sha (201, on a GPU record
of the same model) and turned "regression -30.1 %" into "ok -5.7 %"; the same sha in upper case
was a new commit, and `?base=` resolved to the attacker's; any token could post onto a worker's
own GPU record by copying its identity from GET /api/gpus.

Through the real server, on both databases: the victim's history and regression, then every write
route tried with every scope an attacker's token can hold, each in the shapes the report used; the
victim's verdict must not move. A verdict stands only on results its owner would trust (core/verdicts/trust.py).
"""

import itertools

import httpx
import pytest
from sqlalchemy import select

from core.records.db import session_factory
from core.records.models import Gpu, Worker
from core.records.store import upsert_gpu
from core.records.tokens import create_token
from tests.conftest import HTTP_TIMEOUT_S

REPO = "victim/kernels"
BASE, HEAD = "aaaa1111bbbb", "cccc2222dddd"
GPU = {"uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA H100 80GB HBM3", "model": "H100",
       "sm_count": 132}


def tokens(cfg) -> dict[str, str]:
    with session_factory(cfg)() as db:
        return {"victim": create_token(db, "victim", scopes=("jobs", "results")),
                "jobs": create_token(db, "attacker-jobs", scopes=("jobs",)),
                "results": create_token(db, "attacker-results", scopes=("results",)),
                "both": create_token(db, "attacker-both", scopes=("jobs", "results"))}


def run(run_id: str, sha: str, gflops: float, gpu: dict = GPU, parents: list[str] | None = None) -> dict:
    median = 2 * 256**3 / (gflops * 1e6)
    result = {"variant": "naive", "m": 256, "n": 256, "k": 256, "verified": True, "rel_error": 1e-7,
              "median_ms": median, "gflops": gflops, "n_samples": 10, "samples_ms": [median] * 10,
              "q1_ms": median * 0.999, "q3_ms": median * 1.001, "noise": 0.001}
    return {"run_id": run_id, "gpu": gpu, "commit": {"sha": sha, "repo": REPO, "branch": "main",
                                                     **({"parents": parents} if parents is not None else {})},
            "results": [result]}


def verdict(base_url: str, job_id: int, base: str) -> dict:
    answer = httpx.get(f"{base_url}/api/jobs/{job_id}/verdicts", params={"base": base}, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    (only,) = answer.json()
    return only


@pytest.fixture
def scene(cfg, live_server):
    base_url = live_server(cfg)
    said = tokens(cfg)

    def post(who: str, path: str, body: dict) -> httpx.Response:
        return httpx.post(f"{base_url}{path}", json=body, headers={"Authorization": f"Bearer {said[who]}"},
                          timeout=HTTP_TIMEOUT_S)

    for i in range(3):  # the victim's history on its base commit: 1000 GFLOPS, three runs
        assert post("victim", "/api/results", run(f"victim-base-{i}", BASE, 1000.0)).status_code == 201
    head = post("victim", "/api/results", run("victim-head-0", HEAD, 699.0, parents=[BASE]))
    assert head.status_code == 201, head.text
    return base_url, post, head.json()["job_id"]


def test_a_victims_regression_stays_a_regression_whatever_another_token_posts(scene):
    base_url, post, head_job = scene
    before = verdict(base_url, head_job, BASE)
    assert before["status"] == "regression" and before["delta"] < -0.29, before
    assert before["baseline_posted_by"] == ["victim"]

    shapes = {
        "the base sha": BASE, "the base sha in upper case": BASE.upper(), "a prefix of it": BASE[:8],
    }
    gpus = {"a record of its own": {**GPU, "uuid": "GPU-99999999-0000-0000-0000-000000000000"},
            "the victim's GPU, copied from GET /api/gpus": GPU}
    tried = 0
    for (who, (shape, sha), (where, gpu)), figure in itertools.product(
            itertools.product(("jobs", "results", "both"), shapes.items(), gpus.items()), (700.0, 5000.0)):
        answer = post(who, "/api/results", run(f"attack-{tried}", sha, figure, gpu))
        tried += 1
        assert answer.status_code in (201, 403, 409, 422), (who, shape, where, answer.text)
        # Jobs under the victim's base sha too: stored and queued, measured by no worker here.
        post(who, "/api/jobs", {"variants": ["naive"], "sizes": [[256, 256, 256]],
                                "commit": {"sha": sha, "repo": REPO, "branch": "main"}})
        for base in (BASE, BASE.upper(), BASE[:8]):
            now = verdict(base_url, head_job, base)
            assert now["status"] == "regression" and now["delta"] == pytest.approx(before["delta"]), \
                (who, shape, where, figure, base, now)
            assert now["baseline_posted_by"] == ["victim"], now
    assert tried == 36


def test_a_sha_is_one_commit_whatever_its_case(scene):
    base_url, post, _head_job = scene
    answer = post("victim", "/api/results", run("victim-upper-0", HEAD.upper(), 701.0, parents=[BASE.upper()]))
    assert answer.status_code == 201, answer.text
    job = httpx.get(f"{base_url}/api/jobs/{answer.json()['job_id']}", timeout=HTTP_TIMEOUT_S).json()
    assert job["commit"]["sha"] == HEAD and job["commit"]["parents"] == [BASE]


def test_a_granted_token_and_an_admin_are_trusted_and_say_so(cfg, scene):
    base_url, post, head_job = scene
    with session_factory(cfg)() as db:
        granted = create_token(db, "release-bot", scopes=("results",), repos=[REPO])
    answer = httpx.post(f"{base_url}/api/results", json=run("bot-base-0", BASE, 1000.0),
                        headers={"Authorization": f"Bearer {granted}"}, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 201, answer.text
    now = verdict(base_url, head_job, BASE)
    assert now["baseline_posted_by"] == ["release-bot", "victim"] and "posted by release-bot, victim" in now["reason"]
    detail = httpx.get(f"{base_url}/api/results/{now['result_id']}", timeout=HTTP_TIMEOUT_S).json()
    assert detail["posted_by"] == "victim"


def test_a_workers_gpu_record_is_written_by_that_worker_only(cfg, scene):
    base_url, post, _head_job = scene
    worker_gpu = {**GPU, "uuid": "GPU-77777777-0000-0000-0000-000000000000"}
    with session_factory(cfg)() as db:
        gpu = upsert_gpu(db, worker_gpu)
        db.add(Worker(name="gpu0@node-a", host="node-a", gpu_id=gpu.id, gpu_index=0, model="H100",
                      queues=["gpu.H100"], version="test"))
        db.commit()
    for who in ("results", "both", "victim"):
        answer = post(who, "/api/results", run(f"onto-worker-{who}", BASE, 5000.0, worker_gpu))
        assert answer.status_code == 409 and "registered worker's own" in answer.text, answer.text
    with session_factory(cfg)() as db:
        assert db.scalar(select(Gpu).where(Gpu.uuid == worker_gpu["uuid"])).owner_token_id is None
