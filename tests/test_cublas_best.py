"""cuBLAS's best as the baseline (issue 40): worker/measure/cublas_best.py's choice from timed
candidates, its cache, and the runner timing a kernel beside the chosen call, over the CPU double
(its FAKE_GPU_CUBLAS_CANDIDATES model cuBLASLt's candidates as times relative to the default)."""

import pytest

from core.results.result_env import ResultEnv
from core.settings import Settings
from tests.fake_gpu import CpuRunner
from worker.measure import cublas_best
from worker.measure.cases import TimingPolicy, builtin_case


class ListedGemm:
    """A GEMM whose candidates are algorithm ids; `times` gives each one's median."""

    def __init__(self, ids: list[int]):
        self.candidates = ids
        self.use(0)

    def use(self, index: int) -> None:
        self.index = index
        self.plan = {"algo": {"id": self.candidates[index]}}

    def __call__(self):
        pass


def timer(times: dict, asked: list):
    def median_ms(call) -> float:
        key = "default" if not isinstance(call, ListedGemm) else call.candidates[call.index]
        asked.append(key)
        if times[key] is None:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        return times[key]
    return median_ms


KEY = {"gpu": "H100", "library": 130000, "m": 4096, "n": 4096, "k": 4096, "mode": "cold"}


def test_the_fastest_candidate_is_chosen_and_every_one_is_said(tmp_path):
    gemm, asked = ListedGemm([11, 22, 33, 44]), []
    plan = cublas_best.choose("the default", gemm, timer({"default": 1.00, 11: 1.02, 22: 0.95, 33: None, 44: 0.97},
                                                         asked), tmp_path, KEY)
    assert plan["against"] == "best" and plan["best"]["algo"] == {"id": 22} and gemm.index == 1
    assert plan["default"] == {"index": -1, "call": "default", "median_ms": 1.00}
    assert [c.get("median_ms") for c in plan["candidates"]] == [1.00, 1.02, 0.95, None, 0.97]
    assert "NOT_SUPPORTED" in plan["candidates"][3]["error"] and not plan["cached"]
    assert asked == ["default", 11, 22, 33, 44]
    ResultEnv.model_validate({"cublas_best": plan})  # what the result stores passes its schema


def test_where_the_default_is_fastest_it_is_the_baseline(tmp_path):
    gemm = ListedGemm([11, 22])
    plan = cublas_best.choose("the default", gemm, timer({"default": 0.90, 11: 0.91, 22: 1.3}, []), tmp_path, KEY)
    assert plan["against"] == "default" and plan["best"]["index"] == -1
    assert gemm.index == 0  # left on the fastest candidate, should a caller want it


def test_a_choice_is_cached_per_key_and_made_again_when_the_candidates_change(tmp_path):
    times = {"default": 1.0, 11: 1.1, 22: 0.8, 33: 0.7}
    cublas_best.choose("d", ListedGemm([11, 22]), timer(times, []), tmp_path, KEY)
    asked = []
    again = ListedGemm([11, 22])
    plan = cublas_best.choose("d", again, timer(times, asked), tmp_path, KEY)
    assert plan["cached"] and asked == [] and again.index == 1 and plan["best"]["algo"] == {"id": 22}
    # Another shape, another choice.
    other = cublas_best.choose("d", ListedGemm([11, 22]), timer(times, asked), tmp_path, {**KEY, "m": 1024})
    assert not other["cached"] and asked == ["default", 11, 22]
    # A new library lists other algorithms: the stored index now names another one, so it is timed again.
    asked.clear()
    moved = cublas_best.choose("d", ListedGemm([33, 11]), timer(times, asked), tmp_path, KEY)
    assert not moved["cached"] and asked == ["default", 33, 11] and moved["best"]["algo"] == {"id": 33}


def test_without_a_folder_a_choice_is_kept_in_the_memo_only(tmp_path, monkeypatch):
    """A launcher's confined process: no file written anywhere, the choice kept in the process's memo,
    per key, and made again where the memo's stored candidate is no longer offered."""
    monkeypatch.chdir(tmp_path)
    times, memo = {"default": 1.0, 11: 1.1, 22: 0.8, 33: 0.7}, {}
    first = cublas_best.choose("d", ListedGemm([11, 22]), timer(times, []), None, KEY, memo=memo)
    assert not first["cached"] and len(memo) == 1 and list(tmp_path.iterdir()) == []
    asked, again = [], ListedGemm([11, 22])
    plan = cublas_best.choose("d", again, timer(times, asked), None, KEY, memo=memo)
    assert plan["cached"] and asked == [] and again.index == 1 and plan["best"]["algo"] == {"id": 22}
    other = cublas_best.choose("d", ListedGemm([11, 22]), timer(times, asked), None, {**KEY, "m": 1024}, memo=memo)
    assert not other["cached"] and asked == ["default", 11, 22] and len(memo) == 2
    asked.clear()
    moved = cublas_best.choose("d", ListedGemm([33, 11]), timer(times, asked), None, KEY, memo=memo)
    assert not moved["cached"] and asked == ["default", 33, 11]
    # Neither a folder nor a memo: timed every time.
    asked.clear()
    cublas_best.choose("d", ListedGemm([11, 22]), timer(times, asked), None, KEY)
    assert asked == ["default", 11, 22]


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path / "data"))
    return CpuRunner()


