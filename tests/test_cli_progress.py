"""How `gemmwatch ci` and `gemmwatch submit` wait for a job (cli/progress.py): a short job is seen soon
after it ends (a CI run pays every late poll in wall time, issue 53), a long one is not polled faster
than the ceiling allows, and the deadline still holds."""

import io
import re

import pytest
from rich.console import Console

from cli import progress


class Jobs:
    """A server whose job ends at `ends_at` on the fake clock; counts the polls."""

    def __init__(self, clock, ends_at: float):
        self.clock, self.ends_at, self.polls = clock, ends_at, 0

    def get(self, path: str):
        self.polls += 1
        status = "succeeded" if self.clock.now >= self.ends_at else "running"
        body = {"id": 1, "status": status, "waiting": None, "progress": {"done": 0, "total": 1}}
        return type("Resp", (), {"json": lambda _self: body})()


class Clock:
    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress.time, "monotonic", c.monotonic)
    monkeypatch.setattr(progress.time, "sleep", c.sleep)
    return c


def wait(clock, ends_at: float, timeout: float = 3600.0) -> tuple[dict, Jobs]:
    server = Jobs(clock, ends_at)
    job = progress.wait_for_job(server, {"id": 1, "status": "queued", "waiting": None}, timeout,
                                Console(quiet=True), poll_s=1.0)
    return job, server


@pytest.mark.parametrize("ends_at", [0.05, 0.3, 2.0, 17.0, 22.0])
def test_a_job_is_seen_ended_within_a_small_share_of_its_time(clock, ends_at):
    job, _ = wait(clock, ends_at)
    assert job["status"] == "succeeded"
    late = clock.now - ends_at
    assert 0 <= late <= 0.1 + 0.05 * ends_at + 1e-9  # a 1 s poll would be up to 1 s late


def test_a_long_job_is_polled_at_the_ceiling_not_faster(clock):
    _, server = wait(clock, 1200.0)
    assert max(clock.slept) == 1.0
    assert server.polls <= 1200 + 40  # about once a second, once past the first 18 s
    assert clock.slept == sorted(clock.slept)  # never faster again


def test_the_deadline_still_ends_the_wait(clock):
    with pytest.raises(TimeoutError, match="still running after 30 s"):
        wait(clock, 1e9, timeout=30)
    assert 30 <= clock.now <= 31


class CasesJobs(Jobs):
    """A job whose cases start at the given times (a case seen on several polls is one case)."""

    def __init__(self, clock, starts: list[float]):
        super().__init__(clock, ends_at=starts[-1] + 5.0)
        self.starts = starts

    def get(self, path: str):
        self.polls += 1
        begun = [t for t in self.starts if t <= self.clock.now]
        status = "succeeded" if self.clock.now >= self.ends_at else "running"
        body = {"id": 1, "status": status, "waiting": None, "progress": {"done": max(0, len(begun) - 1), "total": 3},
                "current_case": f"k{len(begun)} 4096x4096x4096" if begun and status == "running" else None}
        return type("Resp", (), {"json": lambda _self: body})()


@pytest.mark.parametrize("terminal", [False, True])
def test_a_ci_log_gets_a_line_for_each_case_a_terminal_its_status_line_alone(clock, terminal):
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=200)
    job = progress.wait_for_job(CasesJobs(clock, [1.0, 30.0, 90.0]), {"id": 1, "status": "queued", "waiting": None},
                                3600.0, console)
    assert job["status"] == "succeeded"
    # a printed line stands alone; the live status line is redrawn behind a spinner
    lines = [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "\n", out.getvalue()).splitlines()
             if line.startswith("job 1")]
    if terminal:
        assert lines == []
    else:
        assert lines == ["job 1 running 0/3 k1 4096x4096x4096", "job 1 running 1/3 k2 4096x4096x4096",
                         "job 1 running 2/3 k3 4096x4096x4096"]
