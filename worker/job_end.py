"""How a worker ends a job without overwriting a cancel (core/jobs/cancel.py) that raced it.

The cancel and the worker's last write are both conditional UPDATEs on the job's status, so
whichever comes second sees the other: a job cancelled while it ran stays `cancelled`, with
the results it stored and the time its worker really stopped.
"""

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from core.records.models import Job, utcnow
from core.text_bounds import bounded_error


def is_cancelled(db: Session, job_id: int) -> bool:
    return db.scalar(select(Job.status).where(Job.id == job_id)) == "cancelled"


def end_job(db: Session, job_id: int, problems: list[str]) -> str:
    """Write the job's end; returns the status it ended with ("cancelled" if a cancel came first)."""
    now = utcnow()
    status = "failed" if problems else "succeeded"
    ended = db.execute(
        update(Job).where(Job.id == job_id, Job.status == "running")
        .values(status=status, error=bounded_error("\n".join(problems)) or None, finished_at=now, current_case=None, heartbeat_at=now)
    ).rowcount
    if ended:
        db.commit()
        return status
    job = db.get(Job, job_id)
    if job.status == "cancelled":
        job.error = bounded_error("\n".join([f"cancelled after {job.progress_done} of {job.progress_total} cases",
                                             *problems]))
        job.finished_at, job.current_case, job.heartbeat_at = now, None, now
    db.commit()
    return job.status
