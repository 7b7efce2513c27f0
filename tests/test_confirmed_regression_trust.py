"""Issue 49, must-show 3: a victim's confirmed regression stays "regression" whatever any other
token does, through every write route with every scope an attacker's token can hold.

The whole stack: the live server, a real Celery worker on Redis (the CPU double for the GPU),
`gemmwatch ci` as the victim's CI runs it. The victim measures its base commit, then a head 20x
slower, confirmed in one A/B job (exit 1). Then three attackers (`jobs`, `results`, both) and an
unauthenticated client try: results posted under the base and head shas (any case of the sha, on
a GPU of their own and on the worker's, figures both ways); jobs under the base sha with the
victim's kernel name and a 20x slower source, and under the head sha with the fast one, which the
worker measures like any job (the gap this test was written for: a worker's figure counted
whoever asked for it); the confirm, cancel and profile routes of the API and of the dashboard on
the victim's jobs. After the attackers' jobs have finished: the confirmation still reads
"regression", the head's history verdict still reads "regression" on a baseline that is the
victim's alone, and the victim's CI run on the head commit again still exits 1 confirmed.
"""

import itertools
import time

import httpx
import pytest
from sqlalchemy import select

from core.verdicts.confirm import KIND as CONFIRM
from core.records.db import session_factory, upgrade_database
from core.description.kernel_folder import load_folder
from core.records.models import Job
from core.records.tokens import create_token
from tests.conftest import HTTP_TIMEOUT_S, make_settings
from tests.test_ci_hook import CI_DEADLINE, KERNEL, SLOWER, ci, kernels_dir

pytestmark = CI_DEADLINE  # it waits on `gemmwatch ci` (tests/test_ci_hook.py)

BASE, HEAD = "feed0001feed0001", "feed0002feed0002"
SIZE = 128


@pytest.fixture
def stack(tmp_path, pg_url, redis_url, start_worker, live_server):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg)
    with session_factory(cfg)() as db:
        said = {"victim": create_token(db, "victim"),
                "jobs": create_token(db, "attacker-jobs", scopes=("jobs",)),
                "results": create_token(db, "attacker-results", scopes=("results",)),
                "both": create_token(db, "attacker-both", scopes=("jobs", "results"))}
    return cfg, live_server(cfg), said


