"""Is a commit's result slower than its series' history? (one series = variant, size, GPU, mode)

The method, chosen after looking at the established tools:
- Bencher's t-test prediction interval: the baseline is the series' previous results (up to
  `window` of them); a new point is a regression when it falls below the one-sided prediction
  interval mean - t(boundary, n-1) * sd * sqrt(1 + 1/n). It adapts to each series' own noise,
  which a fixed percentage cannot: cuBLAS at 8192^3 moves 0.02 %, a small kernel at 1024^3 5 %.
- The point's own samples widen the interval: the standard error of its median
  (1.2533 * noise * value / sqrt(n_samples)) is added in quadrature, so a noisy measurement needs
  a bigger drop before it is called a regression. Callers pass the interquartile spread as the
  noise (core/verdicts/baselines.py), so one outlier sample does not blind the verdict.
- With fewer than `min_points` earlier results (a CI run against a single base commit) there is
  no interval: the drop must exceed both the floor and three times the two runs' sample noise,
  the latter capped at half, so no noise excuses a kernel running at half speed or worse.
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

import numpy as np

# The mode of a confirmation's results (its paired A/B samples, judged by judge_paired): kept apart
# from every history, baseline and chart by it. Here, in a module without SQL, because the GPU
# process stores results under it and should not import the database layer to do so.
AB_MODE = "ab"


@dataclass(frozen=True)
class Thresholds:
    boundary: float = 0.999  # one-sided confidence of the prediction interval
    window: int = 64  # most recent baseline points used
    min_points: int = 5  # fewer baseline points than this: no verdict
    min_drop: float = 0.02  # a regression must also be at least this fraction slower
    # With few results the noise sets the threshold, but never above this: a kernel at half its
    # base's speed is a regression however noisy the samples (seen: 3x a 32 % spread on a loaded
    # CI machine called a 96 % drop "ok").
    max_noise_threshold: float = 0.5

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
    # The same rule mirrored: faster beyond the interval (or the threshold) and by the floor at
    # least. A gain inside the noise is "ok", as a loss inside it is.
    faster: bool = False


def t_quantile(p: float, dof: int) -> float:
    """Student-t quantile, exact: the t CDF in closed form for a whole number of degrees of freedom
    (Abramowitz & Stegun 26.7.3 and 26.7.4), inverted by bisection. A Cornish-Fisher expansion
    served before; it was 0.84 % low at 4 degrees of freedom, the bound's smallest window."""
    if not 0.5 <= p < 1 or dof < 1:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1 and dof >= 1, not p={p}, dof={dof}")
    low, high = 0.0, 1.0
    while t_cdf(high, dof) < p:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, dof) < p else (low, mid)
    return (low + high) / 2


