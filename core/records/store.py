"""Writes shared by the API and the worker: find-or-create rows that many jobs point at."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.records.commit_records import claim_commit
from core.records.models import Commit, Gpu, utcnow
from core.records.gpu_records import normal_uuid


def upsert_commit(db: Session, c) -> Commit:
    """c: a commit as the wire describes it, written as a write with no token writes it (writes
    open). A token's write goes through core/records/commit_records.py claim_commit."""
    return claim_commit(db, c, None)


def upsert_gpu(db: Session, ident: dict) -> Gpu:
    """The GPU as a worker (which holds the database, no token) found it. A record a token made
    is taken over: the fleet owns it from then on (core/records/gpu_records.py is what tokens go through)."""
    ident = {**ident, "uuid": normal_uuid(ident["uuid"])}
    row = db.scalar(select(Gpu).where(Gpu.uuid == ident["uuid"]))
    if row is None:
        row = Gpu(uuid=ident["uuid"], name=ident["name"], model=ident["model"])
        db.add(row)
    for field in ("name", "model", "sm_count", "compute_capability", "memory_mib", "driver"):
        if ident.get(field) is not None:
            setattr(row, field, ident[field])
    row.owner_token_id = None
    row.last_seen = utcnow()
    db.flush()
    return row
