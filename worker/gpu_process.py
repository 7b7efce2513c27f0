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
    model); on_new_process gets the identity of each fresh GPU process after the first (its pid).
    A case that outlives cfg.case_timeout_s is killed with its process; a case whose process dies,
    or leaves the GPU unusable (a sticky CUDA error), ends with it. Either way that case fails
    alone: it gets a result saying what became of it, and the job's cases not run yet go on in a
    fresh GPU process (a kernel that hangs or faults must not hide the others' figures).
    Cases go to the child one at a time; once should_stop() says so (a cancel), no further case is
    sent, and a case still running cfg.cancel_grace_s after that is killed with its process.

    The job's budget (cfg.job_budget_s, issue 37, row 7): the GPU-process seconds of its cases,
    compiles included, counted from spent_before() (a re-run's earlier cases). Once spent, the
    case running is stopped with its process, and it and every case not run end with the error
    "job budget of N s spent" (each a result, through on_result).
    """
    talk = _Conversation(cfg, on_identity, on_started, on_result, on_idle, should_stop, spent_before, on_new_process)
    try:
        talk.run()
    finally:
        if not talk.healthy:  # whatever went wrong, the next job gets a fresh GPU process
            discard()
    return talk.problems


class _Conversation:
    """One job's exchange with its GPU process(es): the cases to run, the one running, the time
    spent; converse() above says what happens when."""

    def __init__(self, cfg, on_identity, on_started, on_result, on_idle, should_stop, spent_before, on_new_process):
        self.cfg = cfg
        self.on_identity, self.on_started, self.on_result = on_identity, on_started, on_result
        self.on_idle, self.should_stop = on_idle, should_stop
        self.spent_before, self.on_new_process = spent_before, on_new_process
        self.policy = TimingPolicy.from_settings(cfg)
        self.gpu, self.conn = acquire(cfg.runner, self.policy)
        self.problems: list[str] = []
        self.todo: deque[Case] = deque()
        self.by_index: dict[int, Case] = {}
        self.current: Case | None = None
        self.sent: Case | None = None  # the case last sent to the child
        self.setting_up = True  # until the child's identity: a fault now is the GPU's, not a case's
        self.stop_seen_at: float | None = None
        self.healthy = False
        self.budget = cfg.job_budget_s
        self.spent = 0.0  # this job's case seconds so far (set from spent_before() once planned)
        self.case_began: float | None = None
        self.deadline = 0.0

    def spent_out(self, what: str) -> CaseOutcome:
        return CaseOutcome(mode=self.policy.mode,
                           error=f"job budget of {self.budget:g} s spent (GEMMWATCH_JOB_BUDGET_S); {what}")

    def end_the_rest(self) -> None:
        """Every case not run ends with the budget's error."""
        if self.todo:
            self.problems.append(f"job budget of {self.budget:g} s spent (GEMMWATCH_JOB_BUDGET_S): "
                                 f"{len(self.todo)} cases not run")
        while self.todo:
            self.on_result(self.todo.popleft(), self.spent_out("not run"))

    def send_next(self) -> None:
        self.current = None
        if self.stop_seen_at is None and self.should_stop():
            self.stop_seen_at = time.monotonic()
        if self.stop_seen_at is None and self.spent >= self.budget:
            self.end_the_rest()
        self.sent = self.todo.popleft() if self.todo and self.stop_seen_at is None else None
        try:
            self.conn.send(self.sent)
        except OSError:  # the child is exiting; its last words ("fatal") are still to be read
            pass

    def start_process(self) -> None:
        """Ask the GPU process for its identity. Its start (interpreter, CUDA context, cuBLAS
        handle) is no case: it has the warm-up's limit where that is the longer (a fresh process
        on a loaded machine)."""
        self.conn.send("job")
        self.setting_up = True
        self.deadline = time.monotonic() + max(self.cfg.case_timeout_s, self.cfg.warm_up_timeout_s)

    def fresh_process(self) -> bool:
        """After a case ended its GPU process: a new process for the cases not run yet (the case sent
        to the dying one among them), True; False where there are none, or a cancel or the budget
        ends the job."""
        if self.sent is not None and self.sent is not self.current:
            self.todo.appendleft(self.sent)  # sent after the fault, never started
        self.current, self.case_began, self.sent = None, None, None
        discard()
        if not self.todo or self.should_stop():
            return False
        if self.spent >= self.budget:
            self.end_the_rest()
            return False
        self.gpu, self.conn = acquire(self.cfg.runner, self.policy)
        self.start_process()
        return True

    def fail_case_and_go_on(self, problem: str, error: str) -> bool:
        """The case running ended its GPU process (killed at its time limit, or the process died):
        the job's problems get `problem`, the case fails alone with `error`, and the rest go on in a
        fresh process. False ends the job: the process was still setting up (the GPU's fault, not a
        case's), or nothing is left to run."""
        self.problems.append(f"{self.current.label if self.current else 'GPU set-up'}: {problem}")
        if self.current is None:
            return False
        if self.case_began is not None:
            self.spent += time.monotonic() - self.case_began
        self.on_result(self.current, CaseOutcome(mode=self.policy.mode, error=error))
        return self.fresh_process()

    def waited(self, now: float) -> bool:
        """Nothing heard for a while: the budget, the time limit, a cancel and on_idle are checked.
        False ends the job."""
        cfg, current = self.cfg, self.current
        if current is not None and self.case_began is not None and self.spent + (now - self.case_began) >= self.budget:
            self.problems.append(f"{current.label}: job budget of {self.budget:g} s spent (GEMMWATCH_JOB_BUDGET_S); "
                                 "stopped with its GPU process")
            self.on_result(current, self.spent_out("stopped with its GPU process"))
            self.end_the_rest()
            return False
        if now > self.deadline:
            killed = f"exceeded the {cfg.case_timeout_s:g} s case time limit; killed"
            return self.fail_case_and_go_on(killed, f"{killed} with its GPU process")
        if current is not None and self.stop_seen_at is None and self.should_stop():
            self.stop_seen_at = now
        if current is not None and self.stop_seen_at is not None and now - self.stop_seen_at > cfg.cancel_grace_s:
            stopped = f"still running {cfg.cancel_grace_s:g} s after the job was cancelled; stopped with its GPU process"
            self.problems.append(f"{current.label}: {stopped}")
            self.on_result(current, CaseOutcome(mode=self.policy.mode, error=stopped, status="cancelled"))
            return False
        if now >= self.next_idle:
            self.on_idle()
            self.next_idle = now + IDLE_CALLBACK_S
        return True

    def heard(self, msg: tuple) -> bool:
        """One message from the GPU process. False ends the job."""
        self.deadline = time.monotonic() + self.cfg.case_timeout_s
        kind = msg[0]
        if kind == "identity":
            self.setting_up = False
            if not self.by_index:  # the job's first GPU process: plan; a fresh one goes on with the plan
                self.todo = deque(self.on_identity(msg[1]))
                self.by_index = {c.index: c for c in self.todo}
                self.spent = self.spent_before()
            else:
                self.on_new_process(msg[1])
            self.conn.send(("prefetch", list(self.todo)))  # compiled ahead while the first cases run
            self.send_next()
        elif kind == "fatal":  # at set-up, or after a case's result: that case left the GPU unusable
            self.problems.append(msg[1])
            return not self.setting_up and self.fresh_process()
        elif kind == "started":
            self.current = self.by_index[msg[1]]
            self.case_began = time.monotonic()
            self.on_started(self.current)
        elif kind == "result":
            case, outcome = self.by_index[msg[1]], msg[2]
            if self.case_began is not None:
                self.spent += time.monotonic() - self.case_began
                self.case_began = None
            self.on_result(case, outcome)
            if outcome.error and not outcome.not_applicable:  # another GPU's kernel is no failure
                self.problems.append(f"{case.label}: {outcome.error}")
            self.send_next()
        elif kind == "done":
            self.healthy = True
            return False
        # "warm": the worker's start stopped waiting for its warm-up before it ended; nothing to do
        return True

    def run(self) -> None:
        self.start_process()
        self.next_idle = time.monotonic() + IDLE_CALLBACK_S
        while True:
            wait = STOP_CHECK_S if self.case_began is None else max(
                0.0, min(STOP_CHECK_S, self.case_began + self.budget - self.spent - time.monotonic()))
            if not self.conn.poll(wait):
                if not self.waited(time.monotonic()):
                    return
                continue
            try:
                msg = self.conn.recv()
            except EOFError:  # the child died without saying goodbye
                died = f"GPU process died (exit code {self.gpu.exitcode})"
                if not self.fail_case_and_go_on(died, died):
                    return
                continue
            if not self.heard(msg):
                return
