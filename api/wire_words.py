"""The words both sides of the wire contract use: what a job sends (api/schemas.py) and what a
posted run sends (api/posted_schemas.py). Names follow docs/ARCHITECTURE.md ("Words")."""

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from core.wire_types import Sha, Text

GpuModel = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,59}$")]
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


class CommitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha: Sha = Field(description="commit hash, 4 to 64 hex digits")
    repo: Text(200) = ""
    branch: Text(200) | None = None
    message: Text(10_000) | None = None
    committed_at: datetime | None = None
    parents: list[Sha] | None = Field(
        default=None, max_length=64,
        description="parent shas, first parent first (`git rev-parse HEAD^@`); history follows the first parent",
    )

    @field_validator("committed_at")
    @classmethod
    def _a_date_every_reader_can_hold(cls, when: datetime | None) -> datetime | None:
        # Year 1 at +14:00 is 1 BC in UTC: PostgreSQL stores it, Python cannot read it back (every
        # read of the commit failed). Checked on the year before any conversion, which could overflow.
        if when is not None and not 1970 <= when.year <= 9000:
            raise ValueError(f"committed_at {when.isoformat()}: the year must be within 1970..9000")
        return when