def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for t >= 0 and Student's t with `dof` (a whole number) degrees of freedom."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    term, total = 1.0, 1.0  # the finite series in cos^2(theta), first term 1
    if dof % 2:  # odd: A = (2/pi)(theta + sin cos (1 + 2/3 c2 + 2*4/(3*5) c2^2 + ...)), to cos^(dof-3)
        for j in range(1, (dof - 1) // 2):
            term *= c2 * (2 * j) / (2 * j + 1)
            total += term
        inside = 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if dof > 1 else 0.0))
    else:  # even: A = sin (1 + 1/2 c2 + 1*3/(2*4) c2^2 + ...), to cos^(dof-2)
        for j in range(1, dof // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        inside = math.sin(theta) * total
    return (1 + inside) / 2


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
    faster = current.value > mean + (mean - lower) and delta >= th.min_drop
    if regression:
        reason = f"{-100 * delta:.1f} % below the mean of {n} earlier results, under the {th.boundary:g} bound"
    elif slower_than_interval:
        reason = f"below the {th.boundary:g} bound but only {-100 * delta:.1f} % slower (floor {100 * th.min_drop:g} %)"
    elif faster:
        reason = f"{100 * delta:.1f} % above the mean of {n} earlier results, over the {th.boundary:g} bound"
    else:
        reason = f"within the {th.boundary:g} prediction interval of {n} earlier results"
    return Verdict(regression, delta, lower, mean, reason, faster)


def _judge_few(recent: list[Point], current: Point, th: Thresholds) -> Verdict:
    """Too few earlier results for an interval (a CI run against one base commit): compare with
    their mean, and call it a regression only beyond both the floor and three times the two
    measurements' own sample noise (that at most max_noise_threshold)."""
    mean = statistics.fmean(p.value for p in recent)
    noises = [p.noise or 0.0 for p in recent]
    combined = math.sqrt((current.noise or 0.0) ** 2 + statistics.fmean(n**2 for n in noises))
    # A side whose noise is unknown (a tool that reports one mean, no spread) could be noisy to any
    # degree: only a change past the cap is told apart from it (nvbench's batch time of one run
    # read 24 % below the same code's run before).
    unknown = current.noise is None or any(p.noise is None for p in recent)
    threshold = th.max_noise_threshold if unknown else max(th.min_drop, min(3 * combined, th.max_noise_threshold))
    delta = (current.value - mean) / mean
    regression = -delta >= threshold
    word = "below" if regression else "above" if delta >= threshold else "within"
    rule = ("the cap: a side's sample noise is unknown" if unknown else "floor or 3x sample noise"
            if 3 * combined <= th.max_noise_threshold else "the cap: the samples are too noisy for less")
    reason = (f"{100 * delta:+.1f} % vs the mean of {len(recent)} earlier result(s); {word} the"
              f" {100 * threshold:.1f} % threshold ({rule}; {th.min_points} results give an interval)")
    return Verdict(regression, delta, mean * (1 - threshold), mean, reason, faster=delta >= threshold)


def flag_series(points: list[Point], th: Thresholds = Thresholds()) -> list[Verdict]:
    """A verdict for every point of a series ordered oldest first, each against those before it."""
    return [judge(points[:i], p, th) for i, p in enumerate(points)]


# -- Same-job A/B confirmation -------------------------------------------------------------------
# The history verdict above compares measurements taken on other days, maybe on another card: a
# GPU's clocks, temperature and neighbours drift by a few percent from one day to the next, and
# that drift is indistinguishable from a small real change. A confirmation job times the base
# commit's kernel and the head's interleaved (A B A B ...) on one GPU, so each pair of samples
# shares the clock and thermal state of the moment it was taken.
#
# The method: the per-pair time ratio head/base, its median, and a percentile-bootstrap
# confidence interval of that median (resampling whole pairs).
# - Pairing is what cancels drift: a clock step between pairs moves both sides of the ratio.
#   Mann-Whitney on the two sample sets was not chosen: it ignores the pairing, so a clock
#   change during the run widens both sets, and on a quiet GPU it calls a 0.3 % difference
#   "significant", which needs an effect-size floor bolted on afterwards.
# - The median ratio, not the mean: a preempted or throttled sample moves it by one rank.
# - The bootstrap assumes no distribution of the ratios (they are skewed and often bimodal when
#   clocks step) and gives the effect size and its uncertainty as one interval a person can read.
# - The verdict is an equivalence test on that interval against a band of +-min_change:
#   wholly above the band: regression; wholly below: improvement; wholly inside: no change;
#   anything else (the interval straddles a band edge, or too few pairs): undecided.
#   So a run that is too noisy to tell never fails a build and never passes a regression: it
#   says so.


@dataclass(frozen=True)
class PairedThresholds:
    confidence: float = 0.99  # two-sided confidence of the bootstrap interval
    min_change: float = 0.01  # the "no change" band: +-1 % of time per pair
    min_pairs: int = 10  # fewer pairs than this: undecided
    resamples: int = 2000

    @classmethod
    def from_settings(cls, s) -> "PairedThresholds":
        return cls(s.confirm_confidence, s.confirm_min_change, s.confirm_min_pairs, s.confirm_resamples)


@dataclass(frozen=True)
class PairedVerdict:
    status: str  # "regression", "improvement", "no change", "undecided"
    ratio: float | None  # median head/base time ratio: 1.03 = head takes 3 % longer
    low: float | None
    high: float | None
    pairs: int
    reason: str


def paired_ratio_interval(base_ms: list[float], head_ms: list[float], confidence: float,
                          resamples: int, seed: int = 0) -> tuple[float, float, float]:
    """Median of head/base per pair, with its percentile-bootstrap interval (pairs resampled whole).
    Seeded, so the same samples always give the same verdict."""
    ratios = np.asarray(head_ms, dtype=float) / np.asarray(base_ms, dtype=float)
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // len(ratios))  # bounded memory however many pairs a long run took
    medians = np.concatenate([
        resampled_medians(ratios, rng.integers(0, len(ratios), size=(min(chunk, resamples - done), len(ratios))))
        for done in range(0, resamples, chunk)
    ])
    tail = (1 - confidence) / 2
    low, high = np.quantile(medians, [tail, 1 - tail])
    return float(np.median(ratios)), float(low), float(high)


def resampled_medians(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """np.median(values[draws], axis=1), the same numbers, without sorting each resample: a resample's
    median is an order statistic of `values`, found by counting how often each sorted value was drawn.
    A partition per resample took 1 s of a confirmation's verdicts at 2,000 resamples of 2,400 pairs
    (an API thread held that long); counting takes a few hundredths."""
    order = np.argsort(values, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(values))
    rows, n = draws.shape
    counts = np.bincount((rank[draws] + n * np.arange(rows)[:, None]).ravel(), minlength=rows * n).reshape(rows, n)
    reached = np.cumsum(counts, axis=1)
    ordered = values[order]
    # 0-based positions of the middle of n sorted draws: (n-1)//2 and n//2 (one and the same when n is odd).
    low = ordered[np.argmax(reached > (n - 1) // 2, axis=1)]
    high = ordered[np.argmax(reached > n // 2, axis=1)]
    return (low + high) / 2 if n % 2 == 0 else low


def judge_paired(base_ms: list[float], head_ms: list[float], th: PairedThresholds = PairedThresholds()) -> PairedVerdict:
    pairs = min(len(base_ms), len(head_ms))
    base_ms, head_ms = base_ms[:pairs], head_ms[:pairs]
    if pairs < th.min_pairs or min(base_ms, default=0) <= 0 or min(head_ms, default=0) <= 0:
        return PairedVerdict("undecided", None, None, None, pairs,
                             f"{pairs} usable pair(s); at least {th.min_pairs} are needed")
    ratio, low, high = paired_ratio_interval(base_ms, head_ms, th.confidence, th.resamples)
    band_low, band_high = 1 - th.min_change, 1 + th.min_change
    interval = f"head/base time {ratio:.4f} [{low:.4f}, {high:.4f}] ({100 * th.confidence:g} % CI, {pairs} pairs)"
    if low > band_high:
        status, why = "regression", f"slower beyond the {100 * th.min_change:g} % band"
    elif high < band_low:
        status, why = "improvement", f"faster beyond the {100 * th.min_change:g} % band"
    elif low >= band_low and high <= band_high:
        status, why = "no change", f"inside the +-{100 * th.min_change:g} % band"
    else:
        status, why = "undecided", f"the interval crosses an edge of the +-{100 * th.min_change:g} % band"
    return PairedVerdict(status, ratio, low, high, pairs, f"{interval}: {why}")
