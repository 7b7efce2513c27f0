"""commit parents, content-addressed kernel sources, confirmation jobs

History follows first-parent ancestry (commit.parents); every kernel a job ran is kept by the
SHA-256 of its source (kernel_source) so an old commit's kernel can be measured again; a
confirmation job records which two jobs it compares (job.confirm).

Revision ID: 0010
Revises: 0007
Create Date: 2026-11-22 13:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'kernel_source',
        sa.Column('digest', sa.String(length=64), nullable=False),
        sa.Column('source', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('digest'),
    )
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parents', sa.JSON(), nullable=True))
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.add_column(sa.Column('confirm', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_column('confirm')
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.drop_column('parents')
    op.drop_table('kernel_source')
