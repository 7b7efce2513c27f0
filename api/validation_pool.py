"""Large request bodies validated in a process of their own (issue 49, must-show 2).

A job's sources pass the source guard and a posted run is parsed and checked, both pure Python: on a
thread of the API's process they held its GIL for seconds (400 KB of the guard's slowest characters:
4.5 s; 300 results of 99 KB errors: 1.4 s), and every other request of that process, a reader's
list among them, waited its turns. Here a body past LARGE_BYTES goes to a small pool of processes
(GEMMWATCH_VALIDATION_PROCESSES at once per API process, each forked from a single-threaded fork
server, never from the threaded server),
one at a time for each writer; a small body, a victim's trivial job, is still checked on a thread
at once. What comes back is the validated model or the 422's errors, the same either way.
"""

import multiprocessing
import os
import select
import threading
import time
from concurrent.futures import ProcessPoolExecutor

LARGE_BYTES = 64 << 10

_pools: dict[tuple[int, int], ProcessPoolExecutor] = {}


def executor(size: int) -> ProcessPoolExecutor:
    """This process's pool (a forked server's children make their own). Each body is checked in a
    fresh process forked from a fork server that has the checks imported (milliseconds, its pages
    shared), which ends with it: a 30 MB parse leaves no heap behind in a process that lives on.
    The fork server starts with the first large body of the process (about 1.5 s, once), not with the
    process: most never see one."""
    key = (os.getpid(), size)
    if key not in _pools:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["api.job_body", "api.routes.results"])
        _pools[key] = ProcessPoolExecutor(max_workers=size, mp_context=context, max_tasks_per_child=1,
                                          initializer=_end_with, initargs=(os.getpid(),))
    return _pools[key]


def _end_with(api_pid: int) -> None:
    """In each pool process: exit when the API process that asked for it is gone. A pool process
    waits for its task on a queue whose writing end it holds itself, and it holds the fork server's
    and the resource tracker's pipes open: left alone, an API process that was killed (or shut down
    before the pool's own shutdown reached it) left all three running for good, one set per API
    process (the test suite left 54)."""
    threading.Thread(target=_exit_when_gone, args=(api_pid,), name="end-with-api", daemon=True).start()


def _exit_when_gone(pid: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)  # readable once the process has ended (Linux 5.3 and later)
    except ProcessLookupError:
        os._exit(0)
    except (AttributeError, OSError):  # no pidfd here: look every second
        while _alive(pid):
            time.sleep(1)
        os._exit(0)
    select.select([pidfd], [], [])
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def shut_down() -> None:
    for key in [k for k in _pools if k[0] == os.getpid()]:
        _pools.pop(key).shutdown(wait=False, cancel_futures=True)

