"""How `gemmwatch ci` and `gemmwatch submit` wait for a job (cli/progress.py): a short job is seen soon
after it ends (a CI run pays every late poll in wall time, issue 53), a long one is not polled faster
than the ceiling allows, and the deadline still holds."""

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
