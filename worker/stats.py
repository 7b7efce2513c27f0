"""Summary statistics of timing samples, and the stopping rule (nvbench's stdrel)."""

import statistics


def noise(samples: list[float]) -> float:
    """Relative noise: sample standard deviation over the mean."""
    if len(samples) < 2:
        return float("inf")
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else float("inf")


def has_converged(samples: list[float], min_samples: int, max_noise: float) -> bool:
    return len(samples) >= min_samples and noise(samples) <= max_noise


def summarise(samples: list[float]) -> dict[str, float]:
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
