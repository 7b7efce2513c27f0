"""every stored result's env made to fit its declared shape (core/results/result_env.py)

Before issue 20 a posted env could be any JSON: a value 300 levels deep (every read of it then
answered 500), a `gpu` that is a string (the overview failed on it). New posts are checked at the
door; this brings the rows stored before to the same shape, so no reader meets one it cannot
render. Keys the schema does not declare move to env.extra; a key whose value does not fit is
dropped and named in env.extra.dropped_at_upgrade; infinities (JSON has none) become null.
Rows are read as text, so a value too deep for Python's JSON parser is dropped too, not fatal.
Batches of 500 rows; only rows that change are written. Nothing to undo: downgrade keeps them.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 11:00:00
"""
import json

from alembic import op
import sqlalchemy as sa

from core.results.result_env import conform

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

BATCH = 500
result = sa.table("result", sa.column("id", sa.Integer), sa.column("env", sa.JSON))


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
