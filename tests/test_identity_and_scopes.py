"""Identity is not writable by whoever comes next, and a token does what its scopes say (issue 20).

Through the real server (uvicorn in its own process) on PostgreSQL and SQLite: a GPU's record is
made by the first token that names its uuid and changed by no other (a 409 says what differs);
`results`, `jobs` and `admin` scopes; a `jobs` token cancels only its own jobs; the CLI makes
scoped tokens.
"""

import subprocess
import sys

import httpx
import pytest

from core.records.db import session_factory, upgrade_database
from core.records.store import upsert_gpu
from core.records.tokens import create_token
from tests.conftest import ROOT, make_settings

H100 = {"uuid": "GPU-1111-aaaa", "name": "NVIDIA H100 80GB HBM3", "model": "H100", "sm_count": 132,
        "compute_capability": "9.0", "memory_mib": 81559, "driver": "580.65"}


def batch(run_id: str, gpu: dict, sha: str = "abcd01") -> dict:
    return {"run_id": run_id, "gpu": gpu, "commit": {"sha": sha, "branch": "main"},
            "results": [{"variant": "naive", "m": 128, "n": 128, "k": 128, "verified": True, "median_ms": 0.01,
                         "gflops": 419.4, "n_samples": 10, "samples_ms": [0.01] * 10}]}


@pytest.fixture
def server(tmp_path, database_url, live_server):
    cfg = make_settings(tmp_path, database_url)
    upgrade_database(cfg)
    tokens = {}
    with session_factory(cfg)() as db:
        for name, scopes in {"runner_a": ("results",), "runner_b": ("results",), "ci": ("jobs",),
                             "ci_other": ("jobs",), "both": ("jobs", "results"), "admin": ("admin",)}.items():
            tokens[name] = create_token(db, name, scopes=scopes)
    url = live_server(cfg, GEMMWATCH_AUTH_READS="true")

    def client(name: str) -> httpx.Client:
        return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=30)

    return cfg, client


def gpus(client) -> dict[str, dict]:
    return {g["uuid"]: g for g in client.get("/api/gpus").json()}


def test_another_token_cannot_rename_a_gpu_or_change_its_model(server):
    cfg, client = server
    a, b, admin = client("runner_a"), client("runner_b"), client("admin")
    assert a.post("/api/results", json=batch("run-a-000001", H100)).status_code == 201

    hostile = {**H100, "name": "renamed", "model": "H100x"}
    refused = b.post("/api/results", json=batch("run-b-000001", hostile))
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert {d["field"]: (d["recorded"], d["sent"]) for d in detail["differs"]} == {
        "name": ("NVIDIA H100 80GB HBM3", "renamed"), "model": ("H100", "H100x")}
    assert "changed only by the token that made it" in detail["message"]
    assert gpus(a)[H100["uuid"]]["name"] == H100["name"] and gpus(a)[H100["uuid"]]["model"] == "H100"
    assert [j["ran_on"] for j in a.get("/api/jobs").json()] == [H100["name"]]  # nothing stored for the 409

    # The same identity from another token is fine; its other driver is not written.
    assert b.post("/api/results", json=batch("run-b-000002", {**H100, "driver": "999.99"})).status_code == 201
    assert gpus(a)[H100["uuid"]]["driver"] == "580.65"
    # The token that made the record may update it (a driver update); an admin may correct it.
    assert a.post("/api/results", json=batch("run-a-000002", {**H100, "driver": "590.10"})).status_code == 201
    assert gpus(a)[H100["uuid"]]["driver"] == "590.10"
    assert admin.post("/api/results", json=batch("run-x-000001", {**H100, "name": "NVIDIA H100 SXM"})).status_code == 201
    assert gpus(a)[H100["uuid"]]["name"] == "NVIDIA H100 SXM"


def test_a_gpu_a_worker_registered_is_changed_by_no_token(server):
    cfg, client = server
    with session_factory(cfg)() as db:  # as worker/fleet.py registers its GPU: with the database, no token
        upsert_gpu(db, {**H100, "uuid": "GPU-fleet-0"})
        db.commit()
    refused = client("runner_a").post("/api/results", json=batch("run-a-000003", {**H100, "uuid": "GPU-fleet-0",
                                                                                   "model": "A100"}))
    assert refused.status_code == 409 and refused.json()["detail"]["differs"][0]["field"] == "model"
    assert gpus(client("runner_a"))["GPU-fleet-0"]["model"] == "H100"


def test_each_write_needs_its_scope(server):
    _, client = server
    job = {"variants": ["naive"], "sizes": [[8, 8, 8]]}
    results_only, jobs_only = client("runner_a"), client("ci")
    denied = results_only.post("/api/jobs", json=job)
    assert denied.status_code == 403 and "needs 'jobs'" in denied.json()["detail"]
    denied = jobs_only.post("/api/results", json=batch("run-c-000001", H100))
    assert denied.status_code == 403 and "needs 'results'" in denied.json()["detail"]
    assert jobs_only.post("/api/jobs", json=job).status_code == 202
    assert results_only.post("/api/results", json=batch("run-a-000004", H100)).status_code == 201
    assert client("both").post("/api/jobs", json=job).status_code == 202
    for name in ("runner_a", "ci", "admin"):  # any live token may read
        assert client(name).get("/api/jobs").status_code == 200


def test_a_jobs_token_cancels_its_own_jobs_and_an_admin_any(server):
    _, client = server
    job = {"variants": ["naive"], "sizes": [[8, 8, 8]]}
    mine = client("ci").post("/api/jobs", json=job).json()["id"]
    theirs = client("ci_other").post("/api/jobs", json=job).json()["id"]
    refused = client("ci").post(f"/api/jobs/{theirs}/cancel")
    assert refused.status_code == 403 and "submitted by another token" in refused.json()["detail"]
    assert client("ci").get(f"/api/jobs/{theirs}").json()["status"] == "queued"
    assert client("ci").post(f"/api/jobs/{mine}/cancel").json()["status"] == "cancelled"
    assert client("runner_a").post(f"/api/jobs/{theirs}/cancel").status_code == 403  # no jobs scope
    assert client("admin").post(f"/api/jobs/{theirs}/cancel").json()["status"] == "cancelled"


def test_the_cli_makes_scoped_tokens(tmp_path):
    env = {"GEMMWATCH_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "cli.main", "token"]
    made = subprocess.run(cli + ["create", "runner", "--scope", "results"], env=env, capture_output=True, text=True)
    assert made.returncode == 0 and made.stdout.startswith("gw_"), made.stderr
    subprocess.run(cli + ["create", "ci"], env=env, capture_output=True, text=True, check=True)
    listed = subprocess.run(cli + ["list"], env={**env, "COLUMNS": "200"}, capture_output=True, text=True).stdout
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in listed.splitlines() if line.count("│") > 3
            and line.split("│")[1].strip() in ("runner", "ci")}
    assert rows == {"runner": "results", "ci": "jobs results"}
    wrong = subprocess.run(cli + ["create", "x", "--scope", "root"], env=env, capture_output=True, text=True)
    assert wrong.returncode == 2 and "unknown scope" in wrong.stdout + wrong.stderr
