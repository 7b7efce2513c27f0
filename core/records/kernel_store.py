"""Kernel files kept by content, so any job's kernel can be compiled again later.

A job's plan records, per case, the kernel it ran as
{"description": <its KernelDescription, each file's text replaced by its SHA-256>,
 "tunables": {...}, "origin": "builtin" | "job"}; the texts live once each in kernel_source.
A confirmation job (core/verdicts/confirm.py) thaws the base and head kernels from there: the whole
description, every field, as it was.

Rows written before kernels had one description (a single source text, a tile, an `arch`) are
read as the description they amount to (`description_from_stored`). A job's own kernels (its
`sources`) are thawed here too, beside the built-ins, for its plan (`kernels_of_job`)."""

import hashlib
import json
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from core.description.builtins import builtin_kernels
from core.description.kernel_description import KernelDescription, explain
from core.records.models import Job, KernelSource


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


# What does not make a kernel another kernel: what it is called and how it is explained.
NOT_IDENTITY = frozenset({"name", "technique", "seed"})


def kernel_hash(desc: KernelDescription) -> str:
    """What identifies "the same kernel" (issue 37, row 6): every file's text, which one is compiled,
    the entry, defines, tunables and their values, block, grid, compiler and flags, form, precision:
    the whole description but its name and prose. A tuned configuration is kept under it, so a
    job's own `naive` with other files or other tunables is another kernel than the built-in."""
    described = desc.model_dump(mode="json")
    described["files"] = {path: hashlib.sha256(text.encode()).hexdigest() for path, text in desc.files.items()}
    return identity_of(described)


def identity_of(described: dict[str, Any]) -> str:
    """kernel_hash of a description as a plan freezes it (core/records/kernel_store.py freeze: files by
    digest). A field at its default is left out, so a field added to descriptions later does not
    make every kernel kept before another one."""
    defaults = {name: field.get_default(call_default_factory=True)
                for name, field in KernelDescription.model_fields.items() if not field.is_required()}
    kept = {key: value for key, value in described.items()
            if key not in NOT_IDENTITY and not (key in defaults and _same(value, defaults[key]))}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _same(value: Any, default: Any) -> bool:
    if hasattr(default, "model_dump"):
        default = default.model_dump(mode="json")
    return value == default or (isinstance(value, list) and isinstance(default, tuple) and value == list(default))


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


def kernels_of_job(sources: list[dict[str, Any]]) -> dict[str, KernelDescription]:
    """Every kernel a job may name: the built-ins, with the job's own (by name) in their place.
    A stored kernel is checked again here (the API checked it; a row written past the API meets
    the same checks): a ValueError says which kernel and field."""
    own = {}
    for source in sources:
        try:
            own[source["name"]] = description_from_stored(source)
        except ValidationError as exc:
            raise ValueError(explain(exc, f"the job's kernel {source.get('name')!r}")) from None
        except (KeyError, TypeError) as exc:  # a row of neither the current nor an older shape
            raise ValueError(f"the job's kernel {source.get('name')!r} is not a kernel description ({exc!r})") from None
    return {**builtin_kernels(), **own}
