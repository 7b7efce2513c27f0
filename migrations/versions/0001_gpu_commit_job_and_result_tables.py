"""gpu, commit, job and result tables

Revision ID: 0001
Revises: 
Create Date: 2026-11-22 06:18:40.754707
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('commit',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('branch', sa.String(length=200), nullable=True),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('committed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo', 'sha', name='uq_commit_repo_sha')
    )
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_commit_sha'), ['sha'], unique=False)

    op.create_table('gpu',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=80), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('model', sa.String(length=60), nullable=False),
    sa.Column('sm_count', sa.Integer(), nullable=True),
    sa.Column('compute_capability', sa.String(length=10), nullable=True),
    sa.Column('memory_mib', sa.Integer(), nullable=True),
    sa.Column('driver', sa.String(length=40), nullable=True),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('uuid')
    )
    with op.batch_alter_table('gpu', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gpu_model'), ['model'], unique=False)

    op.create_table('job',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('variants', sa.JSON(), nullable=False),
    sa.Column('sizes', sa.JSON(), nullable=False),
    sa.Column('gpu_model', sa.String(length=60), nullable=True),
    sa.Column('queue', sa.String(length=80), nullable=False),
    sa.Column('commit_id', sa.Integer(), nullable=True),
    sa.Column('gpu_id', sa.Integer(), nullable=True),
    sa.Column('progress_done', sa.Integer(), nullable=False),
    sa.Column('progress_total', sa.Integer(), nullable=False),
    sa.Column('current_case', sa.String(length=200), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('worker', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['commit_id'], ['commit.id'], ),
    sa.ForeignKeyConstraint(['gpu_id'], ['gpu.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_job_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_job_status'), ['status'], unique=False)

    op.create_table('result',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('case_index', sa.Integer(), nullable=False),
    sa.Column('variant', sa.String(length=120), nullable=False),
    sa.Column('m', sa.Integer(), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('dtype', sa.String(length=16), nullable=False),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('compute_mode', sa.String(length=16), nullable=False),
    sa.Column('gpu_id', sa.Integer(), nullable=True),
    sa.Column('commit_id', sa.Integer(), nullable=True),
    sa.Column('verified', sa.Boolean(), nullable=False),
    sa.Column('rel_error', sa.Float(), nullable=True),
    sa.Column('median_ms', sa.Float(), nullable=True),
    sa.Column('gflops', sa.Float(), nullable=True),
    sa.Column('cublas_median_ms', sa.Float(), nullable=True),
    sa.Column('cublas_gflops', sa.Float(), nullable=True),
    sa.Column('pct_of_cublas', sa.Float(), nullable=True),
    sa.Column('n_samples', sa.Integer(), nullable=False),
    sa.Column('noise', sa.Float(), nullable=True),
    sa.Column('converged', sa.Boolean(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('env', sa.JSON(), nullable=False),
    sa.Column('samples_ms', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['commit_id'], ['commit.id'], ),
    sa.ForeignKeyConstraint(['gpu_id'], ['gpu.id'], ),
    sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', 'case_index', name='uq_result_job_case')
    )
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.create_index('ix_result_history', ['variant', 'gpu_id', 'm', 'n', 'k', 'commit_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_index('ix_result_history')

    op.drop_table('result')
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_job_status'))
        batch_op.drop_index(batch_op.f('ix_job_created_at'))

    op.drop_table('job')
    with op.batch_alter_table('gpu', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_model'))

    op.drop_table('gpu')
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_commit_sha'))

    op.drop_table('commit')
