"""Bearer tokens: created by `gemmwatch token create NAME [--scope S ...]`, stored hashed, revocable.

Tokens are 256-bit random strings, so a plain SHA-256 is a sufficient one-way store (no
password stretching needed). The token itself is never stored and never logged.

A token holds scopes (docs/SECURITY.md, "Who may do what"): every CI runner holds one, so what a
token may do is no more than its job needs. Any live token may read.
"""

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import bindparam, literal, or_, select, update
from sqlalchemy.orm import Session

from core.records.models import ApiToken, utcnow

TOKEN_PREFIX = "gw_"
LAST_USED_RESOLUTION = timedelta(minutes=1)

SCOPES = {
    "results": "post results measured elsewhere (POST /api/results, `gemmwatch run --post`)",
    "jobs": "submit jobs; confirm and cancel the jobs this token submitted",
    "admin": "everything the others may; cancel any job; change a GPU record another token made",
}
DEFAULT_SCOPES = ("jobs", "results")  # what `gemmwatch ci` and `gemmwatch run --post` need


def check_scopes(scopes: list[str] | tuple[str, ...]) -> str:
    """The scopes as stored (sorted, space-separated); ValueError naming an unknown one."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise ValueError(f"unknown scope(s) {unknown or '(none given)'}; a token may have: {', '.join(SCOPES)}")
    return " ".join(sorted(set(scopes)))


def has_scope(row: ApiToken, scope: str) -> bool:
    held = row.scopes.split()
    return scope in held or "admin" in held


def acts_for(token: ApiToken | None, owner_id: int | None) -> bool:
    """The one rule for acting on a job someone submitted (cancel it, confirm it): its submitter
    or an admin token; with writes open (no token asks), anyone."""
    return token is None or has_scope(token, "admin") or owner_id == token.id


def admin_token_ids():
    """A SELECT of the ids of tokens that hold `admin`: a whole word of their stored scopes (sorted,
    space-separated), so no scope that merely contains the letters counts."""
    words = literal(" ").concat(ApiToken.scopes).concat(" ")
    return select(ApiToken.id).where(words.like("% admin %"))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(db: Session, name: str, scopes: list[str] | tuple[str, ...] = DEFAULT_SCOPES,
                 repos: list[str] | tuple[str, ...] = ()) -> str:
    """`repos`: repositories whose commits the token may correct though another token recorded them
    (core/records/commit_records.py); its own first records it may correct anyway."""
    stored_scopes = check_scopes(scopes)
    if db.scalar(select(ApiToken).where(ApiToken.name == name)) is not None:
        raise ValueError(f"a token named {name!r} exists already; revoke it or pick another name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    db.add(ApiToken(name=name, token_hash=hash_token(token), scopes=stored_scopes,
                    repos=sorted(set(repos)) or None))
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
