"""job run_id for posted results

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 07:17:46.579177
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.add_column(sa.Column('run_id', sa.String(length=100), nullable=True))
        batch_op.create_unique_constraint('uq_job_run_id', ['run_id'])



def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        # WARNING: constraint name is None; this directive will fail as
        # rendered.  Add a name, or use a naming convention; see
        # https://alembic.sqlalchemy.org/en/latest/naming.html
        batch_op.drop_constraint('uq_job_run_id', type_='unique')
        batch_op.drop_column('run_id')

