"""The worker's long-lived GPU child process (see worker/child.py for the conversation).

One per worker process. Kept between jobs so CUDA start-up, cuBLAS handle creation and
kernel loading are paid once; discarded after any fault or time-out, so the next case (of the
same job, or the next) always gets a healthy GPU context.
"""

import logging
import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection

from worker import process_tree
from worker.measure.cases import Case, CaseOutcome, TimingPolicy
from worker.child import child_main
from worker.measure.warm_up import said

log = logging.getLogger("gemmwatch.worker")

IDLE_CALLBACK_S = 5.0  # how often on_idle runs while a case is in progress
STOP_CHECK_S = 1.0  # how often a running case's job is checked for a cancel


class GpuProcess:
    def __init__(self, runner_path: str, policy: TimingPolicy, warm: bool = False):
        ctx = mp.get_context("spawn")  # a fresh interpreter: no CUDA state inherited from the worker
        self.conn, child_end = ctx.Pipe()
        self.key = (runner_path, policy)
        # daemon: it goes down with the worker, never outlives it holding the GPU.
        self.proc = ctx.Process(target=child_main, args=(child_end, runner_path, policy, warm), name="gemmwatch-gpu",
                                daemon=True)
        self.proc.start()
        child_end.close()

    @property
    def exitcode(self) -> int | None:
        self.proc.join(5)
        return self.proc.exitcode

    def kill(self) -> None:
        if self.proc.is_alive() and self.proc.pid is not None:
            # With what it started: a compile process and its nvcc, a launcher's confined process.
            process_tree.kill_tree(self.proc.pid)
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


def start_warm(runner_path: str, policy: TimingPolicy, timeout_s: float) -> dict | None:
    """At the worker's start: its GPU process, started now and warmed up (worker/measure/warm_up.py)
    before the worker takes a job; the warm-up's report, or None where the process died or took
    longer than timeout_s (a job then meets the process as it is, or a fresh one)."""
    global _current
    discard()
    _current = GpuProcess(runner_path, policy, warm=True)
    try:
        if _current.conn.poll(timeout_s):
            msg = _current.conn.recv()
            if msg[0] == "warm":
                log.info(said(msg[1]))
                return msg[1]
            log.warning("the GPU process could not start: %s", msg[1])  # ("fatal", why); the first job says it too
            discard()
            return None
    except (EOFError, OSError):
        log.warning("the GPU process died while it warmed up (exit code %s)", _current.exitcode if _current else None)
        discard()
        return None
    log.warning("the GPU process had not warmed up after %g s: the worker starts without waiting longer", timeout_s)
    return None


def discard() -> None:
    global _current
    if _current is not None:
        _current.kill()
        _current = None


