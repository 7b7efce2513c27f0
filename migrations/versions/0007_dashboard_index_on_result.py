"""dashboard index on result

The dashboard filters results by mode, size and GPU; with this index its reads of a
million results are index-only on PostgreSQL (docs/BENCHMARKS.md has the timing).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 07:22:23.380845
"""
from alembic import op


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.create_index('ix_result_dashboard', ['mode', 'm', 'n', 'k', 'gpu_id', 'commit_id', 'verified', 'variant', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_index('ix_result_dashboard')
