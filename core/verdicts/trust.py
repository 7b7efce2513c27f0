"""Which results a job's verdict may stand on: those its owner would trust (issue 49, row 2).

Any `jobs` token can have a worker measure any kernel under any commit, a slower one under the
name of a victim's kernel at the victim's base commit among them; any `results` token can post a
run under any commit, figures no worker of this deployment measured. A verdict, a baseline and a
resource change therefore use only the results of jobs submitted by the job's own submitter, by a
token granted the job's repository (`gemmwatch token create --repo`) or by an admin token, whether
a worker measured them or they were posted. Where the job has no submitter (writes open, no token),
what a worker measured for another tokenless job counts too: there is no one to tell apart. Anything
else may be charted, never judged against. One rule, used by core/verdicts/baselines.py for every read it
makes (a confirmation's base side is held to the same owner by core/verdicts/confirm.py).
"""

from sqlalchemy import ColumnElement, and_, false, or_, select
from sqlalchemy.orm import Session

from core.records.models import ApiToken, Job, Result


def trusted_posters(db: Session, job: Job) -> list[int]:
    """The tokens whose results, measured or posted, this job's verdicts take: its submitter, tokens
    granted its repository, admin tokens."""
    repo = job.commit.repo if job.commit is not None else None
    ids = {job.submitted_by_token_id} if job.submitted_by_token_id is not None else set()
    for token in db.scalars(select(ApiToken).where(ApiToken.revoked_at.is_(None))):
        if "admin" in token.scopes.split() or (repo is not None and repo in (token.repos or [])):
            ids.add(token.id)
    return sorted(ids)


def trusted_results(db: Session, job: Job) -> ColumnElement[bool]:
    """A condition on Result (joined to its Job as `Job`) that holds for the results `job`'s
    verdicts may use (the module docstring)."""
    posters = trusted_posters(db, job)
    by_trusted = Job.submitted_by_token_id.in_(posters) if posters else false()
    if job.submitted_by_token_id is None:
        return or_(and_(Job.run_id.is_(None), Job.submitted_by_token_id.is_(None)), by_trusted)
    return by_trusted


def posted_by(db: Session, result: Result) -> str | None:
    """The name of the token that posted a result's run; None where a worker measured it."""
    job = result.job if result.job is not None else db.get(Job, result.job_id)
    if job is None or job.run_id is None:
        return None
    token = db.get(ApiToken, job.submitted_by_token_id) if job.submitted_by_token_id is not None else None
    return token.name if token is not None else "an unauthenticated writer (writes open)"