def policy(baseline: str) -> TimingPolicy:
    return TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0,
                                               GEMMWATCH_CUBLAS_BASELINE=baseline))


def test_a_kernel_is_timed_beside_cublass_best_and_says_so(runner, monkeypatch):
    monkeypatch.setenv("FAKE_GPU_CUBLAS_CANDIDATES", "1.04,0.90,0,1.10")
    case = builtin_case("smem_tiled", 128, 128, 128, seed=5)
    best = runner.run_case(case, policy("best"))
    default = runner.run_case(case, policy("default"))
    assert best.verified and default.verified
    chosen = best.env["cublas_best"]
    assert chosen["against"] == "best" and chosen["best"]["index"] == 1 and chosen["best"]["algo"]["id"] == 101
    assert "failed" in chosen["candidates"][3]["error"]  # the candidate that cannot run is said, not chosen
    assert best.env["cublas_plan"]["algo"]["id"] == 101  # the call that was timed is the chosen one
    assert "cublas_best" not in default.env
    # The baseline 10 % faster: the kernel's % of cuBLAS 10 % lower, its own speed the same.
    assert best.pct_of_cublas == pytest.approx(default.pct_of_cublas * 0.90, rel=0.02)
    assert best.gflops == pytest.approx(default.gflops, rel=0.02)
    assert best.cublas_median_ms == pytest.approx(default.cublas_median_ms * 0.90, rel=0.02)
    again = runner.run_case(case, policy("best"))
    assert again.env["cublas_best"]["cached"] and again.env["cublas_best"]["best"]["index"] == 1


def test_a_fastest_candidate_whose_c_is_wrong_is_not_the_bar(runner, monkeypatch):
    """The bar must be a right product: cuBLASLt's fastest candidate is checked once, and one whose
    C is off is dropped for the default call, the result saying by how much."""
    monkeypatch.setenv("FAKE_GPU_CUBLAS_CANDIDATES", "1.04,0.90w")
    case = builtin_case("smem_tiled", 128, 128, 128, seed=6)
    out = runner.run_case(case, policy("best"))
    chosen = out.env["cublas_best"]
    assert out.verified and chosen["against"] == "default", chosen
    assert chosen["why"].startswith("cuBLASLt's fastest candidate gave a C off by 0.1"), chosen["why"]
    default = runner.run_case(case, policy("default"))
    assert out.cublas_median_ms == pytest.approx(default.cublas_median_ms, rel=0.02)


def test_the_gpu_is_named_once_for_the_cache_however_many_cases(runner, monkeypatch):
    """The cache's key names the GPU: read once per process, not from NVML at every case."""
    monkeypatch.setenv("FAKE_GPU_CUBLAS_CANDIDATES", "1.04,0.90")
    asked = []
    identity = runner.device.identity
    monkeypatch.setattr(runner.device, "identity", lambda: asked.append(1) or identity())
    for size in (64, 96, 128):
        assert runner.run_case(builtin_case("smem_tiled", size, size, size, seed=5), policy("best")).verified
    assert len(asked) == 1


def test_without_candidates_the_default_is_the_baseline_and_the_result_says_why(runner, monkeypatch):
    monkeypatch.delenv("FAKE_GPU_CUBLAS_CANDIDATES", raising=False)
    out = runner.run_case(builtin_case("smem_tiled", 64, 64, 64, seed=5), policy("best"))
    assert out.env["cublas_best"]["against"] == "default"
    assert out.env["cublas_best"]["why"].startswith("no cuBLASLt candidates for this GEMM")
    # cuBLASLt refusing the shape (as at N = 4095 in TF32) is no failed case: the default is timed.
    monkeypatch.setenv("FAKE_GPU_CUBLAS_CANDIDATES", "not,a,number")
    refused = runner.run_case(builtin_case("smem_tiled", 64, 64, 64, seed=5), policy("best"))
    assert refused.verified and refused.error is None and refused.pct_of_cublas == out.pct_of_cublas
    assert refused.env["cublas_best"]["why"].startswith("cuBLASLt offers no candidates here: could not convert")


def test_the_job_page_says_against_which_cublas_each_percent_is(cfg, start_worker):
    from tests.conftest import make_client, wait_for_job

    start_worker(cfg, FAKE_GPU_CUBLAS_CANDIDATES="1.03,0.92")
    client = make_client(cfg)
    resp = client.post("/api/jobs", json={"variants": ["smem_tiled"], "sizes": [[128, 128, 128]]})
    job = wait_for_job(client, resp.json()["id"], timeout=120)
    assert job["status"] == "succeeded", job["error"]
    [result] = job["results"]
    assert result["env"]["cublas_best"]["against"] == "best"
    page = client.get(f"/jobs/{job['id']}").text
    assert '<small class="cublas-against">vs best</small>' in page and 'id="cublas-against"' in page
    assert "cuBLAS default " in page and " ms, best " in page  # both medians, in the cell's tooltip
