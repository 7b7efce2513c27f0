"""worker registry: every GPU worker, its GPU, queues and heartbeat; each case's wall time; jobs by
worker and end time (the fleet's "jobs in the last day")

Workers register at start and beat while they live (worker/fleet.py); the reaper marks silent
ones offline. GET /api/workers and the dashboard's /fleet page read this table.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-22 16:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'worker',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('host', sa.String(length=200), nullable=False),
        sa.Column('gpu_id', sa.Integer(), nullable=True),
        sa.Column('gpu_index', sa.Integer(), nullable=True),
        sa.Column('model', sa.String(length=60), nullable=False),
        sa.Column('queues', sa.JSON(), nullable=False),
        sa.Column('version', sa.String(length=40), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=True),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_beat_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('offline_since', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['gpu_id'], ['gpu.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )
    op.create_index('ix_worker_model', 'worker', ['model'], unique=False)
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.add_column(sa.Column('case_s', sa.Float(), nullable=True))
    op.create_index('ix_job_worker_finished', 'job', ['worker', 'finished_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_job_worker_finished', table_name='job')
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_column('case_s')
    op.drop_index('ix_worker_model', table_name='worker')
    op.drop_table('worker')