def _wait_finished(url: str, job_ids: list[int], timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    pending = set(job_ids)
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            status = httpx.get(f"{url}/api/jobs/{job_id}", timeout=HTTP_TIMEOUT_S).json()["status"]
            if status in ("succeeded", "failed", "cancelled"):
                pending.discard(job_id)
        if pending:
            time.sleep(0.5)  # a poll interval, not an ordering: the loop reads state
    assert not pending, f"jobs {sorted(pending)} did not finish"


def _history_verdict(url: str, head_job: int) -> dict:
    answer = httpx.get(f"{url}/api/jobs/{head_job}/verdicts", params={"base": BASE}, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    (only,) = [v for v in answer.json() if v["variant"] == "my_gemm"]
    return only


def _confirmation(url: str, confirm_job: int) -> dict:
    answer = httpx.get(f"{url}/api/jobs/{confirm_job}/confirmation", timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    (only,) = answer.json()
    return only


@pytest.mark.long
def test_a_confirmed_regression_stays_whatever_any_other_token_writes(stack, tmp_path):
    cfg, url, said = stack
    fast, slow = kernels_dir(tmp_path / "fast", KERNEL), kernels_dir(tmp_path / "slow", SLOWER)
    base = ci(url, said["victim"], tmp_path, "--commit", BASE, "--branch", "main", "--parents", "",
              "--kernels-dir", str(fast))
    assert base.returncode == 0, base.stdout + base.stderr
    head = ci(url, said["victim"], tmp_path, "--commit", HEAD, "--branch", "main", "--parents", BASE,
              "--kernels-dir", str(slow))
    assert head.returncode == 1 and "Confirmed in one job" in head.stdout, head.stdout + head.stderr
    with session_factory(cfg)() as db:
        head_job = db.scalar(select(Job.id).where(Job.kind != CONFIRM, Job.commit.has(sha=HEAD)))
        confirm_job = db.scalar(select(Job.id).where(Job.kind == CONFIRM))
    repo = httpx.get(f"{url}/api/jobs/{head_job}", timeout=HTTP_TIMEOUT_S).json()["commit"].get("repo")
    before_history, before_confirmed = _history_verdict(url, head_job), _confirmation(url, confirm_job)
    assert before_history["status"] == "regression" and before_confirmed["status"] == "regression"
    worker_gpu = httpx.get(f"{url}/api/gpus", timeout=HTTP_TIMEOUT_S).json()[0]

    def call(who: str | None, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {said[who]}"} if who else {}
        return httpx.post(f"{url}{path}", headers=headers, timeout=HTTP_TIMEOUT_S, **kwargs)

    slower_source, fast_source = (load_folder(d, ["my_gemm"])[0].model_dump(mode="json") for d in (slow, fast))
    commit = {"repo": repo} if repo else {}
    gpus = {"its own": {"uuid": "GPU-99999999-0000-0000-0000-000000000001", "name": "Attacker GPU",
                        "model": worker_gpu.get("model") or "CPU"},
            "the worker's, copied": {k: worker_gpu[k] for k in ("uuid", "name", "model") if worker_gpu.get(k)}}
    queued, tried = [], 0
    for who in ("jobs", "results", "both", None):
        for sha, (where, gpu), gflops in itertools.product((BASE, BASE.upper(), HEAD), gpus.items(), (0.01, 1e6)):
            median = 2 * SIZE**3 / (gflops * 1e6)
            run = {"run_id": f"attack-{tried}", "gpu": gpu, "commit": {"sha": sha, "branch": "main", **commit},
                   "results": [{"variant": "my_gemm", "m": SIZE, "n": SIZE, "k": SIZE, "verified": True,
                                "rel_error": 1e-7, "median_ms": median, "gflops": gflops, "n_samples": 10,
                                "samples_ms": [median] * 10, "q1_ms": median, "q3_ms": median, "noise": 0.001}]}
            answer = call(who, "/api/results", json=run)
            tried += 1
            assert answer.status_code in (201, 401, 403, 409, 422), (who, sha, where, answer.text)
        for sha, source in ((BASE, slower_source), (HEAD, fast_source)):
            answer = call(who, "/api/jobs", json={"sources": [source], "sizes": [[SIZE, SIZE, SIZE]],
                                                  "commit": {"sha": sha, "branch": "main", **commit}})
            assert answer.status_code in (202, 401, 403), (who, answer.text)
            if answer.status_code == 202:
                queued.append(answer.json()["id"])
        for path in (f"/api/jobs/{head_job}/confirm", f"/api/jobs/{confirm_job}/cancel", f"/api/jobs/{head_job}/cancel"):
            answer = call(who, path, json={"base": BASE})
            assert answer.status_code in (401, 403, 409, 422), (who, path, answer.text)
        with httpx.Client(base_url=url, timeout=HTTP_TIMEOUT_S, headers={"Origin": url}) as page:
            if who is not None:
                page.post("/login", data={"token": said[who], "next": "/"})
            for path in (f"/jobs/{confirm_job}/profile", f"/jobs/{confirm_job}/cancel", f"/jobs/{head_job}/cancel"):
                answer = page.post(path, data={"token": said[who] if who else ""})
                assert answer.status_code in (303, 401, 403, 409), (who, path, answer.status_code)
    assert len(queued) == 4, queued  # two measuring jobs for each attacker token holding `jobs`
    _wait_finished(url, queued)
    with session_factory(cfg)() as db:  # the dashboard's buttons queued nothing either
        assert db.scalars(select(Job.id).where(Job.kind == CONFIRM)).all() == [confirm_job]

    after_history, after_confirmed = _history_verdict(url, head_job), _confirmation(url, confirm_job)
    assert after_confirmed["status"] == "regression", after_confirmed
    assert after_confirmed["ratio"] == pytest.approx(before_confirmed["ratio"])
    assert after_history["status"] == "regression", after_history
    assert after_history["delta"] == pytest.approx(before_history["delta"]), (before_history, after_history)
    assert after_history["baseline_posted_by"] == []  # a worker measured all of it, for the victim

    again = ci(url, said["victim"], tmp_path, "--commit", HEAD, "--branch", "main", "--parents", BASE,
               "--kernels-dir", str(slow))
    assert again.returncode == 1 and "Confirmed in one job" in again.stdout, again.stdout + again.stderr
    assert "❌ regression" in again.stdout
