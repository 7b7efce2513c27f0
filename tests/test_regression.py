"""Regression detection on synthetic histories with known changes."""

import random

import pytest

from core.verdicts.regression import Point, Thresholds, flag_series, judge, t_quantile


def synthetic(n_before: int, drop: float, noise: float, seed: int, n_after: int = 1) -> list[Point]:
    rng = random.Random(seed)
    base = 40_000.0
    values = [base * (1 + rng.gauss(0, noise)) for _ in range(n_before)]
    values += [base * (1 - drop) * (1 + rng.gauss(0, noise)) for _ in range(n_after)]
    return [Point(v, noise=noise, n_samples=20) for v in values]


def test_t_quantile_matches_tables():
    # Student-t table values (one-sided): t(0.99, 10) = 2.764, t(0.999, 10) = 4.144, t(0.999, 60) = 3.232,
    # t(0.999, 30) = 3.385, t(0.995, 20) = 2.845.
    assert t_quantile(0.99, 10) == pytest.approx(2.764, rel=2e-3)
    assert t_quantile(0.999, 10) == pytest.approx(4.144, rel=5e-3)
    assert t_quantile(0.999, 60) == pytest.approx(3.232, rel=2e-3)
    assert t_quantile(0.999, 30) == pytest.approx(3.385, rel=2e-3)
    assert t_quantile(0.995, 20) == pytest.approx(2.845, rel=2e-3)
    # The bound's smallest windows, where an expansion around the normal quantile is worst, and the
    # odd and even series at their shortest: t(0.999, 4) = 7.173, t(0.999, 1) = 318.309,
    # t(0.999, 2) = 22.327, t(0.975, 3) = 3.182.
    assert t_quantile(0.999, 4) == pytest.approx(7.173, rel=2e-4)
    assert t_quantile(0.999, 1) == pytest.approx(318.309, rel=2e-4)
    assert t_quantile(0.999, 2) == pytest.approx(22.327, rel=2e-4)
    assert t_quantile(0.975, 3) == pytest.approx(3.182, rel=2e-4)


def test_a_3_percent_drop_after_200_steady_commits_is_flagged_there_and_only_there():
    points = synthetic(200, drop=0.03, noise=0.005, seed=1)
    flags = [v.regression for v in flag_series(points)]
    assert flags[200] is True
    assert not any(flags[:200])


@pytest.mark.parametrize("seed", range(10))
def test_no_false_alarms_on_steady_histories(seed):
    points = synthetic(200, drop=0.0, noise=0.005, seed=seed, n_after=0)
    assert not any(v.regression for v in flag_series(points))


@pytest.mark.parametrize("seed", range(10))
def test_the_drop_is_caught_whatever_the_noise_draw(seed):
    points = synthetic(200, drop=0.03, noise=0.005, seed=100 + seed)
    assert flag_series(points)[-1].regression


def test_noisy_series_needs_a_bigger_drop():
    noisy = synthetic(100, drop=0.03, noise=0.03, seed=5)  # 3 % noise: a 3 % drop is within it
    assert not judge(noisy[:-1], noisy[-1]).regression


def test_the_floor_keeps_tiny_changes_on_quiet_series_quiet():
    quiet = synthetic(100, drop=0.01, noise=0.0005, seed=6)  # 1 % drop, far outside 0.05 % noise
    verdict = judge(quiet[:-1], quiet[-1])
    assert not verdict.regression and "floor" in verdict.reason
    assert judge(quiet[:-1], quiet[-1], Thresholds(min_drop=0.005)).regression


def test_no_history_gives_no_verdict():
    verdict = judge([], Point(0.5))
    assert not verdict.regression and verdict.delta is None and "no earlier result" in verdict.reason


def test_thresholds_come_from_settings():
    from core.settings import Settings

    th = Thresholds.from_settings(Settings(GEMMWATCH_REGRESSION_MIN_DROP=0.05, GEMMWATCH_REGRESSION_WINDOW=10))
    assert th.min_drop == 0.05 and th.window == 10 and th.boundary == 0.999


def test_against_a_single_base_result_the_floor_and_sample_noise_decide():
    base = [Point(100.0, noise=0.002, n_samples=20)]
    assert judge(base, Point(80.0, noise=0.002, n_samples=20)).regression  # 20 % slower
    assert not judge(base, Point(99.0, noise=0.002, n_samples=20)).regression  # 1 %: under the 2 % floor
    noisy = judge(base, Point(90.0, noise=0.05, n_samples=20))  # 10 % slower but 5 % sample noise
    assert not noisy.regression and "15.0 %" in noisy.reason
    assert "-20.0 %" in judge(base, Point(80.0, noise=0.002, n_samples=20)).reason


