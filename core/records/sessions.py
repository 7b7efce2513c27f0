"""Dashboard sessions, kept on the server: a login is a row, and logging out ends it.

Before issue 20 the cookie was the whole session (a signed token id): logging out only asked the
browser to forget it, and a copy stayed valid for its seven days. Now the cookie carries a random
session id (signed as well, dashboard/login.py), only its SHA-256 is stored, and a session counts
while its row is not ended, not expired and its token not revoked.
"""

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from core.records.models import ApiToken, DashboardSession, utcnow


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(db: Session, token: ApiToken, max_age_s: float) -> str:
    """A new session for this token; returns its id (for the cookie, never stored as such)."""
    now = utcnow()
    db.execute(delete(DashboardSession).where(DashboardSession.expires_at < now))  # the expired go here
    session_id = secrets.token_urlsafe(32)
    db.add(DashboardSession(id_hash=_hash(session_id), token_id=token.id, created_at=now,
                            expires_at=now + timedelta(seconds=max_age_s)))
    db.commit()
    return session_id


def session_token(db: Session, session_id: object) -> ApiToken | None:
    """The live token behind a session id, or None (ended, expired, revoked, or no such session)."""
    if not isinstance(session_id, str):
        return None  # a cookie from before server-side sessions (it held a token id)
    return db.scalar(
        select(ApiToken).join(DashboardSession, DashboardSession.token_id == ApiToken.id)
        .where(DashboardSession.id_hash == _hash(session_id), DashboardSession.ended_at.is_(None),
               DashboardSession.expires_at > utcnow(), ApiToken.revoked_at.is_(None))
    )


def end_session(db: Session, session_id: object) -> None:
    if isinstance(session_id, str):
        db.execute(update(DashboardSession).where(DashboardSession.id_hash == _hash(session_id))
                   .values(ended_at=utcnow()))
        db.commit()
