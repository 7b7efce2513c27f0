"""Kernel files kept by content, so any job's kernel can be compiled again later.

A job's plan records, per case, the kernel it ran as
{"description": <its KernelDescription, each file's text replaced by its SHA-256>,
 "tunables": {...}, "origin": "builtin" | "job"}; the texts live once each in kernel_source.
A confirmation job (core/confirm.py) thaws the base and head kernels from there: the whole
description, every field, as it was.

Rows written before kernels had one description (a single source text, a tile, an `arch`) are
read as the description they amount to (`description_from_stored`)."""

import hashlib
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from core.kernel import KernelDescription
from core.models import Job, KernelSource


def keep(db: Session, text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    # Two workers may keep the same text at once: the second insert does nothing.
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    db.execute(dialect.insert(KernelSource).values(digest=digest, source=text).on_conflict_do_nothing())
    return digest


def freeze(db: Session, desc: KernelDescription, tunables: dict[str, int], origin: str) -> dict[str, Any]:
    """A kernel as plan data: its description with each file kept by digest."""
    described = desc.model_dump(mode="json")
    described["files"] = {path: keep(db, text) for path, text in desc.files.items()}
    return {"description": described, "tunables": dict(tunables), "origin": origin}


def thaw(db: Session, frozen: dict[str, Any], name: str = "kernel") -> dict[str, Any] | None:
    """The frozen kernel with its files' texts back; None if any text was not kept."""
    if "description" not in frozen:  # a row from before descriptions: one source text by digest
        source = _text(db, frozen.get("digest"))
        return None if source is None else {"description": legacy_description({"name": name, **frozen}, source),
                                            "tunables": {}, "origin": frozen.get("origin", "job")}
    files = {}
    for path, digest in frozen["description"]["files"].items():
        text = _text(db, digest)
        if text is None:
            return None
        files[path] = text
    return {**frozen, "description": {**frozen["description"], "files": files}}


def _text(db: Session, digest: str | None) -> str | None:
    return db.scalar(select(KernelSource.source).where(KernelSource.digest == digest)) if digest else None


def kernel_of(db: Session, job: Job, variant: str, m: int, n: int, k: int) -> dict[str, Any] | None:
    """The kernel (with its files) that `job` ran for this variant and size, if it kept one."""
    for entry in job.plan or []:
        if (entry["variant"], entry["m"], entry["n"], entry["k"]) == (variant, m, n, k) and entry.get("kernel"):
            return thaw(db, entry["kernel"], variant)
    return None


def description_from_stored(stored: dict[str, Any]) -> KernelDescription:
    """A description as a job's `sources` or a thawed kernel holds it; an older row (one `source`
    text with a `tile`) is read as the description it amounts to. Validated again on the way out:
    a row written past the API meets the same checks, the source guard included."""
    if "files" in stored:
        return KernelDescription.model_validate(stored)
    return KernelDescription.model_validate(legacy_description(stored, stored["source"]))


def legacy_description(old: dict[str, Any], source: str) -> dict[str, Any]:
    """{source, entry, block, tile, defines, compute_mode, arch, dynamic_smem} as a description: one
    file, a tile grid, fixed defines. (Such rows could not say a wave grid: the reason for the change.)"""
    name = old.get("name") or old.get("variant") or "kernel"
    return {"name": name, "files": {f"{name}.cu": source}, "source": f"{name}.cu", "entry": old["entry"],
            "block": list(old["block"]), "grid": {"tile": list(old["tile"])}, "defines": dict(old.get("defines") or {}),
            "compute_mode": old.get("compute_mode", "fp32"), "target": old.get("arch"),
            "dynamic_smem": old.get("dynamic_smem", 0)}
