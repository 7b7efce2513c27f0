"""autotune: job kind, tunables and plan; result tunables and statistics; tuned_config

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 06:51:02.718186
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('tuned_config',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('gpu_model', sa.String(length=60), nullable=False),
    sa.Column('variant', sa.String(length=120), nullable=False),
    sa.Column('m', sa.Integer(), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('tunables', sa.JSON(), nullable=False),
    sa.Column('gflops', sa.Float(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('gpu_model', 'variant', 'm', 'n', 'k', name='uq_tuned_config')
    )
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=16), server_default='bench', nullable=False))
        batch_op.add_column(sa.Column('tunables', sa.JSON(), server_default='{}', nullable=False))
        batch_op.add_column(sa.Column('plan', sa.JSON(), nullable=True))

    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tunables', sa.JSON(), server_default='{}', nullable=False))
        batch_op.add_column(sa.Column('mean_ms', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('stddev_ms', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('min_ms', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('max_ms', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('q1_ms', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('q3_ms', sa.Float(), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_column('q3_ms')
        batch_op.drop_column('q1_ms')
        batch_op.drop_column('max_ms')
        batch_op.drop_column('min_ms')
        batch_op.drop_column('stddev_ms')
        batch_op.drop_column('mean_ms')
        batch_op.drop_column('tunables')

    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_column('plan')
        batch_op.drop_column('tunables')
        batch_op.drop_column('kind')

    op.drop_table('tuned_config')
