"""A GPU's record as a token may touch it: made by the first writer, changed by no other.

POST /api/results names its GPU by uuid, and `GET /api/gpus` lists every uuid, so before issue 20
any write token could rename an existing GPU or change its model, and with it move the GPU's
whole history to another ladder and queue. Now a post that names a recorded GPU must agree with
its record; a difference is a 409 that says what differs. The token that made the record (or an
admin token) may still change it, say after a driver update. Workers hold the database itself and
keep writing through core/records/store.py upsert_gpu, which also takes a record from a token (the fleet
then owns it).
"""

import re
import unicodedata
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.records.models import ApiToken, Gpu, Worker, utcnow
from core.records.tokens import has_scope

# What says which GPU this is; a difference in any of them from another token is refused.
IDENTITY = ("name", "model", "sm_count", "compute_capability", "memory_mib")
# What may change under a GPU (a driver update): written by its owner, kept from anyone else.
MUTABLE = ("driver",)


@dataclass
class Difference:
    field: str
    recorded: object
    sent: object


class IdentityConflict(Exception):
    def __init__(self, gpu: Gpu, differences: list[Difference]):
        said = "; ".join(f"{d.field} is {d.recorded!r}, this request says {d.sent!r}" for d in differences)
        super().__init__(f"GPU {gpu.uuid} is already recorded and its record differs: {said}. A GPU's record is"
                         " changed only by the token that made it, or an admin token")
        self.gpu = gpu
        self.differences = differences

    def detail(self) -> dict:
        return {"message": str(self), "uuid": self.gpu.uuid,
                "differs": [{"field": d.field, "recorded": d.recorded, "sent": d.sent} for d in self.differences]}


class WorkersOwnGpu(IdentityConflict):
    """A post naming the GPU a registered worker measures on: its record, and its history, are the
    worker's own (issue 49, row 2: a token copied a worker's identity from GET /api/gpus and posted
    onto it)."""

    def __init__(self, gpu: Gpu):
        Exception.__init__(self, f"GPU {gpu.uuid} is a registered worker's own: only that worker writes its record "
                                 "and results; a posted run names the GPU it was measured on, under its own uuid")
        self.gpu = gpu
        self.differences = []


# Words that say who made or sold the card, not which chip it is.
_VENDOR_WORDS = {"NVIDIA", "GEFORCE", "TESLA", "QUADRO"}


def gpu_model(name: str) -> str:
    """Short model used to name queues and to file a GPU by (an imported run names its GPU by name alone): 'NVIDIA H100 80GB HBM3' -> 'H100', 'NVIDIA GeForce RTX 3080' -> 'RTX-3080'."""
    words = [w for w in re.split(r"[\s_-]+", name.strip()) if w and w.upper() not in _VENDOR_WORDS]
    kept = []
    for w in words:
        # Memory size and form factor come after the model and would split one model's queue.
        if re.fullmatch(r"\d+GB|PCIE|SXM\d*|HBM\d*E?|NVL|MIG", w, flags=re.IGNORECASE):
            break
        kept.append(w)
    model = "-".join(kept) or "unknown"
    return re.sub(r"[^A-Za-z0-9-]", "", model)


def normal_name(text: str) -> str:
    """A GPU's name or uuid as it identifies the GPU: NFKC (a full-width hyphen is a hyphen), format
    characters gone (zero-width space, word joiner, BOM, soft hyphen, LRM), spaces collapsed; a
    ValueError where a character outside printable ASCII is left (a Cyrillic "а" in "NVIDIA"):
    NVML names GPUs in ASCII, and a look-alike would make a record of its own (issue 49, row 7)."""
    folded = "".join(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf")
    folded = " ".join(folded.split())
    odd = sorted({ch for ch in folded if not " " <= ch <= "~"})
    if odd:
        named = ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, '?')}" for ch in odd[:5])
        raise ValueError(f"{text!r} holds characters a GPU's name never has ({named}): NVML names GPUs in ASCII")
    return folded


def normal_uuid(uuid: str) -> str:
    """A GPU uuid as NVML writes it (`GPU-` or `MIG-`, then lower-case hex), nothing around it.

    Stored as sent, `GPU-ABC`, `gpu-abc` and `GPU-abc ` were three GPUs of one name: a look-alike
    record beside the real one, its history apart (issue 37, row 11). Every writer of a GPU record
    (this module for tokens, core/records/store.py for workers) goes through here."""
    text = normal_name(uuid)
    if text[:4].upper() in ("GPU-", "MIG-"):
        return text[:4].upper() + text[4:].lower()
    return text.lower()


def claim_gpu(db: Session, ident: dict, token: ApiToken | None) -> Gpu:
    """The GPU a post names: made here (owned by `token`) if new, else checked against its record.

    `token` is None where writes need no token: then no post may change a record either."""
    ident = {**ident, "uuid": normal_uuid(ident["uuid"])}
    row = db.scalar(select(Gpu).where(Gpu.uuid == ident["uuid"]))
    if row is None:
        row = Gpu(uuid=ident["uuid"], name=ident["name"], model=ident["model"],
                  owner_token_id=token.id if token else None)
        db.add(row)
        _write(row, ident, IDENTITY + MUTABLE)
    elif token is not None and not has_scope(token, "admin") and db.scalar(
            select(Worker.id).where(Worker.gpu_id == row.id).limit(1)) is not None:
        raise WorkersOwnGpu(row)
    elif token is not None and (row.owner_token_id == token.id or has_scope(token, "admin")):
        _write(row, ident, IDENTITY + MUTABLE)
    else:
        differences = [Difference(f, getattr(row, f), ident[f]) for f in IDENTITY
                       if ident.get(f) is not None and ident[f] != getattr(row, f)]
        if differences:
            raise IdentityConflict(row, differences)
    row.last_seen = utcnow()
    db.flush()
    return row


def _write(row: Gpu, ident: dict, fields: tuple[str, ...]) -> None:
    for field in fields:
        if ident.get(field) is not None:
            setattr(row, field, ident[field])
