"""Waiting for a job, as `gemmwatch submit` and `gemmwatch ci` both do: a live status line, and
the server's reason for a wait printed as a line of its own. A CI log has no live status line, so
there each case the job starts is a line of its own: a folder of 32 launchers runs for minutes, and a
log silent that long reads as a hung build."""

import time

import httpx
from rich.console import Console
from cli.markup import colored
from core.jobs.job_states import OPEN


# The first poll comes this soon after the post; the interval then grows with the time waited, to
# poll_s at most. A job seen late by half a poll costs a CI run that much wall time (issue 53): a
# short job is seen within ~0.1 s, a long one within ~2.5 % of its time, and a 20-minute job is
# still polled about once a second.
FIRST_POLL_S = 0.1
POLL_GROWTH = 0.05  # seconds of interval per second waited


def poll_interval(waited_s: float, poll_s: float) -> float:
    return min(poll_s, FIRST_POLL_S + POLL_GROWTH * waited_s)


def wait_for_job(client: httpx.Client, job: dict, timeout: float, console: Console, what: str = "job",
                 poll_s: float = 1.0) -> dict:
    """Poll until the job ends; TimeoutError (naming why it waited, when the server said) at timeout.

    `job` is the POST's answer, which already says why a new job waits (no live worker serves
    its queue, say): that is printed at once, not only after the first poll."""
    began = time.monotonic()
    deadline = began + timeout
    told, case_told = None, None
    with console.status(f"{what} {job['id']} {job['status']}") as status:
        while True:
            if job.get("waiting") and job["waiting"] != told:
                console.print(colored("yellow", f"{what} {job['id']} {job['waiting']}"))
            told = job.get("waiting")
            if job["status"] not in OPEN:
                return job
            if time.monotonic() > deadline:
                reason = f" ({job['waiting']})" if job.get("waiting") else ""
                raise TimeoutError(f"{what} {job['id']} still {job['status']} after {timeout:g} s{reason}")
            time.sleep(poll_interval(time.monotonic() - began, poll_s))
            job = client.get(f"/api/jobs/{job['id']}").json()
            p = job["progress"]
            line = f"{what} {job['id']} {job['waiting'] or job['status']} {p['done']}/{p['total']} " \
                   f"{job.get('current_case') or ''}"
            status.update(line)
            case = job.get("current_case")
            if case and case != case_told and job["status"] in OPEN and not console.is_terminal:
                console.print(line.rstrip(), markup=False, highlight=False)
                case_told = case
