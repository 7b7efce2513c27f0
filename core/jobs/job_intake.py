"""A job's intake rules, one place for every door that queues a job: the API (api/intake.py, in
groups) and the dashboard's "Profile base and head" button (dashboard/job_profile.py). Issue 49,
row 5: the button stored and published a job by a path of its own and skipped the per-token queue
cap the API applies (a probe queued a second job where the API answered 429).

- `over_cap`: at most GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN jobs queued or running per token
  (issue 37, row 7), a group's earlier jobs counted;
- `stamp`: who submitted the job and when it was published (the reaper re-publishes by it);
- `publish`: the broker told, and a job it could not take kept as failed, saying why.
"""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.jobs.broker import enqueue_job
from core.jobs.job_states import OPEN
from core.records.models import ApiToken, Job, utcnow
from core.settings import Settings



def over_cap(db: Session, cfg: Settings, token_rows: list[ApiToken | None]) -> list[str | None]:
    """For each job's token row in order (None: writes open, no cap), None where the job may be
    stored, else why not (in words a 429 or a page can carry)."""
    ids = {row.id for row in token_rows if row is not None}
    held: dict[int | None, int] = {}
    if ids:
        held = {token: count for token, count in db.execute(
            select(Job.submitted_by_token_id, func.count())
            .where(Job.submitted_by_token_id.in_(ids), Job.status.in_(OPEN))
            .group_by(Job.submitted_by_token_id)).all()}
    cap = cfg.max_queued_jobs_per_token
    answers: list[str | None] = []
    for row in token_rows:
        if row is None:
            answers.append(None)
            continue
        now = held.get(row.id, 0)
        if now >= cap:
            answers.append(f"token {row.name!r} has {now} jobs queued or running; at most {cap} at once "
                           "(GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN): wait for one to finish, or cancel one")
        else:
            held[row.id] = now + 1
            answers.append(None)
    return answers


def stamp(job: Job, token_row: ApiToken | None, now=None) -> Job:
    """The job as it is stored: who submitted it, and when it was published."""
    job.enqueued_at = now or utcnow()
    job.submitted_by_token_id = token_row.id if token_row is not None else None
    return job


def publish(db: Session, job: Job, cfg: Settings) -> Exception | None:
    """Tell the broker; where it cannot be told, the job is kept as failed, saying why (committed)."""
    try:
        enqueue_job(job.id, job.queue, cfg)
        return None
    except Exception as exc:  # broker down: kept, as failed
        fail_unpublished(job, exc)
        db.commit()
        return exc


def fail_unpublished(job: Job, exc: Exception) -> None:
    job.status, job.finished_at = "failed", utcnow()
    job.error = f"broker unreachable, job not queued: {exc}"
