"""a result's status (result.status): passed, incorrect, not applicable, failed or cancelled

Readers told these apart by `verified` and the first words of the error (core/results/result_status.py).
Rows stored before are given theirs from what they hold: verified without an error passed; a
result whose error began "wrong result" (worker/measure/verify.py's words) or that carries a measured
relative error without being verified is incorrect; one whose error began "not applicable" was
not applicable; the rest failed. No stored row was cancelled: a case stopped by a cancel wrote
no result until now.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26 06:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None

result = sa.table("result", sa.column("verified", sa.Boolean), sa.column("error", sa.Text),
                  sa.column("rel_error", sa.Float), sa.column("status", sa.String))


def upgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.add_column(sa.Column('status', sa.String(length=16), server_default='failed', nullable=False))
    bind = op.get_bind()
    no_error = sa.or_(result.c.error.is_(None), result.c.error == "")
    bind.execute(sa.update(result).where(result.c.verified.is_(True), no_error).values(status="passed"))
    bind.execute(sa.update(result).where(
        result.c.verified.is_(False),
        sa.or_(result.c.error.like("wrong result%"), result.c.rel_error.is_not(None))).values(status="incorrect"))
    bind.execute(sa.update(result).where(result.c.error.like("not applicable%")).values(status="not applicable"))


def downgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_column('status')
