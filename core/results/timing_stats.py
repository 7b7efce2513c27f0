"""The statistics of a result's timing samples, declared once (issue 38).

TimingStats below is the one list: its keys are what worker/measure/stats.py summarise() returns (typed
so). Every record that carries them takes its fields from here:

  worker/measure/cases.py       CaseOutcome   what a case reports (add_timing copies a summary in):
                                      a dataclass base made by timing_dataclass()
  core/results/result_env.py    Stats         env.cublas_stats (cuBLAS's samples), env.ab.base_stats (a base's)
  api/schemas.py        ResultOut     what GET /api/results and a job's results say
  api/posted_schemas.py ResultIn      what `gemmwatch run --post` sends
                                      (these three: pydantic fields made by timing_fields())

One place spells them again, on purpose: core/records/models.py Result, whose columns are the database's
schema (each one is also a migration's column, and the queries in core/ are type-checked against
them). tests/test_statistics_fields.py fails when that table, or any record above, holds a set of
statistics other than RESULT_STATISTICS.

cuBLAS's twins: a result is timed beside cuBLAS, and summarise() runs over cuBLAS's samples too.
The row keeps only cuBLAS's median beside the variant's (cublas_median_ms); the whole summary is in
env.cublas_stats.
"""

import dataclasses
from typing import Any, TypedDict


class TimingStats(TypedDict):
    """What a list of timing samples (milliseconds, in the order taken) says: worker/measure/stats.py summarise()."""

    median_ms: float  # the figure a result reports: gflops, % of cuBLAS and every verdict read it
    mean_ms: float
    stddev_ms: float  # the sample standard deviation; 0.0 for a single sample
    min_ms: float
    max_ms: float
    q1_ms: float  # the first quartile (statistics.quantiles, n=4); the sample itself when there is one
    q3_ms: float  # the third quartile
    noise: float  # relative noise, stddev_ms / mean_ms (a fraction); inf for fewer than 2 samples


# The names, in the order declared above.
STATISTICS: tuple[str, ...] = tuple(TimingStats.__annotations__)

# The statistics of cuBLAS's samples that a result row keeps beside the variant's, each named
# "cublas_" + the statistic (the rest are in env.cublas_stats).
CUBLAS_TWINS: tuple[str, ...] = ("cublas_median_ms",)

# What a result row (CaseOutcome, Result, ResultOut, ResultIn) holds of them.
RESULT_STATISTICS: tuple[str, ...] = STATISTICS + CUBLAS_TWINS

# The statistics that are fractions; every other one is a time in milliseconds.
FRACTIONS: tuple[str, ...] = ("noise",)
# The figures a result reports (gflops and % of cuBLAS are read from them): a stored one is never 0.
MEDIANS: tuple[str, ...] = ("median_ms", "cublas_median_ms")


def timing_fields(time: Any, fraction: Any, *, names: tuple[str, ...] = RESULT_STATISTICS,
                  median: Any = None, required: bool = False) -> dict[str, Any]:
    """The statistics as pydantic field definitions (pydantic.create_model's keywords), in the
    declared order: each one `time` or `fraction` (or `median`, for the medians, where given) or
    None. required: a record that always says each one, null where unknown (no default)."""
    def annotation(name: str) -> Any:
        kind = fraction if name in FRACTIONS else median if (median is not None and name in MEDIANS) else time
        return kind | None

    return {name: (annotation(name), ... if required else None) for name in names}


def timing_dataclass(name: str, module: str, names: tuple[str, ...] = RESULT_STATISTICS) -> type:
    """A dataclass holding the statistics, each `float | None = None`: a base for a record that
    fills them from summarise(). module: where it is named (so pickle and reprs find it there)."""
    made = dataclasses.make_dataclass(name, [(stat, float | None, dataclasses.field(default=None))
                                             for stat in names])
    made.__module__ = module
    return made


def gflops(m: int, n: int, k: int, ms: float, batch: int = 1) -> float:
    """A GEMM's speed from its time: 2·M·N·K flops per matrix of the batch (the worker's figures and an
    import's are read the same way)."""
    return 2.0 * m * n * k * batch / (ms * 1e-3) / 1e9
