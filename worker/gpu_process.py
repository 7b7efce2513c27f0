"""The worker's long-lived GPU child process (see worker/child.py for the conversation).

One per worker process. Kept between jobs so CUDA start-up, cuBLAS handle creation and
kernel loading are paid once; discarded after any fault or time-out, so the next job always
gets a healthy GPU context.
"""

import multiprocessing as mp
from multiprocessing.connection import Connection

from worker.cases import TimingPolicy
from worker.child import child_main


class GpuProcess:
    def __init__(self, runner_path: str, policy: TimingPolicy):
        ctx = mp.get_context("spawn")  # a fresh interpreter: no CUDA state inherited from the worker
        self.conn, child_end = ctx.Pipe()
        self.key = (runner_path, policy)
        # daemon: it goes down with the worker, never outlives it holding the GPU.
        self.proc = ctx.Process(target=child_main, args=(child_end, runner_path, policy), name="gemmwatch-gpu",
                                daemon=True)
        self.proc.start()
        child_end.close()

    @property
    def exitcode(self) -> int | None:
        self.proc.join(5)
        return self.proc.exitcode

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()


_current: GpuProcess | None = None


def acquire(runner_path: str, policy: TimingPolicy) -> tuple[GpuProcess, Connection]:
    """The running GPU process, or a new one if there is none (or the settings changed)."""
    global _current
    if _current is not None and (not _current.proc.is_alive() or _current.key != (runner_path, policy)):
        discard()
    if _current is None:
        _current = GpuProcess(runner_path, policy)
    return _current, _current.conn


def discard() -> None:
    global _current
    if _current is not None:
        _current.kill()
        _current = None
