"""A job's kernels compiled ahead of its cases, several at once (issue 53).

A job's cases run one after the other on the GPU, and each compiled its kernel when it came to it:
47 built-ins compiled one by one took most of a CI run's first job (94 s of it, 19 s once they were
in the kernel cache). Each compile is a confined process of its own (worker/compile/compile_process.py)
that needs CPU and no GPU, so while the first case is timed the next kernels compile beside it, a few
at once, into the kernel cache. A case whose kernel is still compiling waits for that compile instead
of starting a second; where it failed, the first case to need it raises its error as its own.
A compile made ahead counts in no case's share of the job's budget (GEMMWATCH_JOB_BUDGET_S); what has
not started when the job ends is dropped, so a job adds at most `workers` compiles past its end, each
within the compile's own limits.
"""

import logging
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)


class Prefetch:
    """Compiles, by `compile_one`, what it is given, `workers` at a time, each once by its key."""

    def __init__(self, compile_one: Callable[[Any], Any], workers: int):
        self._compile_one = compile_one
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[Hashable, Future] = {}

    def start(self, items: list[tuple[Hashable, Any]]) -> int:
        """Queue (key, item) pairs in their order (the first case's kernel first), each key once;
        how many were queued. Nothing is queued with fewer than 2 workers (compiled as cases come)."""
        if self._workers < 2:
            return 0
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="prefetch")
        queued = 0
        for key, item in items:
            if key not in self._futures:
                self._futures[key] = self._pool.submit(self._compile_one, item)
                queued += 1
        return queued

    def wait(self, key: Hashable) -> BaseException | None:
        """Before a case compiles its kernel: the prefetch's compile of it, finished, and handed over
        once. Its failure is returned for the case to raise as its own (the first case to meet a
        failing kernel reports the compile, later ones that it is remembered); None where it built
        or was never queued."""
        future = self._futures.pop(key, None)
        if future is None or future.cancelled():
            return None
        failed = future.exception()
        if failed is not None:
            log.debug("prefetch of %s failed: %s", key, failed)
        return failed

    def stop(self) -> None:
        """At the job's end: what has not started is dropped, what runs finishes into the cache."""
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
