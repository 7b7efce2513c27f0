"""Reads of the dashboard, when GEMMWATCH_AUTH_READS is on: a token once, then a session cookie.

The login page takes an API token and, if it is live, opens a session on the server
(core/records/sessions.py) and sets a cookie that holds the session's random id, signed (itsdangerous)
with the server's secret and stamped with its time: HttpOnly (no script reads it), SameSite=Lax
(no other site's form or script sends it), Secure over HTTPS. Each request checks that the
session is still open and its token not revoked, so logging out, `gemmwatch token revoke` and
expiry end it on the server, whatever copy of the cookie is kept. The login form, like every
form, posts only from this site's own page (api/same_origin.py): another page cannot log a
visitor in as someone else. A script may send `Authorization: Bearer <token>` instead (CSV/JSON
exports).
"""

import os
import secrets
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from itsdangerous import BadSignature, URLSafeTimedSerializer

from core.web_deps import SessionDep, settings_of
from core.records import sessions
from core.records.models import ApiToken
from core.records.tokens import find_token
from dashboard.templating import templates

COOKIE = "gemmwatch_session"
router = APIRouter(tags=["dashboard"], include_in_schema=False)


def secret_key(cfg) -> str:
    """GEMMWATCH_SECRET_KEY, or one made once and kept (0600) in the data directory."""
    if cfg.secret_key:
        return cfg.secret_key
    path = Path(cfg.data_dir) / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


def _signer(cfg) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key(cfg), salt="gemmwatch-dashboard-session")


def _session_id(request: Request) -> str | None:
    """The session id in this request's cookie, if its signature holds and it is not too old."""
    cfg = settings_of(request)
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        return _signer(cfg).loads(cookie, max_age=cfg.session_max_age_s)
    except BadSignature:  # forged, tampered with, or expired
        return None


def session_token(request: Request, db) -> ApiToken | None:
    """The live token behind this request: its bearer header, or its open session."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return find_token(db, header[7:].strip())
    session_id = _session_id(request)
    return sessions.session_token(db, session_id) if session_id is not None else None


def require_dashboard_reader(request: Request, db: SessionDep) -> None:
    """Every dashboard page and export: public unless GEMMWATCH_AUTH_READS, then a live token."""
    if not settings_of(request).auth_reads or session_token(request, db) is not None:
        return
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    raise HTTPException(status_code=303, detail="log in first", headers={"Location": f"/login?next={quote(target)}"})


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never //host or a scheme, so the login cannot send you elsewhere.
    Browsers drop tabs and newlines from a URL ("/\t/host" is "//host"), so no control character
    or space is kept either (Starlette happens to percent-encode them today; this does not rely on it)."""
    if (not target or not target.startswith("/") or target.startswith("//") or "\\" in target
            or any(c <= " " or c == "\x7f" for c in target)):
        return "/"
    return target


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str | None = None, failed: bool = False):
    return templates.TemplateResponse(request, "login.html", {"next": _safe_next(next), "failed": failed,
                                                               "view": "login"})


@router.post("/login")
def log_in(request: Request, db: SessionDep, token: Annotated[str, Form(max_length=200)],
           next: Annotated[str, Form(max_length=2000)] = "/"):
    row = find_token(db, token.strip())
    if row is None:
        return RedirectResponse(f"/login?failed=true&next={quote(_safe_next(next))}", status_code=303)
    cfg = settings_of(request)
    sessions.end_session(db, _session_id(request))  # a new login is a new session, never the old one reused
    session_id = sessions.open_session(db, row, cfg.session_max_age_s)
    resp = RedirectResponse(_safe_next(next), status_code=303)
    resp.set_cookie(COOKIE, _signer(cfg).dumps(session_id), max_age=int(cfg.session_max_age_s), httponly=True,
                    samesite="lax", secure=request.url.scheme == "https", path="/")
    return resp


@router.post("/logout")
def log_out(request: Request, db: SessionDep):
    """Ends the session on the server (a kept copy of the cookie logs no one in) and drops the cookie."""
    sessions.end_session(db, _session_id(request))
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(COOKIE, path="/")
    return resp
