"""Issue 53: where a case's time goes, stage by stage (worker/measure/stage_clock.py), recorded on each
result as env.stages_s, through the runner over the CPU double: a plain case, a wrong kernel and a
head-against-base confirmation."""

import time

import pytest

from core.description.builtins import builtin_kernels
from core.results.result_env import CASE_STAGES, ResultEnv
from core.settings import Settings
from tests.fake_gpu import CpuRunner
from worker.measure.cases import Case, KernelChoice, TimingPolicy, builtin_case
from worker.measure.stage_clock import StageClock

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


class Ticks:
    """A clock that moves only when told to."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_stage_entered_twice_adds_up_and_one_that_raised_still_counts():
    ticks = Ticks()
    clock = StageClock(ticks)
    with clock.stage("verify"):
        ticks.now += 0.25
    with clock.stage("samples"):
        ticks.now += 1.5
    with clock.stage("verify"):  # the base's check after the head's, in a confirmation
        ticks.now += 0.5
    with pytest.raises(RuntimeError), clock.stage("resources"):
        ticks.now += 0.125
        raise RuntimeError("the cubin could not be read")
    assert clock.record() == {"verify": 0.75, "samples": 1.5, "resources": 0.125}
    assert list(clock.record()) == ["verify", "samples", "resources"]  # in the order a case meets them


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="unknown stage 'warmup'"), StageClock().stage("warmup"):
        pass


def _checked(out) -> dict[str, float]:
    stages = out.env["stages_s"]
    assert ResultEnv.model_validate(out.env).stages_s is not None  # declared, not moved into env.extra
    assert all(v >= 0 for v in stages.values())
    return stages


def test_a_case_records_each_stage_it_ran_and_they_fit_in_its_wall_time(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    runner = CpuRunner()
    began = time.perf_counter()
    out = runner.run_case(builtin_case("smem_tiled", 64, 64, 64, seed=5), POLICY)
    wall = time.perf_counter() - began
    assert out.verified, out.error
    stages = _checked(out)
    # The default form has no cuBLAS check of its own: its product is the reference's; no launcher, no process of its own.
    assert set(stages) == set(CASE_STAGES) - {"cublas_check", "launcher_setup"}
    assert sum(stages.values()) <= wall


def test_a_wrong_kernel_has_no_samples_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_GPU_WRONG_VARIANT", "smem_tiled")
    out = CpuRunner().run_case(builtin_case("smem_tiled", 64, 64, 64, seed=5), POLICY)
    assert out.status == "incorrect"
    stages = _checked(out)
    assert "verify" in stages and "samples" not in stages and "after_check" not in stages


def test_a_confirmation_records_both_sides_compile_check_and_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    smem = builtin_kernels()["smem_tiled"]
    case = Case(0, "smem_tiled", 64, 64, 64, 5, KernelChoice(smem, {}, "job"), base=KernelChoice(smem, {}, "builtin"))
    out = CpuRunner().run_case(case, POLICY)
    assert out.verified, out.error
    stages = _checked(out)
    assert set(stages) == {"compile", "reference", "verify", "resources", "samples"}
