"""What a set of timing samples says about its median, for the worker's stop rule and for the
compare view's intervals: both must read the samples the same way."""

import math
import statistics
from dataclasses import dataclass

from core.results.timing_stats import TimingStats

Z95 = 1.96


def median_ci(samples: list[float], z: float = Z95) -> tuple[float, float]:
    """The ~95 % confidence interval of the median: order statistics n/2 -+ z*sqrt(n)/2 (no
    normality assumed: GPU timings have far outliers, a clock step, an interrupt)."""
    x = sorted(samples)
    n = len(x)
    half = z * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half))
    return x[lo], x[hi]


MIN_SAMPLES = 4  # fewer, and the order statistics above span the whole sample: no interval


@dataclass(frozen=True)
class SpeedRatio:
    """B's speed over A's at one size: A's median time over B's (1.05: B is 5 % faster)."""

    ratio: float
    low: float | None = None  # ~95 % interval; None where a side has too few samples
    high: float | None = None
    confidence: float | None = None  # 1 - the two-sided p-value of "B is as fast as A"
    band: float = 0.0  # a change smaller than this is no change, however sure (the CI hook's 1 %)

    @property
    def direction(self) -> str:
        """"faster" or "slower" when the interval leaves 1 behind by more than the band; "within
        noise" when it holds 1; "under the band" when it is clear but smaller than the band."""
        if self.low is None or self.high is None or self.low <= 1 <= self.high:
            return "within noise"
        if abs(self.ratio - 1) < self.band:
            return "under the band"
        return "faster" if self.low > 1 else "slower"


def _log_se(samples: list[float], median: float) -> float | None:
    """A standard error of ln(median) from the median's interval: its log half-width over z."""
    if len(samples) < MIN_SAMPLES or median <= 0 or min(samples) <= 0:
        return None
    lo, hi = median_ci(samples)
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


def speed_ratio(a_median_ms: float, b_median_ms: float, a_samples: list[float] | None,
                b_samples: list[float] | None, band: float = 0.0) -> SpeedRatio | None:
    """B's speed over A's, with an interval, for two results measured apart (two commits' jobs,
    two GPUs, two modes): unlike a same-job confirmation (core/verdicts/regression.py) there are no pairs
    to resample. Each side's median gets its order-statistic interval; on a log scale its
    half-width over 1.96 stands for a standard error, the two add in quadrature, and the
    interval is ratio x exp(-+1.96 se). Confidence: erf(|ln ratio| / (se sqrt 2)), 0.95 where the
    interval just touches 1. It covers the spread of the samples within each job, not what moves
    between jobs (clocks, a neighbour): a commit's change is confirmed in one job (`gemmwatch ci`)."""
    if not (a_median_ms and b_median_ms) or a_median_ms <= 0 or b_median_ms <= 0:
        return None
    ratio = a_median_ms / b_median_ms
    se_a, se_b = _log_se(a_samples or [], a_median_ms), _log_se(b_samples or [], b_median_ms)
    if se_a is None or se_b is None:
        return SpeedRatio(ratio, band=band)
    se = math.hypot(se_a, se_b)
    if se == 0:
        return SpeedRatio(ratio, ratio, ratio, 0.0 if ratio == 1 else 1.0, band)
    spread = math.exp(Z95 * se)
    return SpeedRatio(ratio, ratio / spread, ratio * spread, math.erf(abs(math.log(ratio)) / (se * math.sqrt(2))), band)


def noise(samples: list[float]) -> float:
    """Relative noise: sample standard deviation over the mean."""
    if len(samples) < 2:
        return float("inf")
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else float("inf")


def summarise(samples: list[float]) -> TimingStats:
    """The statistics core/results/timing_stats.py declares, each under its name there."""
    q1, _, q3 = statistics.quantiles(samples, n=4) if len(samples) >= 2 else (samples[0],) * 3
    return {
        "median_ms": statistics.median(samples),
        "mean_ms": statistics.fmean(samples),
        "stddev_ms": statistics.stdev(samples) if len(samples) >= 2 else 0.0,
        "min_ms": min(samples),
        "max_ms": max(samples),
        "q1_ms": q1,
        "q3_ms": q3,
        "noise": noise(samples),
    }
