from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer

from api.auth import Credentials, authorize_write
from core.records.db import session_factory
from core.web_deps import SessionDep
from core.records.models import Commit, Gpu, Job, Profile, Result, utcnow
from api.job_body import INVALID, RESULTS_BODY_OPENAPI, checked_results, off_the_loop
from api.posted_schemas import ResultBatchIn, ResultBatchOut
from api.schemas import ProfileOut, ResultDetailOut, ResultOut
from core.description.form_keys import PATTERN as FORM_KEY
from core.records.gpu_records import IdentityConflict, claim_gpu
from core.results.mode_comparison import other_modes
from core.verdicts.trust import posted_by
from core.records.commit_records import CommitConflict, claim_commit
from core.text_bounds import bounded_error

router = APIRouter(prefix="/api/results", tags=["results"])

Dim = Annotated[int | None, Query(ge=1, le=1 << 20)]


@router.get("", response_model=list[ResultOut])
def list_results(
    db: SessionDep,
    variant: str | None = None,
    gpu: Annotated[str | None, Query(description="GPU model (H100) or full name")] = None,
    sha: Annotated[str | None, Query(description="commit sha or a prefix of it")] = None,
    m: Dim = None,
    n: Dim = None,
    k: Dim = None,
    form: Annotated[str | None, Query(max_length=40, pattern=FORM_KEY, description=(
        'GEMM form key (core/description/gemm_form.py), e.g. rrr or rcr+ab+acc16; a "+" in a URL is %2B'))] = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 100,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1, description=(
        "the next page: results older than this id (the last id of the page before)"))] = None,
):
    # The raw samples are never part of a list: not even read (a list of 5,000 results read them all).
    query = select(Result).options(defer(Result.samples_ms)).order_by(Result.id.desc()).limit(limit)
    if before is not None:
        query = query.where(Result.id < before)
    if variant:
        query = query.where(Result.variant == variant)
    if gpu:
        query = query.join(Gpu, Result.gpu_id == Gpu.id).where((Gpu.model == gpu) | (Gpu.name == gpu))
    if sha:
        query = query.join(Commit, Result.commit_id == Commit.id).where(Commit.sha.startswith(sha.lower(), autoescape=True))
    if form:
        query = query.where(Result.form == form)
    for column, value in ((Result.m, m), (Result.n, n), (Result.k, k)):
        if value is not None:
            query = query.where(column == value)
    return [ResultOut.from_row(r) for r in db.scalars(query).unique()]


@router.get("/{result_id}", response_model=ResultDetailOut)
def get_result(result_id: Annotated[int, Path(ge=1, le=2**31 - 1)], db: SessionDep):
    """One result with its raw samples (the cuBLAS samples are in env.cublas_samples_ms)."""
    row = db.get(Result, result_id)
    if row is None:
        raise HTTPException(status_code=404, detail=f"no result {result_id}")
    return ResultDetailOut.from_row(row, posted_by=posted_by(db, row), other_modes=other_modes(db, row))


@router.get("/{result_id}/profile", response_model=ProfileOut,
            responses={404: {"description": "no such result, or it has no profile"}})
def get_profile(result_id: Annotated[int, Path(ge=1, le=2**31 - 1)], db: SessionDep):
    """A confirmation result's profile diff, base against head: what moved most, every compared
    row, the main loop's SASS diff (the whole of what the job and commit pages show)."""
    row = db.scalar(select(Profile).where(Profile.result_id == result_id))
    if row is None:
        why = "no result" if db.get(Result, result_id) is None else "no profile of result"
        raise HTTPException(status_code=404, detail=f"{why} {result_id}")
    return row


# OpenAPI links: what a client (and schemathesis's stateful runs) can do next with the job made.
_NEXT = {name: {"operationId": op, "parameters": {"job_id": "$response.body#/job_id"}}
         for name, op in (("GetJob", "get_job_api_jobs__job_id__get"),
                          ("GetVerdicts", "get_verdicts_api_jobs__job_id__verdicts_get"),
                          ("Confirm", "confirm_job_api_jobs__job_id__confirm_post"))}


@router.post("", response_model=ResultBatchOut, status_code=201, openapi_extra=RESULTS_BODY_OPENAPI,
             responses={201: {"description": "stored as a finished job", "links": _NEXT},
                        200: {"description": "this run_id was posted before: its job", "links": _NEXT},
                        409: {"description": "the GPU, or the commit, is recorded with another identity (the answer"
                                             " says what differs)"}, 422: INVALID})
async def post_results(request: Request, creds: Credentials):
    """Results measured elsewhere (`gemmwatch run --post`), stored as a finished job (the body:
    ResultBatchIn, parsed, checked and stored on a thread, or for a large one in a process of its
    own: api/job_body.py).
    Idempotent on run_id, per token: the same token posting a run_id again gets its first job
    back and adds nothing; another token's run_id is a run of its own.
    Needs a token with the `results` scope."""
    status, content, headers = await off_the_loop(request, store_posted_run, await request.body(), creds)
    if status >= 400:
        raise HTTPException(status_code=status, detail=content["detail"], headers=headers)
    return JSONResponse(content, status_code=status)


