"""Results measured elsewhere: POST /api/results is idempotent; `gemmwatch run --post` uses it."""

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from core.records.tokens import create_token
from core.records.db import session_factory, upgrade_database
from core.records.models import Result
from tests.conftest import FAKE_RUNNER, HTTP_TIMEOUT_S, ROOT, make_client, make_settings

GPU = {"uuid": "GPU-abc", "name": "NVIDIA H100 80GB HBM3", "model": "H100", "sm_count": 132}


def result(variant="naive", verified=True, **extra):
    base = {"variant": variant, "m": 64, "n": 64, "k": 64, "verified": verified, "rel_error": 1e-7,
            "median_ms": 0.01 if verified else None, "gflops": 52.4 if verified else None, "n_samples": 10,
            "samples_ms": [0.01] * 10}
    return {**base, **extra}


def stored(cfg) -> int:
    with session_factory(cfg)() as db:
        return db.scalar(select(func.count()).select_from(Result))


def test_posting_the_same_run_twice_adds_nothing(client, cfg):
    body = {"run_id": "run-0001-abcdef", "gpu": GPU, "commit": {"sha": "abc1234", "branch": "main"},
            "results": [result("naive"), result("smem_tiled")]}
    first = client.post("/api/results", json=body)
    assert first.status_code == 201 and first.json()["created"] is True
    again = client.post("/api/results", json=body)
    assert again.status_code == 200 and again.json() == {**first.json(), "created": False}
    assert stored(cfg) == 2
    job = client.get(f"/api/jobs/{first.json()['job_id']}").json()
    assert job["status"] == "succeeded" and job["ran_on"] == GPU["name"] and job["commit"]["sha"] == "abc1234"
    assert [r["variant"] for r in job["results"]] == ["naive", "smem_tiled"]


def test_posted_unverified_results_fail_the_job_and_carry_no_speed(client, cfg):
    body = {"run_id": "run-0002-abcdef", "gpu": GPU, "results": [result(verified=False, error="wrong result")]}
    job = client.get(f"/api/jobs/{client.post('/api/results', json=body).json()['job_id']}").json()
    assert job["status"] == "failed" and "wrong result" in job["error"]
    bad = {**body, "run_id": "run-0003-abcdef", "results": [result(verified=False, gflops=1.0)]}
    resp = client.post("/api/results", json=bad)
    assert resp.status_code == 422 and "no gflops" in resp.text
    assert stored(cfg) == 1
    assert [r["status"] for r in job["results"]] == ["incorrect"]  # a relative error measured, not verified
    # A posted status is kept where it fits the result, and refused where it contradicts it.
    said = {**body, "run_id": "run-0004-abcdef", "results": [result(verified=False, error="wrong result", status="incorrect"),
                                                             result(verified=False, rel_error=None, error="crashed")]}
    job = client.get(f"/api/jobs/{client.post('/api/results', json=said).json()['job_id']}").json()
    assert [r["status"] for r in job["results"]] == ["incorrect", "failed"]
    for lie in (result(verified=False, error="wrong result", status="passed"), result(status="failed")):
        resp = client.post("/api/results", json={**body, "run_id": "run-0005-abcdef", "results": [lie]})
        assert resp.status_code == 422 and "contradicts" in resp.text, resp.text
    assert stored(cfg) == 3  # 1 + 2 results, nothing of the refused posts


def test_a_sustained_result_keeps_its_mode_and_an_unknown_mode_is_refused(client, cfg):
    """A run made with GEMMWATCH_TIMING_MODE=sustained is stored as such (the dashboard never mixes
    it with cold results); a mode gemmwatch does not make is a 422 that stores nothing."""
    env = {"sustained": {"settle_s": 1.0, "settle_samples": 3518, "power_capped_batches_kept": 8}}
    body = {"run_id": "run-0005-abcdef", "gpu": GPU, "results": [result(mode="sustained", env=env)]}
    job = client.get(f"/api/jobs/{client.post('/api/results', json=body).json()['job_id']}").json()
    assert job["results"][0]["mode"] == "sustained"
    assert job["results"][0]["env"]["sustained"] == env["sustained"]
    bad = {**body, "run_id": "run-0006-abcdef", "results": [result(mode="warm")]}
    resp = client.post("/api/results", json=bad)
    assert resp.status_code == 422 and "sustained" in resp.text
    assert stored(cfg) == 1


