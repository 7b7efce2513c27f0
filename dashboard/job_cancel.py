"""The job page's Cancel button: a plain form POST, authorised like an API write.

Whoever opened the page with a live session (the signed cookie /login sets) just presses the
button; anyone else types a write token into the form, as `gemmwatch cancel` would send it.
The cookie is SameSite=Lax, so another site's form cannot press the button for a visitor, and
without it a request must carry a token. The result comes back as a message on the job page.
"""

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from core.records.tokens import find_token, has_scope, note_use
from core.jobs.cancel import CANCELLABLE, JobAlreadyEnded, JobNotFound, NotYours, cancel_job
from core.web_deps import SessionDep, settings_of
from dashboard import login

router = APIRouter(tags=["dashboard"], include_in_schema=False)

MESSAGES = {
    "done": "Cancelled: a queued job will not run; a running one stops after its current case and keeps its results.",
    "denied": "Not cancelled: a valid write token is needed, with the jobs scope (gemmwatch token create NAME).",
    "not_yours": "Not cancelled: another token submitted this job; a jobs token cancels only its own, an admin token any.",
    "ended": "Not cancelled: the job had already ended.",
}


def form_state(request: Request, db, job) -> dict:
    """What the job page shows: the button, with a token field unless the visitor's session is of a
    token that may cancel (the jobs scope; whether this job is its own is checked on the press)."""
    session = login.session_token(request, db)
    return {
        "offered": job.status in CANCELLABLE,
        "needs_token": settings_of(request).auth_writes and (session is None or not has_scope(session, "jobs")),
        "message": MESSAGES.get(request.query_params.get("cancel", "")),
    }


@router.post("/jobs/{job_id}/cancel")
def cancel_from_page(request: Request, db: SessionDep, job_id: int,
                     token: Annotated[str, Form(max_length=200)] = ""):
    if not 1 <= job_id < 2**31:
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    row = None
    if settings_of(request).auth_writes:
        row = find_token(db, token.strip()) if token.strip() else login.session_token(request, db)
        if row is None or not has_scope(row, "jobs"):
            return RedirectResponse(f"/jobs/{job_id}?cancel=denied", status_code=303)
        note_use(db, row)
    try:
        cancel_job(db, job_id, by=row)
    except NotYours:
        return RedirectResponse(f"/jobs/{job_id}?cancel=not_yours", status_code=303)
    except JobNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    except JobAlreadyEnded:
        return RedirectResponse(f"/jobs/{job_id}?cancel=ended", status_code=303)
    return RedirectResponse(f"/jobs/{job_id}?cancel=done", status_code=303)
