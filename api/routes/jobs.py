from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, status
from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from api.auth import Credentials, authorize_write, write_token
from core.jobs.broker import queue_for
from core.jobs.cancel import JobAlreadyEnded, JobNotFound, NotYours, cancel_job
from core.web_deps import SessionDep, SettingsDep
from core.jobs.fleet import load_fleet
from api.intake import job_intake
from api.job_body import INVALID, JOB_BODY_OPENAPI, job_from
from core.records.models import Job
from core.verdicts.baselines import verdicts
from core.verdicts.confirm import confirmation, plan_confirmation, profiles_of
from core.verdicts.regression import PairedThresholds, Thresholds
from api.schemas import ConfirmationOut, ConfirmIn, JobOut, JobStatus, VerdictOut
from core.records.commit_records import CommitConflict, claim_commit
from core.records.models import ApiToken

router = APIRouter(prefix="/api/jobs", tags=["jobs"])

JobId = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobOut, openapi_extra=JOB_BODY_OPENAPI,
             responses={413: {"description": "the body is larger than GEMMWATCH_MAX_JOB_BYTES"}, 422: INVALID,
                        409: {"description": "the commit is recorded with another identity by another token"
                                             " (the answer says what differs)"},
                        503: {"description": "the broker is unreachable: the job was stored as failed"}})
async def create_job(request: Request, cfg: SettingsDep, creds: Credentials):
    """Queue a job (the body: JobCreate). Its token is checked before its body is read, and the
    body is validated on a thread (api/request_gate.py, api/job_body.py)."""
    body = await job_from(request)

    def build(db: Session, token: ApiToken | None) -> Job:
        job = Job(
            status="queued",
            kind=body.kind,
            variants=body.variants,
            sizes=body.sizes,
            tunables=body.tunables,
            timing=body.timing,
            sources=[src.model_dump(mode="json") for src in body.sources],
            gpu_model=body.gpu,
            queue=queue_for(body.gpu),
            progress_total=body.case_count(),
        )
        if body.commit is not None:
            try:
                job.commit = claim_commit(db, body.commit, token)
            except CommitConflict as conflict:  # another writer's commit, told otherwise (issue 37, row 4)
                raise HTTPException(status_code=409, detail=conflict.detail()) from None
        return job

    # Stored and published with the other jobs arriving at this process meanwhile; the
    # database, not the broker, is the record that a job exists (api/intake.py).
    return await job_intake(request.app).submit(build, write_token(cfg, creds))


@router.get("/{job_id}", response_model=JobOut)
def get_job(job_id: JobId, db: SessionDep, cfg: SettingsDep):
    job = db.get(Job, job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    waiting = load_fleet(db, cfg).waiting_reason(job) if job.status == "queued" else None
    return JobOut.from_row(job, waiting=waiting)


@router.get("", response_model=list[JobOut])
def list_jobs(
    db: SessionDep,
    cfg: SettingsDep,
    status_: Annotated[JobStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
):
    # A job's sources and plan (its kernels, every file) are no part of a listed job, and were most
    # of each list's time: read by every poller of the job list (issue 37, the flood readers).
    query = (select(Job).options(defer(Job.sources, raiseload=True), defer(Job.plan, raiseload=True))
             .order_by(Job.id.desc()).limit(limit))
    if status_:
        query = query.where(Job.status == status_)
    jobs = db.scalars(query).unique().all()
    fleet = load_fleet(db, cfg) if any(j.status == "queued" for j in jobs) else None
    return [JobOut.from_row(j, with_results=False, waiting=fleet and fleet.waiting_reason(j)) for j in jobs]


@router.post("/{job_id}/cancel", response_model=JobOut,
             responses={403: {"description": "another token's job, and this token is no admin"},
                        404: {"description": "no such job"}, 409: {"description": "the job already ended"}})
def cancel(job_id: JobId, db: SessionDep, cfg: SettingsDep, creds: Credentials):
    """A queued job never runs; a running one stops at its next case boundary and keeps its results.
    A `jobs` token cancels the jobs it submitted; an `admin` token any job."""
    token = authorize_write(cfg, db, creds, "jobs")
    try:
        return JobOut.from_row(cancel_job(db, job_id, by=token))
    except NotYours as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from None
    except JobNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    except JobAlreadyEnded as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None


@router.get("/{job_id}/verdicts", response_model=list[VerdictOut])
def get_verdicts(
    job_id: JobId,
    db: SessionDep,
    cfg: SettingsDep,
    base: Annotated[str | None, Query(description="base commit sha (or prefix)", pattern=r"^[0-9a-fA-F]{4,64}$")] = None,
    base_branch: Annotated[str | None, Query(description="compare with this branch's history", max_length=200)] = None,
):
    """Per result: regression, ok, faster, no baseline, unverified or not applicable (not run by design),
    against the base commit, the base branch, or (neither given) earlier results on the job's own branch."""
    job = db.get(Job, job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    return verdicts(db, job, base, base_branch, Thresholds.from_settings(cfg))


@router.post("/{job_id}/confirm", status_code=status.HTTP_202_ACCEPTED, response_model=JobOut,
             responses={403: {"description": "another token's job, and this token is no admin"},
                        404: {"description": "no such job"},
                        503: {"description": "the broker is unreachable: the job was stored as failed"}})
async def confirm_job(job_id: JobId, body: ConfirmIn, request: Request, cfg: SettingsDep, creds: Credentials):
    """Queue a confirmation of this job's results: each case's base-commit kernel and head kernel,
    timed interleaved on one GPU (core/verdicts/confirm.py). Only the token that submitted the job (or an
    admin token) confirms it, against base jobs that token (or an admin) submitted."""
    def build(db: Session, token: ApiToken | None) -> Job:
        head = db.get(Job, job_id)
        if head is None:
            raise HTTPException(status_code=404, detail=f"no job {job_id}")
        try:
            return plan_confirmation(db, head, body, token)
        except NotYours as exc:
            raise HTTPException(status_code=403, detail=str(exc)) from None

    return await job_intake(request.app).submit(build, write_token(cfg, creds))


@router.get("/{job_id}/confirmation", response_model=list[ConfirmationOut])
def get_confirmation(job_id: JobId, db: SessionDep, cfg: SettingsDep):
    """A confirm job's verdicts from its paired samples: regression, improvement, no change,
    undecided (or failed), with the head/base ratio's interval and the kernels' resource changes."""
    job = db.get(Job, job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    if job.kind != "confirm":
        raise HTTPException(status_code=422, detail=f"job {job_id} is a {job.kind} job, not a confirmation")
    return confirmation(job, PairedThresholds.from_settings(cfg), profiles_of(db, job.id))