def test_a_posted_results_form_is_stored_listed_and_filtered(client, cfg):
    """A result posted with its GEMM form keeps it (the column, GET /api/results and its form= filter);
    one posted without it says it by env.form.key, else it is the default "rrr". A key outside the
    grammar of core/description/gemm_form.py, FP16 sums on a kernel that is not fp16, or a form its env.form.key
    contradicts is a 422 that stores nothing."""
    tn = "rcr+ab+acc16"
    body = {"run_id": "run-0007-abcdef", "gpu": GPU, "results": [
        result("naive"), result("hgemm_tn", form=tn, compute_mode="fp16", dtype="float16"),
        result("sgemm_batched", env={"form": {"key": "ccc+batch8", "batch": 8}})]}
    assert client.post("/api/results", json=body).status_code == 201
    with session_factory(cfg)() as db:
        assert dict(db.execute(select(Result.variant, Result.form)).all()) == {
            "naive": "rrr", "hgemm_tn": tn, "sgemm_batched": "ccc+batch8"}
    listed = client.get("/api/results", params={"form": tn}).json()
    assert [(r["variant"], r["form"]) for r in listed] == [("hgemm_tn", tn)]
    assert {r["form"] for r in client.get("/api/results").json()} == {"rrr", tn, "ccc+batch8"}
    assert client.get("/api/results", params={"form": "rrr+batch1"}).status_code == 422  # no key: batch 1 is none
    for bad, why in ((result(form="rcx"), "should match pattern"), (result(form="rrr+acc16"), "sums in FP16"),
                     (result(form="rcr", env={"form": {"key": "rrr"}}), "differs from env.form.key")):
        resp = client.post("/api/results", json={**body, "run_id": "run-0008-abcdef", "results": [bad]})
        assert resp.status_code == 422 and why in resp.text, resp.text
    assert stored(cfg) == 3


def test_posting_needs_a_token(cfg):
    from fastapi.testclient import TestClient

    from api.app import create_app

    body = {"run_id": "run-0004-abcdef", "gpu": GPU, "results": [result()]}
    assert TestClient(create_app(cfg)).post("/api/results", json=body).status_code == 401
    assert stored(cfg) == 0


def test_gemmwatch_run_post_measures_locally_and_posts(tmp_path, pg_url, live_server):
    cfg = make_settings(tmp_path, pg_url)
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "runner")
    url = live_server(cfg)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
    env.update(GEMMWATCH_TOKEN=token, PYTHONPATH=str(ROOT), GEMMWATCH_RUNNER=FAKE_RUNNER,
               GEMMWATCH_CASE_TIME_CAP_S="0.3", GEMMWATCH_DATA_DIR=str(tmp_path / "local"))
    saved = tmp_path / "batch.json"
    cmd = [sys.executable, "-m", "cli.main", "run", "--variants", "naive,smem_tiled", "--size", "32", "--post",
           "--server", url, "--commit", "feed1234", "--branch", "main", "--save", str(saved)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "posted as job" in run.stdout
    assert stored(cfg) == 2
    # The saved batch posted again (a retried CI step) adds nothing.
    import httpx

    again = httpx.post(f"{url}/api/results", json=json.loads(saved.read_text()), headers={"Authorization": f"Bearer {token}"},
                       timeout=HTTP_TIMEOUT_S)
    assert again.status_code == 200 and again.json()["created"] is False
    assert stored(cfg) == 2


def test_a_jobs_results_copied_to_another_gemmwatch_arrive_once_and_whole(client, cfg, tmp_path):
    """scripts/import_job_results.py: GET /api/jobs/{id} here, posted there, twice."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from import_job_results import as_batch

    posted = [result("naive", env={"gpu": GPU}), result("smem_tiled", gflops=60.5, env={"gpu": GPU}),
              result("warp_tile", verified=False, error="wrong result", env={"gpu": GPU})]
    body = {"run_id": "run-0002-abcdef", "gpu": GPU, "commit": {"sha": "abc1234", "branch": "main"}, "results": posted}
    job = client.get(f"/api/jobs/{client.post('/api/results', json=body).json()['job_id']}").json()

    other_cfg = make_settings(tmp_path / "other", f"sqlite:///{tmp_path / 'other.db'}")
    upgrade_database(other_cfg)
    other = make_client(other_cfg)
    batch = as_batch(job)
    first, again = other.post("/api/results", json=batch), other.post("/api/results", json=batch)
    assert (first.status_code, again.status_code) == (201, 200) and stored(other_cfg) == 3
    copied = other.get(f"/api/jobs/{first.json()['job_id']}").json()
    assert copied["ran_on"] == GPU["name"] and copied["commit"]["sha"] == "abc1234"
    keep = ("variant", "m", "n", "k", "form", "verified", "gflops", "median_ms", "error")
    assert [{k: r[k] for k in keep} for r in copied["results"]] == [{k: r[k] for k in keep} for r in job["results"]]


@pytest.mark.parametrize("timing", ["burst", "hot"])
def test_gemmwatch_run_times_every_case_in_the_mode_it_is_given(tmp_path, timing):
    """A folder's kernels may name their own mode (`"timing"` in gemmwatch.json); `--timing` sets every
    case's, as a job's `timing` does, so one folder is compared in two modes without editing it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
    env.update(PYTHONPATH=str(ROOT), GEMMWATCH_RUNNER=FAKE_RUNNER, GEMMWATCH_CASE_TIME_CAP_S="0.3",
               GEMMWATCH_DATA_DIR=str(tmp_path / "local"))
    saved = tmp_path / "batch.json"
    cmd = [sys.executable, "-m", "cli.main", "run", "--variants", "smem_tiled", "--size", "32", "--timing", timing,
           "--save", str(saved)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert [r["mode"] for r in json.loads(saved.read_text())["results"]] == [timing]
