"""The statistics of a result's timing samples, declared once (issue 38).

TimingStats below is the one list: its keys are what worker/stats.py summarise() returns (typed
so), and the names a result carries them under wherever it is kept or sent:

  worker/cases.py       CaseOutcome   what a case reports (add_timing copies a summary in)
  core/models.py        Result        the result row's columns
  core/result_env.py    Stats         env.cublas_stats (cuBLAS's samples), env.ab.base_stats (a base's)
  api/schemas.py        ResultOut     what GET /api/results and a job's results say
  api/posted_schemas.py ResultIn      what `gemmwatch run --post` sends

Each of those declares the fields in its own typed terms (a dataclass field, a column, a pydantic
field with its bounds) and keeps its own order, so the database schema and the wire format stay as
they were; tests/test_statistics_fields.py fails when one of them names a set other than
STATISTICS (with CUBLAS_TWINS, for the places that hold a result row).

cuBLAS's twins: a result is timed beside cuBLAS, and summarise() runs over cuBLAS's samples too.
The row keeps only cuBLAS's median beside the variant's (cublas_median_ms); the whole summary is in
env.cublas_stats.
"""

from typing import TypedDict


class TimingStats(TypedDict):
    """What a list of timing samples (milliseconds, in the order taken) says: worker/stats.py summarise()."""

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
