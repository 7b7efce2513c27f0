"""The GPU child process: owns the CUDA context and reports over a pipe.

It lives across jobs (the context, the cuBLAS handle and compiled modules stay warm) until
something goes wrong: a CUDA fault makes the context unusable for the rest of the process,
which is why this is a process of its own. The parent sees it die or stop answering, fails
the case in hand, and starts a fresh one for the job's other cases (worker/gpu_process.py).

At its start, where the worker asked for it:
  child -> parent  ("warm", report) once its warm-up cases ran (worker/measure/warm_up.py)
The conversation, per job:
  parent -> child  "job"
  child -> parent  ("identity", dict) | ("fatal", message) and exit
  parent -> child  one Case at a time (planned once the GPU model is known), then None
  child -> parent  per case ("started", index) and ("result", index, CaseOutcome), or
                   ("fatal", message) and exit, when a case left the GPU unusable; after None ("done",)
One case at a time lets the parent end a job between any two cases (a cancel) and keep the
child, warm, for the next job.
"""

import importlib
import os
import sysconfig
import traceback
from multiprocessing.connection import Connection

from worker.measure.cases import CaseOutcome, TimingPolicy, not_applicable
from worker.measure.warm_up import warm_up
from core.text_bounds import bounded_error
from worker.compile.compiler import CompileError, CompileRefused


def load_runner(dotted: str):
    module_name, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def child_main(conn: Connection, runner_path: str, policy: TimingPolicy, warm: bool = False) -> None:
    try:
        runner = load_runner(runner_path)()
    except Exception as exc:
        conn.send(("fatal", str(exc) or type(exc).__name__))
        return
    if warm:  # started by the worker at its start, idle: its one-time costs paid now (worker/measure/warm_up.py)
        report = warm_up(runner, policy)
        if not _healthy(runner):  # a warm-up case left the context unusable: no job may meet it
            conn.send(("fatal", f"the GPU process's warm-up left the GPU unusable ({'; '.join(report['failed'])})"))
            return
        conn.send(("warm", report))
    while True:
        try:
            conn.recv()  # "job"
        except EOFError:  # the worker is gone
            return
        try:
            # The pid shows, in each result, which GPU process made it (reuse, restarts).
            identity = runner.identity()
            conn.send(("identity", {**identity, "gpu_process_pid": os.getpid()}))
        except Exception as exc:
            conn.send(("fatal", f"could not read the GPU's identity: {exc}"))
            return
        while (case := conn.recv()) is not None:
            if isinstance(case, tuple) and case[:1] == ("prefetch",):  # the job's cases, to compile ahead
                getattr(runner, "prefetch", lambda cases: 0)(case[1])
                continue
            conn.send(("started", case.index))
            try:
                # A kernel built for another GPU target is reported, not run (any runner, the CPU double too).
                mode = case.policy(policy)
                outcome = not_applicable(case, identity["compute_capability"], mode.mode) or runner.run_case(case, mode)
            except Exception as exc:
                # A compile that failed before is not compiled again (worker/compile/failed_compiles.py): said in env.
                outcome = CaseOutcome(mode=policy.mode, error=_readable(exc),
                                      env={"compile_failure_remembered": True} if getattr(exc, "remembered", False)
                                      else {})
            conn.send(("result", case.index, outcome))
            if outcome.error and not _healthy(runner):
                conn.send(("fatal", f"{case.label} left the GPU unusable (sticky CUDA error); GPU process restarted"))
                return
        getattr(runner, "end_job", lambda: None)()
        conn.send(("done",))
        getattr(runner, "release_memory", lambda: None)()


def _healthy(runner) -> bool:
    check = getattr(runner, "healthy", None)
    return check() if check else True


def _readable(exc: Exception) -> str:
    """Compiler errors carry their (filtered) log in the message, line numbers included, its head
    and tail where it is long (worker/compile/compiler.py); any error is bounded as stored (issue 37, row 3)."""
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, CompileError):
        return bounded_error(f"compile error:\n{text}")
    if isinstance(exc, CompileRefused):
        return bounded_error(f"compile stopped: {text}")
    return bounded_error(f"{type(exc).__name__}: {text}\n" + "".join(
        f"  at {where}\n" for where in _frames(exc.__traceback__)[-3:]))


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB = sysconfig.get_paths()["stdlib"]


def _frames(tb) -> list[str]:
    """Where the error came from, as every reader may see it: the project's own files by their path in
    the project (worker/measure/runner.py:123 in run_case), a library's by its package, never the server's
    folders (issue 49, row 8: a stored error showed the worker's install paths to every reader)."""
    out = []
    for frame in traceback.extract_tb(tb):
        path = os.path.abspath(frame.filename)
        if path.startswith(_ROOT + os.sep):
            shown = os.path.relpath(path, _ROOT)
        elif "site-packages" + os.sep in path or "dist-packages" + os.sep in path:
            shown = path.split("-packages" + os.sep, 1)[1]
        elif path.startswith(_STDLIB + os.sep):
            shown = os.path.relpath(path, _STDLIB)
        else:
            shown = os.path.basename(path)
        out.append(f"{shown}:{frame.lineno} in {frame.name}")
    return out