def store_posted_run(raw: bytes, cfg, creds) -> tuple[int, dict, dict | None]:
    """A posted run parsed, checked and stored where it was parsed, its answer as (status, JSON,
    headers): in a validation process for a large body (api/validation_pool.py), the server's
    process never holds the run's model, only the raw body and this answer (issue 49, must-show 2).
    A 422 is raised as it comes (RequestValidationError pickles), for the app's own handler."""
    try:
        body = checked_results(raw, cfg)
        response = Response(status_code=201)
        with session_factory(cfg)() as db:
            out = store_run(body, db, cfg, response, creds)
        return response.status_code, out.model_dump(mode="json"), None
    except HTTPException as exc:  # it does not pickle, its parts do: the route raises it again
        return exc.status_code, {"detail": exc.detail}, dict(exc.headers or {}) or None


def store_run(body: ResultBatchIn, db, cfg, response: Response, creds) -> ResultBatchOut:
    token = authorize_write(cfg, db, creds, "results")
    _within_sample_budget(body, cfg.max_posted_samples)
    existing = _posted_before(db, body.run_id, token)
    if existing is not None:
        response.status_code = 200
        return ResultBatchOut(job_id=existing.id, created=False, results=len(existing.results))
    gpu = _claim(db, body.gpu.model_dump(), token)
    commit = _commit(db, body.commit, token) if body.commit else None
    failed = [f"{r.variant} {r.m}x{r.n}x{r.k}: {r.error or 'not verified'}" for r in body.results if not r.verified or r.error]
    job = Job(
        run_id=body.run_id, kind="bench", status="failed" if failed else "succeeded", queue="posted",
        variants=list(dict.fromkeys(r.variant for r in body.results)),
        sizes=[list(s) for s in dict.fromkeys((r.m, r.n, r.k) for r in body.results)],
        gpu_model=gpu.model, gpu_id=gpu.id, commit=commit, error=bounded_error("\n".join(failed)) or None,
        progress_total=len(body.results), progress_done=len(body.results),
        started_at=utcnow(), finished_at=utcnow(), submitted_by_token_id=token.id if token else None,
    )
    db.add(job)
    db.flush()
    for index, r in enumerate(body.results):
        row = r.stored()
        row["error"] = bounded_error(row.get("error"))
        db.add(Result(job_id=job.id, case_index=index, gpu_id=gpu.id, commit_id=commit.id if commit else None, **row))
    try:
        db.commit()
    except IntegrityError:  # the same run posted twice at once: the other request stored it
        db.rollback()
        existing = _posted_before(db, body.run_id, token)
        response.status_code = 200
        return ResultBatchOut(job_id=existing.id, created=False, results=len(existing.results))
    return ResultBatchOut(job_id=job.id, created=True, results=len(body.results))


def _within_sample_budget(body: ResultBatchIn, most: int) -> None:
    """A post's samples in all (each result's samples_ms, env.cublas_samples_ms, env.ab.base_ms) are
    at most GEMMWATCH_MAX_POSTED_SAMPLES: a 422 that says so (issue 37, row 8)."""
    total = 0
    for r in body.results:
        total += len(r.samples_ms) + len(r.env.cublas_samples_ms or ()) + (len(r.env.ab.base_ms) if r.env.ab else 0)
    if total > most:
        raise HTTPException(status_code=422, detail=[{
            "loc": ["body", "results"], "type": "too_many_samples",
            "msg": f"the results carry {total} samples in all (samples_ms, env.cublas_samples_ms, env.ab.base_ms); "
                   f"a post may carry at most {most} (GEMMWATCH_MAX_POSTED_SAMPLES): post them in smaller batches"}])


def _posted_before(db, run_id: str, token) -> Job | None:
    """This token's own run of that id: a run_id is namespaced by the token that posts it, so
    another token's post of the same id can neither take its place nor stop it (issue 37, row 10)."""
    owner = Job.submitted_by_token_id == token.id if token else Job.submitted_by_token_id.is_(None)
    return db.scalar(select(Job).where(Job.run_id == run_id, owner))


def _claim(db, ident: dict, token):
    """The posted GPU's record (core/records/gpu_records.py); 409 when it is recorded otherwise."""
    try:
        try:
            return claim_gpu(db, ident, token)
        except IntegrityError:  # another post made this GPU's record at the same moment: compare with it
            db.rollback()
            return claim_gpu(db, ident, token)
    except IdentityConflict as conflict:
        db.rollback()
        raise HTTPException(status_code=409, detail=conflict.detail()) from None


def _commit(db, commit, token):
    """The posted commit's record (core/records/commit_records.py); 409 when another token recorded it otherwise."""
    try:
        return claim_commit(db, commit, token)
    except CommitConflict as conflict:
        db.rollback()
        raise HTTPException(status_code=409, detail=conflict.detail()) from None
