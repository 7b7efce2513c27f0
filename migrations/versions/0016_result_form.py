"""a result's GEMM form (result.form), and the dashboard index led by mode and form

A GEMM's form (core/description/gemm_form.py: each operand's layout, the epilogue, the accumulate type, the
batch) is now part of every result, as its key: "rrr", "rcr+ab+acc16", ... A TN figure and an NN
one are different GEMMs, so histories, baselines and charts hold one form each.

Rows stored before say their form only through env: a kernel described as all column-major
recorded env.launch.layout "column", so it becomes "ccc"; a row posted by a newer `gemmwatch run`
to an older server kept the form record in env.extra.form, whose key is taken where it is one.
Every other row is "rrr" (the server default), the only form there was. (An older kernel whose args
lacked alpha or beta cannot be told from its env: it stays "rrr".) The env text is matched with LIKE
first, so only candidate rows are parsed; json.dumps, which SQLAlchemy writes the column with on
SQLite and PostgreSQL alike, puts one space after each colon; the compact spelling is matched too.

ix_result_dashboard is made again with `form` after `mode`: every dashboard view holds one mode and
one form, so its menus stay loose index scans under both. On a million results (docs/BENCHMARKS.md)
the rebuild is one pass over the table.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 00:00:00
"""
import json
import re

from alembic import op
import sqlalchemy as sa


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None

BATCH = 500
# core/description/form_keys.py PATTERN as it is today; written out, so the migration means what it meant.
FORM_KEY = re.compile(r"^[rc]{3}(\+ab|\+alpha)?(\+acc16)?(\+batch([2-9]|[1-9][0-9]{1,5}))?$")
CANDIDATES = ('%"layout": "column"%', '%"layout":"column"%', '%"key": "%', '%"key":"%')
OLD_INDEX = ['mode', 'm', 'n', 'k', 'gpu_id', 'commit_id', 'verified', 'variant', 'id']
NEW_INDEX = ['mode', 'form', 'm', 'n', 'k', 'gpu_id', 'commit_id', 'verified', 'variant', 'id']
result = sa.table("result", sa.column("id", sa.Integer), sa.column("env", sa.JSON), sa.column("form", sa.String))


def form_of(text):
    """The form a stored env says, or None (then the row stays "rrr")."""
    try:
        env = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(env, dict):
        return None
    extra = env.get("extra")
    for recorded in (env.get("form"), extra.get("form") if isinstance(extra, dict) else None):
        key = recorded.get("key") if isinstance(recorded, dict) else None
        if isinstance(key, str) and FORM_KEY.match(key):
            return key
    launch = env.get("launch")
    if isinstance(launch, dict) and launch.get("layout") == "column":
        return "ccc"
    return None


def upgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_index('ix_result_dashboard')
        batch_op.add_column(sa.Column('form', sa.String(length=40), server_default='rrr', nullable=False))
    backfill(op.get_bind())
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.create_index('ix_result_dashboard', NEW_INDEX, unique=False)


def backfill(bind) -> None:
    text = sa.cast(result.c.env, sa.Text)
    last = 0
    while True:
        rows = bind.execute(
            sa.select(result.c.id, text).where(result.c.id > last, sa.or_(*(text.like(p) for p in CANDIDATES)))
            .order_by(result.c.id).limit(BATCH)
        ).all()
        if not rows:
            return
        found: dict[str, list[int]] = {}
        for row_id, env in rows:
            form = form_of(env)
            if form is not None and form != "rrr":
                found.setdefault(form, []).append(row_id)
        for form, ids in found.items():
            bind.execute(sa.update(result).where(result.c.id.in_(ids)).values(form=form))
        last = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_index('ix_result_dashboard')
        batch_op.drop_column('form')
        batch_op.create_index('ix_result_dashboard', OLD_INDEX, unique=False)
