"""Issue 37, rows 4 and 5: no token rewrites what another relies on. Through the real server
(uvicorn in its own process) on PostgreSQL and SQLite, with a real Celery worker over the CPU double
(tests/fake_gpu.py: a FAKE_GPU_SLOWDOWN_PCT marker makes a slower commit of a kernel).

Row 4: a commit's identity (branch, parents, message, date) is written by its first writer; another
`jobs` token that names the sha with its own branch and parents gets a 409 saying what differs, so
the victim's verdict stays "regression" and its commit page shows its own branch and parents.
Row 5: a confirmation belongs to the head job's owner: its base kernel comes only from a job that
owner (or an admin) submitted, so another token's slowed copy on the base commit does not turn
"regression" into "no change"; another token's confirm of the job is a 403.

No sleep orders anything here: each wait polls its job against a generous deadline.
"""

import re
import time

import httpx
import pytest

from core.records.db import session_factory
from core.records.tokens import create_token
from tests.descriptions import one_file

pytestmark = pytest.mark.long

KERNEL = """
extern "C" __global__ void my_gemm(int M, int N, int K, float alpha, const float* A, const float* B,
                                   float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
"""
REPO = "victim/gemms"
BASE, HEAD = "a0a0a0a0" * 5, "b1b1b1b1" * 5
DEADLINE_S = 240.0  # a job's first compile on a busy 2-core machine


def slowed(pct: int) -> str:
    return f"#define FAKE_GPU_SLOWDOWN_PCT {pct}\n" + KERNEL if pct else KERNEL


def job(text: str, commit: dict) -> dict:
    return {"sources": [one_file("my_gemm", text, "my_gemm", [16, 16])], "sizes": [[64, 64, 64]], "commit": commit}


@pytest.fixture
def site(cfg, live_server, start_worker):
    with session_factory(cfg)() as db:
        tokens = {name: create_token(db, name, scopes=scopes) for name, scopes in
                  {"victim": ("jobs",), "attacker": ("jobs",), "admin": ("admin",)}.items()}
    url = live_server(cfg)
    start_worker(cfg)

    def client(name: str) -> httpx.Client:
        return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=60)

    return client


def finished(client: httpx.Client, job_id: int) -> dict:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        got = client.get(f"/api/jobs/{job_id}").json()
        if got["status"] in ("succeeded", "failed", "cancelled"):
            assert got["status"] == "succeeded", got
            return got
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} not done within {DEADLINE_S} s: {got}")


def run(client: httpx.Client, body: dict) -> int:
    answer = client.post("/api/jobs", json=body)
    assert answer.status_code == 202, answer.text
    return finished(client, answer.json()["id"])["id"]


def base_commit(**extra) -> dict:
    return {"sha": BASE, "repo": REPO, "branch": "main", "parents": [], "message": "base", **extra}


def head_commit(**extra) -> dict:
    return {"sha": HEAD, "repo": REPO, "branch": "main", "parents": [BASE], "message": "slower", **extra}


def verdict(client: httpx.Client, job_id: int) -> str:
    [v] = client.get(f"/api/jobs/{job_id}/verdicts").json()
    return v["status"]


