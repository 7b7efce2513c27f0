"""Kernel sources kept by content, so any job's kernel can be compiled again later.

A job's plan records, per case, the kernel it ran as {digest, entry, block, tile, defines,
compute_mode, origin, arch, dynamic_smem}; the text lives once in kernel_source under its SHA-256.
A confirmation job (api/confirm.py) thaws the base and head kernels from there."""

import hashlib
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from api.models import Job, KernelSource


def keep(db: Session, source: str) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()
    # Two workers may keep the same source at once: the second insert does nothing.
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    db.execute(dialect.insert(KernelSource).values(digest=digest, source=source).on_conflict_do_nothing())
    return digest


def freeze(db: Session, launch) -> dict[str, Any]:
    """A LaunchSpec as plan data: everything but the source, which is kept by digest."""
    return {"digest": keep(db, launch.source), "entry": launch.entry, "block": list(launch.block),
            "tile": list(launch.tile), "defines": dict(launch.defines), "compute_mode": launch.compute_mode,
            "origin": launch.origin, "arch": launch.arch, "dynamic_smem": launch.dynamic_smem}


def thaw(db: Session, frozen: dict[str, Any]) -> dict[str, Any] | None:
    source = db.scalar(select(KernelSource.source).where(KernelSource.digest == frozen["digest"]))
    return None if source is None else {**frozen, "source": source}


def kernel_of(db: Session, job: Job, variant: str, m: int, n: int, k: int) -> dict[str, Any] | None:
    """The kernel (with its source) that `job` ran for this variant and size, if it kept one."""
    for entry in job.plan or []:
        if (entry["variant"], entry["m"], entry["n"], entry["k"]) == (variant, m, n, k) and entry.get("kernel"):
            return thaw(db, entry["kernel"])
    return None
