"""A commit's record as a token may touch it: its identity written once, by its first writer.

A commit is (repository, sha); its identity is what says where it stands in a history: its
branch, its parents, its message and its date. History, baselines and the default base of a
confirmation follow them (core/verdicts/ancestry.py), so before issue 37 (row 4) any `jobs` token could
post a job naming another repository's sha with its own branch and parents and take that
commit's baseline away ("regression" became "no baseline") and show its forged branch on the
commit page. Now the token whose write first recorded the commit owns it; that token, a token
granted the commit's repository (`api_token.repos`, `gemmwatch token create --repo`) or an admin
token may change it. Anyone else must agree with the record: a post that sends a field differently
(one recorded as unknown included) is a 409 that says each difference, and stores nothing. A field
a post leaves out is no difference, so a CI re-run of the same commit, or a job naming only the sha,
keeps working.

Where writes need no token (`GEMMWATCH_AUTH_WRITES=false`) no writer can be told from another:
there later posts fill in and change the record as before.
"""

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.records.models import ApiToken, Commit
from core.records.tokens import has_scope

IDENTITY = ("branch", "parents", "message", "committed_at")


@dataclass
class Difference:
    field: str
    recorded: object
    sent: object


def _shown(value) -> object:
    """A value as a 409 may echo it: JSON-writable, short, encodable."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        text = value if len(value) <= 200 else value[:200] + "…"
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_shown(v) for v in value[:64]]
    return value


class CommitConflict(Exception):
    def __init__(self, commit: Commit, differences: list[Difference]):
        said = "; ".join(f"{d.field} is {_shown(d.recorded)!r}, this request says {_shown(d.sent)!r}"
                         for d in differences)
        where = f"{commit.repo}@{commit.sha}" if commit.repo else commit.sha
        super().__init__(f"commit {where} is already recorded and its identity differs: {said}. A commit's"
                         " identity is written by the token that first recorded it; only that token, a token"
                         " granted its repository (gemmwatch token create --repo) or an admin token changes it")
        self.commit = commit
        self.differences = differences

    def detail(self) -> dict:
        return {"message": str(self), "repo": _shown(self.commit.repo), "sha": self.commit.sha,
                "differs": [{"field": d.field, "recorded": _shown(d.recorded), "sent": _shown(d.sent)}
                            for d in self.differences]}


def utc(when: datetime | None) -> datetime | None:
    """A date as stored: UTC (SQLite keeps a date's wall time and drops its offset)."""
    if when is None:
        return None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def may_rewrite(commit: Commit, token: ApiToken) -> bool:
    """The commit's first writer, a token granted its repository, or an admin token."""
    return (commit.owner_token_id == token.id or has_scope(token, "admin")
            or commit.repo in (token.repos or []))


def sent_identity(c) -> dict[str, object]:
    """c: a commit as the wire describes it (api.schemas.CommitIn, or anything with its fields)."""
    return {"branch": c.branch, "parents": None if c.parents is None else list(c.parents), "message": c.message,
            "committed_at": utc(c.committed_at)}


def claim_commit(db: Session, c, token: ApiToken | None) -> Commit:
    """The commit a write names: recorded here (owned by `token`) if new; else changed where the
    token may, and otherwise checked against its record (CommitConflict, nothing written).

    `token` is None where writes need no token: then any post fills in and changes the record."""
    sent = sent_identity(c)
    row = db.scalar(select(Commit).where(Commit.repo == c.repo, Commit.sha == c.sha))
    if row is None:
        row = Commit(sha=c.sha, repo=c.repo, owner_token_id=token.id if token else None)
        db.add(row)
    elif token is not None and not may_rewrite(row, token):
        differences = [Difference(f, getattr(row, f), sent[f]) for f in IDENTITY
                       if sent[f] is not None and sent[f] != _recorded(row, f)]
        if differences:
            raise CommitConflict(row, differences)
        return row
    # Later posts of a writer that may may know more (branch, message, date) than the first one did.
    for field in IDENTITY:
        if sent[field] is not None:
            setattr(row, field, sent[field])
    db.flush()
    return row


def _recorded(row: Commit, field: str) -> object:
    value = getattr(row, field)
    return utc(value) if field == "committed_at" else value
