"""Issue 48: the timing mode a job asks for, per job and per kernels folder, through the API, a real
worker and its GPU child on the CPU double; each result says the mode it was timed in."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from api.schemas import JobCreate
from core.description.kernel_folder import load_folder
from tests.conftest import make_client, wait_for_job
from worker.measure.cases import cases_from_plan, plan
from core.description.builtins import builtin_kernels

HOME = Path(__file__).parent / "fixtures" / "home_runner_repo"


def test_a_job_names_a_mode_and_nothing_else():
    assert JobCreate.model_validate({"variants": ["naive"], "sizes": [[8, 8, 8]], "timing": "burst"}).timing == "burst"
    with pytest.raises(ValidationError, match="timing"):
        JobCreate.model_validate({"variants": ["naive"], "sizes": [[8, 8, 8]], "timing": "warm"})


def test_the_jobs_mode_over_the_kernels_own_over_the_workers():
    kernels = {**builtin_kernels(), **{d.name: d for d in load_folder(HOME)}}
    names = ["naive", "home_kernel_1"]
    own = plan("bench", names, [[8, 8, 8]], {}, {}, kernels)
    assert [e.get("timing") for e in own] == [None, "burst"]  # the folder's burst; a built-in has none
    forced = plan("bench", names, [[8, 8, 8]], {}, {}, kernels, timing="cold")
    assert [e["timing"] for e in forced] == ["cold", "cold"]
    cases = cases_from_plan(own, 1, kernels, {"home_kernel_1"}, timing="hot")
    assert [c.timing for c in cases] == ["hot", "burst"]  # the job's mode fills what the plan left open
    from worker.measure.cases import TimingPolicy

    worker = TimingPolicy(0, 10, 0.005, 1, 1e-4, mode="cold")
    assert cases[1].policy(worker).mode == "burst" and cases[1].policy(worker).max_noise == 0.005
    assert cases_from_plan(own, 1, kernels)[0].policy(worker) is worker


def test_each_result_is_timed_in_the_mode_its_job_asked_for(cfg, start_worker):
    start_worker(cfg)
    client = make_client(cfg)
    ids = {}
    for mode in ("burst", None):
        body = {"variants": ["naive", "smem_tiled"], "sizes": [[64, 64, 64]], **({"timing": mode} if mode else {})}
        posted = client.post("/api/jobs", json=body)
        assert posted.status_code == 202, posted.text
        ids[mode] = posted.json()["id"]
    burst, default = (wait_for_job(client, ids[m], timeout=300) for m in ("burst", None))
    assert burst["timing"] == "burst" and default["timing"] is None
    assert {r["mode"] for r in burst["results"]} == {"burst"}, json.dumps(burst)[:2000]
    assert {r["mode"] for r in default["results"]} == {cfg.timing_mode}


def test_a_result_says_how_far_its_mode_reads_from_the_others(client):
    """The same case on one commit and GPU posted in burst and in cold: each result's own page gives
    the other's GFLOPS and the ratio (a kernel at the power cap reads 12-15 % apart between them)."""
    gpu = {"uuid": "GPU-cccccccc-0000-0000-0000-000000000003", "name": "NVIDIA H200", "model": "H200"}

    def posted(mode: str, gflops: float) -> int:
        median = 2 * 512**3 / (gflops * 1e6)
        body = {"run_id": f"run-mode-{mode}", "gpu": gpu, "commit": {"sha": "feed0001", "branch": "main"},
                "results": [{"variant": "naive", "m": 512, "n": 512, "k": 512, "verified": True, "rel_error": 1e-7,
                             "median_ms": median, "gflops": gflops, "n_samples": 10, "samples_ms": [median] * 10,
                             "mode": mode}]}
        answer = client.post("/api/results", json=body)
        assert answer.status_code == 201, answer.text
        return client.get(f"/api/jobs/{answer.json()['job_id']}").json()["results"][0]["id"]

    burst, cold = posted("burst", 800.0), posted("cold", 690.0)
    said = client.get(f"/api/results/{burst}").json()["other_modes"]
    assert set(said) == {"cold"} and said["cold"]["result_id"] == cold
    assert said["cold"]["ratio"] == pytest.approx(800.0 / 690.0)
    assert client.get(f"/api/results/{cold}").json()["other_modes"]["burst"]["ratio"] == pytest.approx(690.0 / 800.0)
