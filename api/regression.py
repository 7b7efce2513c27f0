"""Is a commit's result slower than its series' history? (one series = variant, size, GPU, mode)

The method, chosen after looking at the established tools:
- Bencher's t-test prediction interval: the baseline is the series' previous results (up to
  `window` of them); a new point is a regression when it falls below the one-sided prediction
  interval mean - t(boundary, n-1) * sd * sqrt(1 + 1/n). It adapts to each series' own noise,
  which a fixed percentage cannot: cuBLAS at 8192^3 moves 0.02 %, a small kernel at 1024^3 5 %.
- The point's own samples widen the interval: the standard error of its median
  (1.2533 * noise * value / sqrt(n_samples)) is added in quadrature, so a noisy measurement needs
  a bigger drop before it is called a regression. Callers pass the interquartile spread as the
  noise (api/baselines.py), so one outlier sample does not blind the verdict.
- With fewer than `min_points` earlier results (a CI run against a single base commit) there is
  no interval: the drop must exceed both the floor and three times the two runs' sample noise.
- Conbench's floor: the drop must also exceed `min_drop` (a fraction), so a statistically
  clear but practically meaningless change on a very quiet series does not fail a build.
- asv's Mann-Whitney comparison of raw samples was not chosen as the verdict: two single runs
  of a GPU kernel are each very precise, so it flags run-to-run clock steps of 0.5 % as
  significant; the history-based interval absorbs those.
Thresholds are settings (GEMMWATCH_REGRESSION_*).
"""

import math
import statistics
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Thresholds:
    boundary: float = 0.999  # one-sided confidence of the prediction interval
    window: int = 64  # most recent baseline points used
    min_points: int = 5  # fewer baseline points than this: no verdict
    min_drop: float = 0.02  # a regression must also be at least this fraction slower

    @classmethod
    def from_settings(cls, s) -> "Thresholds":
        return cls(s.regression_boundary, s.regression_window, s.regression_min_points, s.regression_min_drop)


@dataclass(frozen=True)
class Point:
    value: float  # GFLOPS (higher is better)
    noise: float | None = None  # relative stddev of the point's own samples
    n_samples: int | None = None


@dataclass(frozen=True)
class Verdict:
    regression: bool
    delta: float | None  # (value - baseline mean) / baseline mean
    lower_bound: float | None
    baseline_mean: float | None
    reason: str


def t_quantile(p: float, dof: int) -> float:
    """Student-t quantile by the Cornish-Fisher expansion around the normal quantile
    (Abramowitz & Stegun 26.7.5): within 0.1 % of the exact value for dof >= 4 at p <= 0.999."""
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / dof + g2 / dof**2 + g3 / dof**3 + g4 / dof**4


def judge(history: list[Point], current: Point, th: Thresholds = Thresholds()) -> Verdict:
    recent = history[-th.window:]
    baseline = [p.value for p in recent]
    if not baseline:
        return Verdict(False, None, None, None, "no earlier result to compare with")
    if len(baseline) < th.min_points:
        return _judge_few(recent, current, th)
    n = len(baseline)
    mean = statistics.fmean(baseline)
    sd = statistics.stdev(baseline)
    own_se = 0.0
    if current.noise and current.n_samples:
        own_se = 1.2533 * current.noise * current.value / math.sqrt(current.n_samples)
    spread = math.sqrt(sd**2 * (1 + 1 / n) + own_se**2)
    lower = mean - t_quantile(th.boundary, n - 1) * spread
    delta = (current.value - mean) / mean
    slower_than_interval = current.value < lower
    big_enough = -delta >= th.min_drop
    regression = slower_than_interval and big_enough
    if regression:
        reason = f"{-100 * delta:.1f} % below the mean of {n} earlier results, under the {th.boundary:g} bound"
    elif slower_than_interval:
        reason = f"below the {th.boundary:g} bound but only {-100 * delta:.1f} % slower (floor {100 * th.min_drop:g} %)"
    else:
        reason = f"within the {th.boundary:g} prediction interval of {n} earlier results"
    return Verdict(regression, delta, lower, mean, reason)


def _judge_few(recent: list[Point], current: Point, th: Thresholds) -> Verdict:
    """Too few earlier results for an interval (a CI run against one base commit): compare with
    their mean, and call it a regression only beyond both the floor and three times the two
    measurements' own sample noise."""
    mean = statistics.fmean(p.value for p in recent)
    noises = [p.noise or 0.0 for p in recent]
    combined = math.sqrt((current.noise or 0.0) ** 2 + statistics.fmean(n**2 for n in noises))
    threshold = max(th.min_drop, 3 * combined)
    delta = (current.value - mean) / mean
    regression = -delta >= threshold
    word = "below" if regression else "within"
    reason = (f"{100 * delta:+.1f} % vs the mean of {len(recent)} earlier result(s); {word} the"
              f" {100 * threshold:.1f} % threshold (floor or 3x sample noise; {th.min_points} results give an interval)")
    return Verdict(regression, delta, mean * (1 - threshold), mean, reason)


def flag_series(points: list[Point], th: Thresholds = Thresholds()) -> list[Verdict]:
    """A verdict for every point of a series ordered oldest first, each against those before it."""
    return [judge(points[:i], p, th) for i, p in enumerate(points)]