def test_row_4_another_token_cannot_rewrite_a_commits_branch_or_parents(site):
    victim, attacker, admin = site("victim"), site("attacker"), site("admin")
    run(victim, job(KERNEL, base_commit()))
    head_job = run(victim, job(slowed(100), head_commit()))
    assert verdict(victim, head_job) == "regression"

    forged = {"sha": HEAD, "repo": REPO, "branch": "attacker", "parents": ["deadbeef" * 5], "message": "forged"}
    refused = attacker.post("/api/jobs", json=job(KERNEL, forged))
    assert refused.status_code == 409, refused.text  # before: 202, and the commit rewritten
    detail = refused.json()["detail"]
    assert {d["field"]: (d["recorded"], d["sent"]) for d in detail["differs"]} == {
        "branch": ("main", "attacker"), "parents": ([BASE], ["deadbeef" * 5]), "message": ("slower", "forged")}
    assert "only that token, a token granted its repository" in detail["message"]
    # A parent filled in where the record has none is a rewrite too.
    assert attacker.post("/api/jobs", json=job(KERNEL, {"sha": BASE, "repo": REPO, "parents": [HEAD]})).status_code == 409

    assert verdict(victim, head_job) == "regression"  # before: "no baseline"
    page = victim.get(f"/commits/{HEAD}").text
    assert "branch main" in page and f'href="/commits/{BASE}"' in page
    assert "attacker" not in page and "deadbeef" not in page

    # A CI re-run of the same commit with the same identity (from its own token, or from another
    # that agrees or sends only the sha) is accepted; nothing it sent is changed.
    again = victim.post("/api/jobs", json=job(slowed(100), head_commit()))
    assert again.status_code == 202, again.text
    assert attacker.post("/api/jobs", json=job(KERNEL, {"sha": HEAD, "repo": REPO})).status_code == 202
    # Another repository's commit of that sha is a commit of its own.
    assert attacker.post("/api/jobs", json=job(KERNEL, {**forged, "repo": "attacker/gemms"})).status_code == 202
    # The first writer may correct its commit, and so may an admin token.
    assert victim.post("/api/jobs", json=job(KERNEL, head_commit(message="slower, really"))).status_code == 202
    fixed = admin.post("/api/jobs", json=job(KERNEL, head_commit(message="slower (corrected)")))
    assert fixed.status_code == 202, fixed.text
    assert fixed.json()["commit"]["message"] == "slower (corrected)"
    assert verdict(victim, head_job) == "regression"


def test_row_4_a_token_granted_the_repository_corrects_its_commits(cfg, live_server):
    with session_factory(cfg)() as db:
        first = create_token(db, "first", scopes=("jobs",))
        granted = create_token(db, "granted", scopes=("jobs",), repos=(REPO,))
        other = create_token(db, "other", scopes=("jobs",), repos=("someone/else",))
    url = live_server(cfg)

    def post(token: str, commit: dict) -> httpx.Response:
        return httpx.post(f"{url}/api/jobs", json={"variants": ["naive"], "sizes": [[8, 8, 8]], "commit": commit},
                          headers={"Authorization": f"Bearer {token}"}, timeout=60)

    assert post(first, base_commit(branch="wrong")).status_code == 202
    assert post(other, base_commit()).status_code == 409
    corrected = post(granted, base_commit())
    assert corrected.status_code == 202 and corrected.json()["commit"]["branch"] == "main"


def confirm(client: httpx.Client, job_id: int) -> httpx.Response:
    return client.post(f"/api/jobs/{job_id}/confirm", json={})


def test_row_5_another_tokens_slowed_base_cannot_poison_a_confirmation(site):
    victim, attacker = site("victim"), site("attacker")
    run(victim, job(KERNEL, base_commit()))
    head_job = run(victim, job(slowed(30), head_commit()))

    # The attacker measures a slowed copy of the kernel on the victim's base commit (its identity
    # left as recorded: the sha alone), the newest job there.
    run(attacker, job(slowed(30), {"sha": BASE, "repo": REPO}))

    refused = confirm(attacker, head_job)
    assert refused.status_code == 403, refused.text  # before: 202, a confirmation against a base it chose
    assert "submitted by another token" in refused.json()["detail"]

    answer = confirm(victim, head_job)
    assert answer.status_code == 202, answer.text
    confirmation_job = finished(victim, answer.json()["id"])
    [c] = victim.get(f"/api/jobs/{confirmation_job['id']}/confirmation").json()
    assert c["status"] == "regression", c  # before: "no change", the attacker's kernel timed as the base
    assert 1.2 < c["ratio"] < 1.4, c

    # A base only the attacker measured is no base for the victim's confirmation.
    mine = attacker.post("/api/jobs", json=job(KERNEL, {"sha": "c2c2c2c2" * 5, "repo": REPO}))
    assert mine.status_code == 202
    finished(attacker, mine.json()["id"])
    no_base = victim.post(f"/api/jobs/{head_job}/confirm", json={"base": "c2c2c2c2"})
    assert no_base.status_code == 422
    assert "by a job of the head job's submitter" in re.sub(r"\s+", " ", no_base.text)
