"""Compiles that failed, remembered by the hash the kernel cache keys cubins by (worker/compile/compile_cache.py
build): the second case or size of the same failing kernel fails at once with the same error,
instead of paying the compile again (issue 37, row 7: a 300-byte template bomb at 3 sizes held a
worker 182 s, each size compiling it to its time limit).

Remembered in the process that compiles (the GPU process, kept between jobs), so a job sent again
fails at once too. A compile error is NVRTC's or nvcc's verdict on those inputs: remembered while
the process lives (the oldest forgotten past MAX_REMEMBERED). A compile stopped at a limit (time,
memory, the size of its output) is remembered for REFUSED_FOR_S only: a time limit met on a busy
machine should not fail the kernel for good. A refusal that says nothing of the kernel (no
confinement, no compiler, no answer) is not remembered.
"""

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from worker.compile.compiled import CompileError, CompileRefused

MAX_REMEMBERED = 1024
REFUSED_FOR_S = 3600.0
# What a refusal says when it was the kernel's own doing (worker/compile/compiler.py's messages).
KERNEL_LIMITS = ("compile time limit", "CPU time limit", "memory limit", "a kernel may be")

_lock = threading.Lock()
# (digest, untrusted) -> (monotonic time, exception class, message)
_failed: "OrderedDict[tuple[str, bool], tuple[float, type, str]]" = OrderedDict()
counts = {"remembered": 0, "recalled": 0}  # for tests and logs


def digest_of(key: list) -> str:
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()


def remembered(build: Callable, request: dict, key: list, confinement, compiler: str, untrusted: bool, shown, cfg,
               suffix: str = ".cubin"):
    """build(...) (worker/compile/compile_cache.py), unless this very compile failed before: then its error again,
    marked `remembered`. The message was made for a caller of the same trust (a job's log is
    filtered, ours is not), so the memory is kept per trust."""
    # The limits are part of what failed: a compile stopped at a 2 s limit may finish under 120 s, so
    # a worker (or a test) that runs with other limits compiles it again rather than recall it.
    limits = [cfg.compile_timeout_s, cfg.compile_memory_mb, cfg.kernel_max_bytes]
    slot = (digest_of([*key, suffix, limits]), bool(untrusted))
    with _lock:
        found = _failed.get(slot)
        if found is not None and found[1] is CompileRefused and time.monotonic() - found[0] > REFUSED_FOR_S:
            del _failed[slot]
            found = None
        if found is not None:
            _failed.move_to_end(slot)
            counts["recalled"] += 1
    if found is not None:
        exc = found[1](found[2])
        exc.remembered = True
        raise exc
    try:
        return build(request, key, confinement, compiler, untrusted, shown, cfg, suffix)
    except CompileError as exc:
        _remember(slot, CompileError, str(exc))
        raise
    except CompileRefused as exc:
        if any(words in str(exc) for words in KERNEL_LIMITS):
            _remember(slot, CompileRefused, str(exc))
        raise


def _remember(slot: tuple[str, bool], kind: type, message: str) -> None:
    with _lock:
        _failed[slot] = (time.monotonic(), kind, message)
        _failed.move_to_end(slot)
        while len(_failed) > MAX_REMEMBERED:
            _failed.popitem(last=False)
        counts["remembered"] += 1
