"""The Profile button of a confirmation's job page (issue 39): a new confirmation of the same head
job against the same base, for the same cases, asked with "profile": true, so both kernels are
timed again and then profiled whatever the verdict. Authorised as the Cancel button is
(dashboard/job_cancel.py: a live session, or a write token typed in; the jobs scope; only the head
job's submitter or an admin confirms it). The new job's page says what was asked.
"""

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from core.jobs import job_intake
from core.jobs.cancel import NotYours
from core.verdicts.confirm import KIND as CONFIRM, ConfirmIn, plan_confirmation
from core.errors import Unprocessable
from core.records.models import Job
from core.records.tokens import find_token, has_scope, note_use
from core.web_deps import SessionDep, settings_of
from dashboard import login
from core.jobs.job_states import OPEN

router = APIRouter(tags=["dashboard"], include_in_schema=False)

MESSAGES = {
    "queued": "Queued: base and head timed again in this job, then profiled with Nsight Compute and their SASS "
              "compared (a worker without Nsight Compute gives the SASS diff alone).",
    "denied": "Not profiled: a valid write token is needed, with the jobs scope (gemmwatch token create NAME).",
    "not_yours": "Not profiled: another token submitted the head job; only it or an admin token confirms it.",
    "refused": "Not profiled: the head job's cases can no longer be confirmed (a kernel was not kept).",
    "broker": "Not profiled: the broker is unreachable; the new job was stored as failed.",
    "over_cap": "Not profiled: this token has as many jobs queued or running as a token may "
                "(GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN): wait for one to finish, or cancel one.",
}


def form_state(request: Request, db, job: Job | None) -> dict:
    """What the job page shows: the button on an ended confirmation, with a token field unless
    the visitor's session is of a token that may submit jobs (without a job: that last only)."""
    session = login.session_token(request, db)
    return {
        "offered": job is not None and job.kind == CONFIRM and bool(job.confirm)
                   and job.status not in OPEN,
        "needs_token": settings_of(request).auth_writes and (session is None or not has_scope(session, "jobs")),
        "message": MESSAGES.get(request.query_params.get("profile", "")),
    }


@router.post("/jobs/{job_id}/profile")
def profile_from_page(request: Request, db: SessionDep, job_id: int,
                      token: Annotated[str, Form(max_length=200)] = ""):
    cfg = settings_of(request)
    job = db.get(Job, job_id) if 1 <= job_id < 2**31 else None
    head = db.get(Job, (job.confirm or {}).get("head_job", 0)) if job is not None and job.kind == CONFIRM else None
    if head is None:
        raise HTTPException(status_code=404, detail=f"no confirmation job {job_id}")
    row = None
    if cfg.auth_writes:
        row = find_token(db, token.strip()) if token.strip() else login.session_token(request, db)
        if row is None or not has_scope(row, "jobs"):
            return RedirectResponse(f"/jobs/{job_id}?profile=denied", status_code=303)
        note_use(db, row)
    # The API's own intake rules (core/jobs/job_intake.py): the per-token queue cap, the stamp, the publish.
    if job_intake.over_cap(db, cfg, [row])[0] is not None:
        return RedirectResponse(f"/jobs/{job_id}?profile=over_cap", status_code=303)
    cases = sorted({(r.variant, r.m, r.n, r.k) for r in job.results})
    asked = ConfirmIn(base=job.confirm["base_sha"], variants=sorted({c[0] for c in cases}) or None,
                      sizes=[list(c[1:]) for c in cases] or None, profile=True)
    try:
        new = plan_confirmation(db, head, asked, row)
    except NotYours:
        return RedirectResponse(f"/jobs/{job_id}?profile=not_yours", status_code=303)
    except Unprocessable:
        return RedirectResponse(f"/jobs/{job_id}?profile=refused", status_code=303)
    db.add(job_intake.stamp(new, row))
    db.commit()
    if job_intake.publish(db, new, cfg) is not None:
        return RedirectResponse(f"/jobs/{new.id}?profile=broker", status_code=303)
    return RedirectResponse(f"/jobs/{new.id}?profile=queued", status_code=303)
