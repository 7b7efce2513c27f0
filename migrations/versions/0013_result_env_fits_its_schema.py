"""every stored result's env made to fit its declared shape

Before issue 20 a posted env could be any JSON: a value 300 levels deep (every read of it then
answered 500), a `gpu` that is a string (the overview failed on it). New posts are checked at the
door; this brings the rows stored before to the same shape, so no reader meets one it cannot
render. Keys the schema does not declare move to env.extra; a key whose value does not fit is
dropped and named in env.extra.dropped_at_upgrade; infinities (JSON has none) become null.
Rows are read as text, so a value too deep for Python's JSON parser is dropped too, not fatal.
Batches of 500 rows; only rows that change are written. Nothing to undo: downgrade keeps them.

Frozen (issue 51): the shape is the JSON Schema beside this file, a copy of
docs/schemas/result-env-1.json as it stood on 2026-11-29, and the rules below are this file's own,
so a replay does the same whatever the product's env model becomes. They follow the model's rules
of that day (core/results/result_env.py): unknown keys at any depth into `extra` by their dotted
path, `extra` at most 4 levels deep, 64 keys and 64 KiB, no NUL or lone surrogate in any text.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 11:00:00
"""
import json
import math
from pathlib import Path

import jsonschema
import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

BATCH = 500
result = sa.table("result", sa.column("id", sa.Integer), sa.column("env", sa.JSON))

SCHEMA = json.loads(Path(__file__).with_name("0013_result_env.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXTRA_MAX_DEPTH = 4
EXTRA_MAX_BYTES = 64 * 1024
NOT_READABLE = "(env was not an object, or too deep to read)"


class DoesNotFit(ValueError):
    pass


def _resolved(node: dict) -> dict:
    while "$ref" in node:  # "#/$defs/Stats"
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _record(node: dict) -> dict | None:
    """The record (an object schema with properties) a field holds: `Stats | None` gives Stats."""
    node = _resolved(node)
    for branch in node.get("anyOf", [node]):
        branch = _resolved(branch)
        if "properties" in branch:
            return branch
    return None


def _split(node: dict, data: dict, prefix: str) -> tuple[dict, dict]:
    """(the keys the record declares, nested records split alike; every other key by its dotted path)."""
    known, moved = {}, {}
    declared = node["properties"]
    for key, value in data.items():
        if key not in declared or key == "extra":
            moved[f"{prefix}{key}"] = value
            continue
        record = _record(declared[key])
        if record is not None and isinstance(value, dict):
            value, deeper = _split(record, value, f"{prefix}{key}.")
            moved.update(deeper)
        known[key] = value
    return known, moved


def _storable_text(value) -> None:
    if isinstance(value, str):
        if "\x00" in value or any("\ud800" <= c <= "\udfff" for c in value):
            raise DoesNotFit("text with a NUL or a lone surrogate")
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable_text(key)
            _storable_text(item)
    elif isinstance(value, list):
        for item in value:
            _storable_text(item)


def _bounded_extra(value, depth: int) -> None:
    if depth > EXTRA_MAX_DEPTH:
        raise DoesNotFit("extra nested too deep")
    if isinstance(value, dict):
        for item in value.values():
            _bounded_extra(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _bounded_extra(item, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise DoesNotFit("an integer beyond 64 bits")
    elif isinstance(value, float) and not math.isfinite(value):
        raise DoesNotFit("NaN or an infinity")


def _fitted(data) -> dict:
    """The record as it is kept: unknown keys moved into extra, the whole checked against the schema."""
    if not isinstance(data, dict):
        raise DoesNotFit("not an object")
    data = dict(data)
    given = data.pop("extra", {})
    if not isinstance(given, dict):
        raise DoesNotFit("extra is not an object")
    known, moved = _split(SCHEMA, data, "")
    if set(moved) & set(given):
        raise DoesNotFit("extra already holds an unknown key")
    extra = {**given, **moved}
    for value in extra.values():
        _bounded_extra(value, 1)
    record = {**known, "extra": extra}
    _storable_text(record)
    if not VALIDATOR.is_valid(record):
        raise DoesNotFit("a value of another type or out of its bounds")
    if len(json.dumps(extra, separators=(",", ":"))) > EXTRA_MAX_BYTES:
        raise DoesNotFit("extra too large")
    if not extra:
        del record["extra"]
    return record


def _finite_or_null(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_null(v) for v in value]
    return value


def conform(env) -> dict:
    """The record made to fit: kept whole where it fits; else each top-level key that fits is kept, each
    that does not is dropped and named in extra["dropped_at_upgrade"]."""
    if not isinstance(env, dict):
        return {"extra": {"dropped_at_upgrade": [NOT_READABLE]}}
    try:
        env = _finite_or_null(env)
        return _fitted(env)
    except (DoesNotFit, RecursionError):
        pass
    kept: dict = {}
    extra: dict = {}
    dropped: list[str] = []
    for key, value in env.items():
        try:
            one = _fitted({key: value})
        except (DoesNotFit, RecursionError):
            dropped.append(str(key)[:64])
            continue
        extra.update(one.pop("extra", {}))
        kept.update(one)
    try:
        return _fitted({**kept, "extra": {**extra, "dropped_at_upgrade": dropped[:64]}})
    except DoesNotFit:  # the keys that fit one by one overflow extra together
        return _fitted({**kept, "extra": {"dropped_at_upgrade": (dropped + sorted(extra))[:64]}})


def _parsed(text):
    try:
        return json.loads(text) if text is not None else {}
    except (ValueError, RecursionError):
        return None  # conform() records it as not an object


def upgrade() -> None:
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.select(result.c.id, sa.cast(result.c.env, sa.Text))
            .where(result.c.id > last).order_by(result.c.id).limit(BATCH)
        ).all()
        if not rows:
            return
        for row_id, text in rows:
            env = _parsed(text)
            fitted = conform(env)
            if fitted != env:
                bind.execute(sa.update(result).where(result.c.id == row_id).values(env=fitted))
        last = rows[-1][0]


def downgrade() -> None:
    pass  # a fitted record is still a record the older code reads
