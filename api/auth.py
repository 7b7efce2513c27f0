"""Bearer tokens: created by `gemmwatch token create NAME`, stored hashed, revocable.

Tokens are 256-bit random strings, so a plain SHA-256 is a sufficient one-way store (no
password stretching needed). The token itself is never stored and never logged.
"""

import hashlib
import secrets
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.orm import Session

from api.db import session_factory
from api.models import ApiToken, utcnow
from api.settings import Settings

TOKEN_PREFIX = "gw_"
LAST_USED_RESOLUTION = timedelta(minutes=1)
_bearer = HTTPBearer(auto_error=False, description="a token from `gemmwatch token create NAME`")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(db: Session, name: str) -> str:
    if db.scalar(select(ApiToken).where(ApiToken.name == name)) is not None:
        raise ValueError(f"a token named {name!r} exists already; revoke it or pick another name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    db.add(ApiToken(name=name, token_hash=hash_token(token)))
    db.commit()
    return token


def revoke_token(db: Session, name: str) -> bool:
    row = db.scalar(select(ApiToken).where(ApiToken.name == name, ApiToken.revoked_at.is_(None)))
    if row is None:
        return False
    row.revoked_at = utcnow()
    db.commit()
    return True


# Built once: every authenticated request runs it, and building the expression anew cost more
# CPU than running it (py-spy under the load test). IN, so a group of writes checks all its
# tokens at once (api/intake.py).
_TOKENS_BY_HASH = select(ApiToken).where(ApiToken.token_hash.in_(bindparam("token_hashes", expanding=True)))


def find_tokens(db: Session, tokens: set[str]) -> dict[str, ApiToken]:
    """The live (not revoked) token rows of these token strings, by token string."""
    by_hash = {hash_token(token): token for token in tokens}
    rows = db.scalars(_TOKENS_BY_HASH, {"token_hashes": list(by_hash)})
    return {by_hash[row.token_hash]: row for row in rows if row.revoked_at is None}


def find_token(db: Session, token: str) -> ApiToken | None:
    """The live (not revoked) token row for a token string, or None."""
    return find_tokens(db, {token}).get(token)


def unauthorized() -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="a valid API token is required: Authorization: Bearer <token> (gemmwatch token create NAME)",
        headers={"WWW-Authenticate": "Bearer"},
    )


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


def note_use(db: Session, row: ApiToken) -> None:
    """Record a token's last use to the minute, not per request.

    Writing it on every request made every write request of a token queue on that one row's
    lock (and hold a pooled connection while waiting): the API's p99 under load was mostly that
    wait (docs/BENCHMARKS.md). The conditional UPDATE lets one request a minute do it.
    """
    now = utcnow()
    if row.last_used_at is not None and now - row.last_used_at < LAST_USED_RESOLUTION:
        return
    db.execute(
        update(ApiToken)
        .where(ApiToken.id == row.id, or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < now - LAST_USED_RESOLUTION))
        .values(last_used_at=now)
    )
    db.commit()


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def authorize_write(cfg: Settings, db: Session, creds: HTTPAuthorizationCredentials | None) -> ApiToken | None:
    """The first call of every write endpoint, on the thread that does its work.

    Not a dependency: a plain `def` dependency runs on a thread of its own, one more hop per
    request, and a hop under 50 clients cost ~1 ms of CPU (docs/BENCHMARKS.md). The lookup
    shares the endpoint's transaction.
    """
    if not cfg.auth_writes:
        return None
    return _check(db, creds)


def write_token(cfg: Settings, creds: HTTPAuthorizationCredentials | None) -> str | None:
    """For a write that the job intake checks with others (api/intake.py): the token to check,
    None where writes need none; 401 at once where a token is needed and none was sent."""
    return bearer_token(creds) if cfg.auth_writes else None


async def require_reader(request: Request, creds: Credentials) -> ApiToken | None:
    # Async and without a session of its own, so a read costs nothing for a check that is off
    # (the default).
    cfg = request.app.state.settings
    if not cfg.auth_reads:
        return None
    return await run_in_threadpool(_check_alone, cfg, creds)


def _check_alone(cfg: Settings, creds: HTTPAuthorizationCredentials | None) -> ApiToken:
    # Its own short session: the endpoint runs on another thread, and a connection held while
    # the request waits for that thread is one the others cannot have.
    with session_factory(cfg)() as db:
        return _check(db, creds)


Reader = Depends(require_reader)
