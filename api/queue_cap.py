"""Per token, a cap on jobs queued or running at once (issue 37, row 7): one request's worth of
jobs each, not a fleet's hours. GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN (default 20); one more is a
429 that says how many the token holds and how to go on.

Checked by the job intake's writer thread (api/intake.py) for a group of jobs at once, the
group's earlier jobs counted, in one query. Each server process checks its own groups, so jobs
of one token taken by several processes in the same instant may pass the cap by a group."""

from fastapi import HTTPException, status
from sqlalchemy.orm import Session

from core.jobs import job_intake
from core.settings import Settings


def over_cap(db: Session, cfg: Settings, token_rows: list) -> list[HTTPException | None]:
    """For each job's token row in order (None: writes open, no cap), None where the job may be
    stored, else the 429 its request gets (the rule: core/jobs/job_intake.py)."""
    return [None if why is None else HTTPException(status_code=status.HTTP_429_TOO_MANY_REQUESTS,
                                                   headers={"Retry-After": "30"}, detail=why)
            for why in job_intake.over_cap(db, cfg, token_rows)]
