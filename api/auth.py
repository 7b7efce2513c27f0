"""Who may call an endpoint: the bearer token a request carries, checked against the stored
tokens (core/records/tokens.py)."""

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from sqlalchemy.orm import Session

from core.records.db import session_factory
from core.records.models import ApiToken
from core.records.tokens import SCOPES, find_token, has_scope, note_use
from core.settings import Settings
from core.web_deps import settings_of

_bearer = HTTPBearer(auto_error=False, description="a token from `gemmwatch token create NAME`")


def unauthorized() -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="a valid API token is required: Authorization: Bearer <token> (gemmwatch token create NAME)",
        headers={"WWW-Authenticate": "Bearer"},
    )


def forbidden(row: ApiToken, scope: str) -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_403_FORBIDDEN,
        detail=f"token {row.name!r} has scopes [{row.scopes}]; this needs '{scope}' ({SCOPES[scope]}):"
               f" gemmwatch token create NAME --scope {scope}",
    )


def check_scope(row: ApiToken, scope: str) -> ApiToken:
    if not has_scope(row, scope):
        raise forbidden(row, scope)
    return row


def bearer_token(creds: HTTPAuthorizationCredentials | None) -> str:
    """The token a request carries (not yet checked); 401 where it carries none."""
    if creds is None or creds.scheme.lower() != "bearer":
        raise unauthorized()
    return creds.credentials


def _check(db: Session, creds: HTTPAuthorizationCredentials | None) -> ApiToken:
    row = find_token(db, bearer_token(creds))
    if row is None:
        raise unauthorized()
    note_use(db, row)
    return row


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def authorize_write(cfg: Settings, db: Session, creds: HTTPAuthorizationCredentials | None,
                    scope: str) -> ApiToken | None:
    """The first call of every write endpoint, on the thread that does its work: 401 without a live
    token, 403 when the token lacks `scope`; the token's row, or None where writes need no token.

    Not a dependency: a plain `def` dependency runs on a thread of its own, one more hop per
    request, and a hop under 50 clients cost ~1 ms of CPU (docs/BENCHMARKS.md). The lookup
    shares the endpoint's transaction.
    """
    if not cfg.auth_writes:
        return None
    return check_scope(_check(db, creds), scope)


def write_token(cfg: Settings, creds: HTTPAuthorizationCredentials | None) -> str | None:
    """For a write that the job intake checks with others (api/intake.py): the token to check,
    None where writes need none; 401 at once where a token is needed and none was sent."""
    return bearer_token(creds) if cfg.auth_writes else None


async def require_reader(request: Request, creds: Credentials) -> ApiToken | None:
    # Async and without a session of its own, so a read costs nothing for a check that is off
    # (the default).
    cfg = settings_of(request)
    if not cfg.auth_reads:
        return None
    return await run_in_threadpool(_check_alone, cfg, creds)


def _check_alone(cfg: Settings, creds: HTTPAuthorizationCredentials | None) -> ApiToken:
    # Its own short session: the endpoint runs on another thread, and a connection held while
    # the request waits for that thread is one the others cannot have.
    with session_factory(cfg)() as db:
        return _check(db, creds)


Reader = Depends(require_reader)


def bearer_of(authorization: str | None) -> str | None:
    """The token of an Authorization header, read as the routes' HTTPBearer reads it."""
    scheme, token = get_authorization_scheme_param(authorization)
    return token if scheme.lower() == "bearer" and token else None


def writer_refusal(cfg: Settings, token: str, scope: str) -> HTTPException | None:
    """For api/request_gate.py, before a write's body is read: why this token may not make the
    write (401, 403), or None. The route checks the token again where it uses it."""
    with session_factory(cfg)() as db:
        row = find_token(db, token)
    if row is None:
        return unauthorized()
    return None if has_scope(row, scope) else forbidden(row, scope)