def test_faster_is_the_regression_rule_mirrored_not_any_gain_over_the_floor():
    """A gain inside the noise is "ok", as a loss inside it is (seen: +3.4 % against a 26 % noise
    threshold was called faster)."""
    base = [Point(100.0, noise=0.05, n_samples=20)]
    assert not judge(base, Point(110.0, noise=0.05, n_samples=20)).faster  # +10 % inside 3x the noise (21 %)
    assert judge(base, Point(125.0, noise=0.05, n_samples=20)).faster
    assert "above the" in judge(base, Point(125.0, noise=0.05, n_samples=20)).reason
    quiet = [Point(100.0, noise=0.001, n_samples=20)]
    assert not judge(quiet, Point(101.0, noise=0.001, n_samples=20)).faster  # under the 2 % floor
    assert judge(quiet, Point(103.0, noise=0.001, n_samples=20)).faster
    history = [Point(v, noise=0.001, n_samples=50) for v in (100.0, 101.0, 99.0, 100.5, 99.5, 100.0)]
    assert not judge(history, Point(104.0, noise=0.001, n_samples=50)).faster  # inside the interval
    assert judge(history, Point(110.0, noise=0.001, n_samples=50)).faster
    assert "above the mean of 6" in judge(history, Point(110.0, noise=0.001, n_samples=50)).reason
    assert not judge(history, Point(97.0, noise=0.001, n_samples=50)).faster


def test_a_side_of_unknown_noise_is_judged_against_the_cap():
    """A tool that reports one mean and no spread (nvbench's batch time, the CUTLASS profiler) could
    be noisy to any degree: against one earlier result, only a change past the cap counts."""
    known = [Point(100.0, noise=0.001, n_samples=20)]
    assert judge(known, Point(90.0, noise=0.001, n_samples=20)).regression
    unknown_now = judge(known, Point(90.0, noise=None, n_samples=None))
    assert not unknown_now.regression and "the cap: a side's sample noise is unknown" in unknown_now.reason
    unknown_before = judge([Point(100.0, noise=None)], Point(90.0, noise=0.001, n_samples=20))
    assert not unknown_before.regression and not judge([Point(100.0)], Point(130.0)).faster
    assert judge([Point(100.0)], Point(45.0)).regression  # half the speed is a regression whatever the noise


def test_no_noise_excuses_a_kernel_at_half_speed():
    # Seen on a loaded CI machine: the CPU double's samples spread 32 %, and 3x that called a
    # 20x slower kernel "ok". The noise term stops at half.
    base = [Point(100.0, noise=0.30, n_samples=40)]
    slowed = judge(base, Point(3.6, noise=0.35, n_samples=40))
    assert slowed.regression and "50.0 % threshold (the cap" in slowed.reason
    assert not judge(base, Point(60.0, noise=0.35, n_samples=40)).regression  # 40 %: within the noise
    assert judge(base, Point(49.0, noise=0.35, n_samples=40)).regression


def test_a_tn_result_is_judged_against_tn_results_only(client, cfg):
    """One kernel name, one GPU, size and mode, two GEMM forms: NN (rrr) at 1000 GFLOPS and TN with FP16
    sums (rcr+ab+acc16) at 2000 over six commits. A TN head 5 % down is a regression against the TN
    history (were NN in the baseline, its mean would be 1500 and the head "faster"); the NN head beside
    it is ok against NN alone; a TN kernel with only NN history has no baseline (core/verdicts/baselines.py)."""
    from tests.fake_results import add_result

    size, tn = (2048, 2048, 2048), "rcr+ab+acc16"
    for i in range(6):
        add_result(cfg, "warp_tile", size, f"c0ffee{i:02d}", gflops=1000.0 + i, commit_index=i, noise=0.001)
        add_result(cfg, "warp_tile", size, f"c0ffee{i:02d}", gflops=2000.0 + i, commit_index=i, noise=0.001, form=tn)
        add_result(cfg, "nn_only", size, f"c0ffee{i:02d}", gflops=800.0, commit_index=i, noise=0.001)
    head_tn = add_result(cfg, "warp_tile", size, "c0ffee99", gflops=1900.0, commit_index=9, noise=0.001, form=tn)
    head_nn = add_result(cfg, "warp_tile", size, "c0ffee99", gflops=1003.0, commit_index=9, noise=0.001)
    lone_tn = add_result(cfg, "nn_only", size, "c0ffee99", gflops=1500.0, commit_index=9, noise=0.001, form=tn)

    (v,) = client.get(f"/api/jobs/{head_tn}/verdicts").json()
    assert (v["form"], v["baseline_points"], v["status"]) == (tn, 6, "regression"), v
    assert v["baseline_mean"] == pytest.approx(2002.5)
    (v,) = client.get(f"/api/jobs/{head_nn}/verdicts").json()
    assert (v["form"], v["baseline_points"], v["status"]) == ("rrr", 6, "ok"), v
    assert v["baseline_mean"] == pytest.approx(1002.5)
    (v,) = client.get(f"/api/jobs/{lone_tn}/verdicts").json()
    assert (v["form"], v["baseline_points"], v["status"]) == (tn, 0, "no baseline"), v
