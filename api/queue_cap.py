"""Per token, a cap on jobs queued or running at once (issue 37, row 7): one request's worth of
jobs each, not a fleet's hours. GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN (default 20); one more is a
429 that says how many the token holds and how to go on.

Checked by the job intake's writer thread (api/intake.py) for a group of jobs at once, the
group's earlier jobs counted, in one query. Each server process checks its own groups, so jobs
of one token taken by several processes in the same instant may pass the cap by a group."""

from fastapi import HTTPException, status
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.models import Job
from core.settings import Settings

OPEN = ("queued", "running")


def over_cap(db: Session, cfg: Settings, token_rows: list) -> list[HTTPException | None]:
    """For each job's token row in order (None: writes open, no cap), None where the job may be
    stored, else the 429 its request gets."""
    ids = {row.id for row in token_rows if row is not None}
    held: dict[int, int] = {}
    if ids:
        held = dict(db.execute(select(Job.submitted_by_token_id, func.count())
                               .where(Job.submitted_by_token_id.in_(ids), Job.status.in_(OPEN))
                               .group_by(Job.submitted_by_token_id)).all())
    cap = cfg.max_queued_jobs_per_token
    answers: list[HTTPException | None] = []
    for row in token_rows:
        if row is None:
            answers.append(None)
            continue
        now = held.get(row.id, 0)
        if now >= cap:
            answers.append(HTTPException(
                status_code=status.HTTP_429_TOO_MANY_REQUESTS, headers={"Retry-After": "30"},
                detail=f"token {row.name!r} has {now} jobs queued or running; at most {cap} at once "
                       "(GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN): wait for one to finish, or cancel one"))
        else:
            held[row.id] = now + 1
            answers.append(None)
    return answers
