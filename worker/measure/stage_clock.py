"""Where a case's wall time goes, stage by stage (issue 53: a CI run's time measured before it is cut).

Each stage is host wall time between two points where the GPU has caught up (a compile is host
work; a check, cuBLAS's search and the samples each end by waiting for the GPU), so the stages of
one case add up to its time in the runner; the job's own overhead is what `case_s` holds beyond
their sum. Recorded on each result as `env.stages_s`.
"""

import time
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping

from core.results.result_env import CASE_STAGES as STAGES


class StageClock:
    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self._clock = clock
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}: one of {STAGES}")
        began = self._clock()
        try:
            yield
        finally:  # a stage that raised still took its time
            self.seconds[name] = self.seconds.get(name, 0.0) + (self._clock() - began)

    def record(self) -> dict[str, float]:
        return in_order(self.seconds)


def in_order(seconds: Mapping[str, float]) -> dict[str, float]:
    """Stages as a result records them: in the flow's order, to the millisecond (a stage under one does
    not move a CI run's wall time)."""
    return {name: round(seconds[name], 3) for name in STAGES if name in seconds}
