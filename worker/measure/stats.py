"""Summary statistics of timing samples, and the stopping rule.

Why not nvbench's stdrel (stddev/mean <= 0.5 %): GPU timings have a few far outliers (a clock
step, an interrupt, a page of the flush buffer). One sample at 3x the median moves stddev/mean
by whole percents, so at small sizes the rule never held (95 % "noise" at 256^3 on an H200)
although the median was steady to 0.1 %. The rule here asks about the figure that is reported,
the median:
  - precision: the distribution-free 95 % confidence interval of the median (from order
    statistics, no normality assumed) is within +-max_noise of it;
  - stability: the medians of the first and second halves of the samples differ by at most
    max_drift, so a figure that wanders (clocks ramping, a neighbour's load) is not reported as
    converged however many samples there are.
"""

import math
import statistics

# summarise and noise are the samples' statistics as core reads them too (an import's samples).
from core.results.sample_stats import median_ci, noise, summarise  # noqa: F401  (worker.measure.stats.summarise)


def convergence(samples: list[float]) -> dict[str, float]:
    """What the stop rule looks at: the median's relative 95 % half-width, and the relative drift
    between the medians of the first and second halves."""
    if len(samples) < 4:
        return {"median_ci_rel": math.inf, "drift_rel": math.inf}
    med = statistics.median(samples)
    lo, hi = median_ci(samples)
    half = len(samples) // 2
    first, second = statistics.median(samples[:half]), statistics.median(samples[half:])
    return {"median_ci_rel": (hi - lo) / 2 / med if med > 0 else math.inf,
            "drift_rel": abs(second - first) / med if med > 0 else math.inf}


def has_converged(samples: list[float], min_samples: int, max_noise: float, max_drift: float = 0.01) -> bool:
    if len(samples) < max(min_samples, 4):
        return False
    c = convergence(samples)
    return c["median_ci_rel"] <= max_noise and c["drift_rel"] <= max_drift
