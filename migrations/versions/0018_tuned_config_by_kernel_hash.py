"""a tuned configuration is kept under its kernel's hash (tuned_config.kernel_hash)

Tuned settings were shared by name: an autotune of a job's own source named `naive` with
`BLOCK: [8]` made everyone's next `naive` on that GPU model run with BLOCK = 8 (issue 37, row 6).
Now a tuned configuration is kept per (GPU model, variant, kernel hash, size), the hash of the
kernel's whole description but its name and prose (core/records/kernel_store.py kernel_hash): only the
same kernel inherits it.

Rows kept before are given the hash of the kernel their autotune job planned (its plan holds each
case's kernel, files by digest, which is what the hash reads); a row whose job planned no kernel
for it (a plan from before kernels were kept, cuBLAS) cannot say which kernel it was found for
and is deleted: an autotune finds it again.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28 00:00:00
"""
import hashlib
import json

from alembic import op
import sqlalchemy as sa


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

tuned = sa.table("tuned_config", sa.column("id", sa.Integer), sa.column("variant", sa.String),
                 sa.column("m", sa.Integer), sa.column("n", sa.Integer), sa.column("k", sa.Integer),
                 sa.column("job_id", sa.Integer), sa.column("kernel_hash", sa.String))
job = sa.table("job", sa.column("id", sa.Integer), sa.column("plan", sa.JSON))

# The kernel hash as core/records/kernel_store.py made it when this revision was written: the description
# as a plan freezes it, less its name and prose and every field at its default, as sorted compact
# JSON. Kept here, not imported, so a replay computes the same hashes whatever the live code becomes
# (tests/test_migrations.py checks that today's hash still agrees for every built-in).
NOT_IDENTITY = frozenset({"name", "technique", "seed"})
DEFAULTS = {"include_dirs": [], "launcher": None, "args": ["M", "N", "K", "alpha", "A", "B", "beta", "C"],
            "tensor_maps": {}, "layout": "row", "epilogue": None, "accumulate": "fp32", "dynamic_smem": 0,
            "target": None, "compiler": "nvrtc", "flags": [], "compute_mode": "fp32", "output": "input",
            "tolerance": None, "defines": {}, "tunables": {}}


def identity_of(described: dict) -> str:
    kept = {key: value for key, value in described.items()
            if key not in NOT_IDENTITY and not (key in DEFAULTS and value == DEFAULTS[key])}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def upgrade() -> None:
    with op.batch_alter_table('tuned_config', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kernel_hash', sa.String(length=64), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.select(tuned.c.id, tuned.c.variant, tuned.c.m, tuned.c.n, tuned.c.k, tuned.c.job_id)).all()
    plans: dict[int, list] = {}
    for row in rows:
        if row.job_id not in plans:
            plans[row.job_id] = conn.execute(sa.select(job.c.plan).where(job.c.id == row.job_id)).scalar() or []
        found = None
        for entry in plans[row.job_id]:
            if (isinstance(entry, dict) and (entry.get("variant"), entry.get("m"), entry.get("n"), entry.get("k"))
                    == (row.variant, row.m, row.n, row.k)):
                kernel = entry.get("kernel")
                if isinstance(kernel, dict) and isinstance(kernel.get("description"), dict):
                    found = identity_of(kernel["description"])
                break
        if found is None:
            conn.execute(sa.delete(tuned).where(tuned.c.id == row.id))
        else:
            conn.execute(sa.update(tuned).where(tuned.c.id == row.id).values(kernel_hash=found))
    with op.batch_alter_table('tuned_config', schema=None) as batch_op:
        batch_op.alter_column('kernel_hash', existing_type=sa.String(length=64), nullable=False)
        batch_op.drop_constraint('uq_tuned_config', type_='unique')
        batch_op.create_unique_constraint('uq_tuned_config', ['gpu_model', 'variant', 'kernel_hash', 'm', 'n', 'k'])


def downgrade() -> None:
    # Back to one row per (GPU model, variant, size): the newest of each kept.
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, gpu_model, variant, m, n, k FROM tuned_config ORDER BY updated_at DESC, id DESC")).all()
    seen = set()
    for row in rows:
        key = (row.gpu_model, row.variant, row.m, row.n, row.k)
        if key in seen:
            conn.execute(sa.delete(tuned).where(tuned.c.id == row.id))
        seen.add(key)
    with op.batch_alter_table('tuned_config', schema=None) as batch_op:
        batch_op.drop_constraint('uq_tuned_config', type_='unique')
        batch_op.create_unique_constraint('uq_tuned_config', ['gpu_model', 'variant', 'm', 'n', 'k'])
        batch_op.drop_column('kernel_hash')
