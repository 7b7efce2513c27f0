"""Cancelling a job: one conditional UPDATE, so a cancel and a worker's claim or finish never
both win.

A queued job turns `cancelled` at once; the worker that later receives its message sees that
and skips it (worker/execute.py claims only queued jobs). A running job turns `cancelled` too,
and its worker, which reads the status between cases, stops at the next case boundary, keeps
the results it stored and stamps the real end time (worker/job_end.py). finished_at is set
here as well, so a job whose worker is gone still has an end.
"""

from typing import Any, cast

from sqlalchemy import CursorResult, update
from sqlalchemy.orm import Session

from core.records.models import ApiToken, Job, utcnow
from core.records.tokens import acts_for
from core.jobs.job_states import OPEN

CANCELLABLE = OPEN


class JobNotFound(LookupError):
    pass


class JobAlreadyEnded(RuntimeError):
    def __init__(self, job: Job):
        ended = f" at {job.finished_at:%Y-%m-%d %H:%M:%S} UTC" if job.finished_at else ""
        super().__init__(f"job {job.id} already ended ({job.status}{ended}); only queued or running jobs can be cancelled")
        self.job = job


class NotYours(PermissionError):
    pass


def cancel_job(db: Session, job_id: int, by: ApiToken | None = None) -> Job:
    """Cancel a queued or running job; returns the job as it now stands.

    `by`: the token asking (None where writes need no token). A `jobs` token cancels only the jobs
    it submitted; an `admin` token any job. Who submitted a job never changes, so checking first
    and updating after leaves no race."""
    if by is not None:
        asked = db.get(Job, job_id)
        if asked is not None and not acts_for(by, asked.submitted_by_token_id):
            raise NotYours(f"job {job_id} was submitted by another token; this one (scopes: {by.scopes}) "
                           "may cancel only the jobs it submitted, an admin token any job")
    # Session.execute() of an UPDATE returns a CursorResult, but SQLAlchemy types it as a plain
    # Result (a session cannot promise it for every statement), which has no rowcount.
    changed = cast(CursorResult[Any], db.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(CANCELLABLE))
        .values(status="cancelled", finished_at=utcnow())
    )).rowcount
    db.commit()
    job = db.get(Job, job_id, populate_existing=True)
    if job is None:
        raise JobNotFound(f"no job {job_id}")
    if not changed:
        raise JobAlreadyEnded(job)
    return job
