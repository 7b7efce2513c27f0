"""How a result was timed, named once: gemmwatch's own modes and the modes of imported results.

A mode is a result's column and part of every series' key: charts hold one mode and a verdict reads
a baseline of the same mode only (core/verdicts/baselines.py), so results timed different ways are
never compared as if they were one measurement. Imported results (core/exchange/imports/) get a mode
of their own per tool and measurement: nvbench's cold time is not gemmwatch's cold time (nvbench
flushes L2 with a memset, times one launch alone and reports its own statistics), and a CUTLASS
profiler's loop is neither.
"""

from typing import Literal, get_args

# gemmwatch's own, measured by its workers (core/settings.py says what each does).
TimingMode = Literal["cold", "hot", "burst", "sustained"]
OWN_MODES: tuple[str, ...] = get_args(TimingMode)

# Imported: "<tool>:<measurement>", at most 16 characters (core/records/models.py Result.mode).
ImportedMode = Literal["nvbench:cold", "nvbench:batch", "cutlass:profiler", "table"]
IMPORTED_MODES: dict[str, str] = {
    "nvbench:cold": "nvbench's cold measurement: each launch alone after an L2 flush, timed by CUDA events",
    "nvbench:batch": "nvbench's batch measurement: launches back to back, their GPU time over their count",
    "cutlass:profiler": "the CUTLASS profiler's loop: profiling iterations back to back after warm-up iterations",
    "table": "times from a table (CSV or JSON) as the team's own script measured them",
}
assert set(IMPORTED_MODES) == set(get_args(ImportedMode))
assert all(len(mode) <= 16 for mode in (*OWN_MODES, *IMPORTED_MODES))


def is_imported(mode: str) -> bool:
    return mode in IMPORTED_MODES


def mode_words(mode: str | None) -> str:
    """A mode as a chart's title says it: "cold L2" for gemmwatch's own, "imported: nvbench:cold"
    for another tool's (whose L2 state is the tool's)."""
    if mode is None:
        return ""
    return f"imported: {mode}" if is_imported(mode) else f"{mode} L2"
