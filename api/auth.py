"""Bearer tokens: created by `gemmwatch token create NAME`, stored hashed, revocable.

Tokens are 256-bit random strings, so a plain SHA-256 is a sufficient one-way store (no
password stretching needed). The token itself is never stored and never logged.
"""

import hashlib
import secrets
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from api.deps import SessionDep
from api.models import ApiToken, utcnow

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


def find_token(db: Session, token: str) -> ApiToken | None:
    """The live (not revoked) token row for a token string, or None."""
    row = db.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(token)))
    return row if row is not None and row.revoked_at is None else None


def _check(db: Session, creds: HTTPAuthorizationCredentials | None) -> ApiToken:
    unauthorized = HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="a valid API token is required: Authorization: Bearer <token> (gemmwatch token create NAME)",
        headers={"WWW-Authenticate": "Bearer"},
    )
    if creds is None or creds.scheme.lower() != "bearer":
        raise unauthorized
    row = find_token(db, creds.credentials)
    if row is None:
        raise unauthorized
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


def require_writer(
    request: Request, db: SessionDep, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> ApiToken | None:
    if not request.app.state.settings.auth_writes:
        return None
    return _check(db, creds)


def require_reader(
    request: Request, db: SessionDep, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> ApiToken | None:
    if not request.app.state.settings.auth_reads:
        return None
    return _check(db, creds)


Writer = Depends(require_writer)
Reader = Depends(require_reader)
