"""A job's states, defined once: what the API's words, the queue cap, Cancel, the fleet, the CLI's
wait and the pages each ask of a job's status."""

from typing import Literal, get_args

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: tuple[str, ...] = get_args(JobStatus)
OPEN = ("queued", "running")  # not yet ended: counted by the per-token cap, cancellable, waited for
ENDED = tuple(s for s in JOB_STATES if s not in OPEN)
