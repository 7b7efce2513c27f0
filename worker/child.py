"""The GPU child process: owns the CUDA context for one job and reports over a pipe.

The conversation, in order:
  child -> parent  ("identity", dict) | ("fatal", message)
  parent -> child  the list of Cases to run (planned once the GPU model is known)
  child -> parent  per case ("started", index) and ("result", index, CaseOutcome); then ("done",)
A CUDA fault makes the context unusable for the rest of the process, which is why this is
a process of its own: the parent sees it die, fails the job and keeps serving.
"""

import importlib
import traceback
from multiprocessing.connection import Connection

from worker.cases import Case, CaseOutcome, TimingPolicy


def load_runner(dotted: str):
    module_name, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def child_main(conn: Connection, runner_path: str, policy: TimingPolicy) -> None:
    try:
        runner = load_runner(runner_path)()
        conn.send(("identity", runner.identity()))
    except Exception as exc:
        conn.send(("fatal", str(exc) or type(exc).__name__))
        conn.close()
        return
    cases: list[Case] = conn.recv()
    for case in cases:
        conn.send(("started", case.index))
        try:
            outcome = runner.run_case(case, policy)
        except Exception as exc:
            outcome = CaseOutcome(mode=policy.mode, error=_readable(exc))
        conn.send(("result", case.index, outcome))
    conn.send(("done",))
    conn.close()


def _readable(exc: Exception) -> str:
    """Compiler errors carry their log in the message; keep it whole, line numbers included."""
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ == "CompileException":
        return f"compile error:\n{text}"
    return f"{type(exc).__name__}: {text}\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