def converse(
    cfg,
    on_identity: Callable[[dict], list[Case]],
    on_started: Callable[[Case], None],
    on_result: Callable[[Case, CaseOutcome], None],
    on_idle: Callable[[], None] = lambda: None,
    should_stop: Callable[[], bool] = lambda: False,
    spent_before: Callable[[], float] = lambda: 0.0,
    on_new_process: Callable[[dict], None] = lambda identity: None,
) -> list[str]:
    """Run one job's cases in the GPU process; returns the problems met (empty when all went well).

    on_identity gets the GPU's identity and returns the cases to run (planning needs the GPU
    model); on_new_process gets the identity of each fresh GPU process after the first (its pid). A case that outlives cfg.case_timeout_s is killed with its process; a case whose
    process dies, or leaves the GPU unusable (a sticky CUDA error), ends with it. Either way that
    case fails alone: it gets a result saying what became of it, and the job's cases not run yet go
    on in a fresh GPU process (a kernel that hangs or faults must not hide the others' figures).
    Cases go to the child one at a time; once should_stop() says so (a cancel), no further case is
    sent, and a case still running cfg.cancel_grace_s after that is killed with its process.

    The job's budget (cfg.job_budget_s, issue 37, row 7): the GPU-process seconds of its cases,
    compiles included, counted from spent_before() (a re-run's earlier cases). Once spent, the
    case running is stopped with its process, and it and every case not run end with the error
    "job budget of N s spent" (each a result, through on_result).
    """
    policy = TimingPolicy.from_settings(cfg)
    gpu, conn = acquire(cfg.runner, policy)
    problems: list[str] = []
    todo: deque[Case] = deque()
    by_index: dict[int, Case] = {}
    current: Case | None = None
    sent: Case | None = None  # the case last sent to the child
    setting_up = True  # until the child's identity: a fault now is the GPU's, not a case's
    stop_seen_at: float | None = None
    healthy = False
    budget = cfg.job_budget_s
    spent = 0.0  # this job's case seconds so far (set from spent_before() once planned)
    case_began: float | None = None

    def spent_out(what: str) -> CaseOutcome:
        return CaseOutcome(mode=policy.mode, error=f"job budget of {budget:g} s spent (GEMMWATCH_JOB_BUDGET_S); {what}")

    def end_the_rest() -> None:
        """Every case not run ends with the budget's error."""
        if todo:
            problems.append(f"job budget of {budget:g} s spent (GEMMWATCH_JOB_BUDGET_S): {len(todo)} cases not run")
        while todo:
            case = todo.popleft()
            on_result(case, spent_out("not run"))

    def send_next() -> None:
        nonlocal current, stop_seen_at, sent
        current = None
        if stop_seen_at is None and should_stop():
            stop_seen_at = time.monotonic()
        if stop_seen_at is None and spent >= budget:
            end_the_rest()
        sent = todo.popleft() if todo and stop_seen_at is None else None
        try:
            conn.send(sent)
        except OSError:  # the child is exiting; its last words ("fatal") are still to be read
            pass

    def set_up_deadline() -> float:
        """A GPU process's start (its interpreter, CUDA context and cuBLAS handle) is no case: it has
        the warm-up's limit where that is the longer (a fresh process on a loaded machine)."""
        return time.monotonic() + max(cfg.case_timeout_s, cfg.warm_up_timeout_s)

    def fresh_process() -> bool:
        """After a case ended its GPU process: a new process for the cases not run yet (the case sent
        to the dying one among them), True; False where there are none, or a cancel or the budget
        ends the job."""
        nonlocal gpu, conn, current, case_began, sent, deadline, setting_up
        if sent is not None and sent is not current:
            todo.appendleft(sent)  # sent after the fault, never started
        current, case_began, sent = None, None, None
        discard()
        if not todo or should_stop():
            return False
        if spent >= budget:
            end_the_rest()
            return False
        gpu, conn = acquire(cfg.runner, policy)
        conn.send("job")
        setting_up = True
        deadline = set_up_deadline()
        return True

    try:
        conn.send("job")
        deadline = set_up_deadline()
        next_idle = time.monotonic() + IDLE_CALLBACK_S
        while True:
            if not conn.poll(STOP_CHECK_S if case_began is None else
                             max(0.0, min(STOP_CHECK_S, case_began + budget - spent - time.monotonic()))):
                now = time.monotonic()
                if current is not None and case_began is not None and spent + (now - case_began) >= budget:
                    problems.append(f"{current.label}: job budget of {budget:g} s spent (GEMMWATCH_JOB_BUDGET_S); "
                                    "stopped with its GPU process")
                    on_result(current, spent_out("stopped with its GPU process"))
                    end_the_rest()
                    return problems
                if now > deadline:
                    what = current.label if current else "GPU set-up"
                    problems.append(f"{what}: exceeded the {cfg.case_timeout_s:g} s case time limit; killed")
                    if current is None:
                        return problems
                    spent += now - case_began if case_began is not None else 0.0
                    on_result(current, CaseOutcome(mode=policy.mode, error=(
                        f"exceeded the {cfg.case_timeout_s:g} s case time limit; killed with its GPU process")))
                    if not fresh_process():
                        return problems
                    continue
                if current is not None and stop_seen_at is None and should_stop():
                    stop_seen_at = now
                if current is not None and stop_seen_at is not None and now - stop_seen_at > cfg.cancel_grace_s:
                    stopped = (f"still running {cfg.cancel_grace_s:g} s after the job was cancelled; stopped with "
                               "its GPU process")
                    problems.append(f"{current.label}: {stopped}")
                    on_result(current, CaseOutcome(mode=policy.mode, error=stopped, status="cancelled"))
                    return problems
                if now >= next_idle:
                    on_idle()
                    next_idle = now + IDLE_CALLBACK_S
                continue
            try:
                msg = conn.recv()
            except EOFError:  # the child died without saying goodbye
                what = current.label if current else "GPU set-up"
                died = f"GPU process died (exit code {gpu.exitcode})"
                problems.append(f"{what}: {died}")
                if current is None:
                    return problems
                if case_began is not None:
                    spent += time.monotonic() - case_began
                on_result(current, CaseOutcome(mode=policy.mode, error=died))
                if not fresh_process():
                    return problems
                continue
            deadline = time.monotonic() + cfg.case_timeout_s
            kind = msg[0]
            if kind == "identity":
                setting_up = False
                if not by_index:  # the job's first GPU process: plan; a fresh one goes on with the plan
                    todo = deque(on_identity(msg[1]))
                    by_index = {c.index: c for c in todo}
                    spent = spent_before()
                else:
                    on_new_process(msg[1])
                conn.send(("prefetch", list(todo)))  # compiled ahead while the first cases run
                send_next()
            elif kind == "fatal":  # at set-up, or after a case's result: that case left the GPU unusable
                problems.append(msg[1])
                if setting_up or not fresh_process():
                    return problems
            elif kind == "warm":  # the worker's start stopped waiting for its warm-up before it ended
                continue
            elif kind == "started":
                current = by_index[msg[1]]
                case_began = time.monotonic()
                on_started(current)
            elif kind == "result":
                case, outcome = by_index[msg[1]], msg[2]
                if case_began is not None:
                    spent += time.monotonic() - case_began
                    case_began = None
                on_result(case, outcome)
                if outcome.error and not outcome.not_applicable:  # another GPU's kernel is no failure
                    problems.append(f"{case.label}: {outcome.error}")
                send_next()
            elif kind == "done":
                healthy = True
                return problems
    finally:
        if not healthy:  # whatever went wrong, the next job gets a fresh GPU process
            discard()
