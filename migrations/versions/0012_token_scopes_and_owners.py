"""token scopes, who made a GPU record and who submitted a job

A token may do what its scopes say (api_token.scopes; tokens made before: "jobs results"); a GPU
record is changed only by the token that made it (gpu.owner_token_id; NULL, as for every GPU
recorded before this, means no token may change it); a `jobs` token cancels only the jobs it
submitted (job.submitted_by_token_id). Issue 20.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 10:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scopes', sa.String(length=200), server_default='jobs results', nullable=False))
    with op.batch_alter_table('gpu', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner_token_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_gpu_owner_token', 'api_token', ['owner_token_id'], ['id'])
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.add_column(sa.Column('submitted_by_token_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_job_submitted_by_token', 'api_token', ['submitted_by_token_id'], ['id'])


def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_constraint('fk_job_submitted_by_token', type_='foreignkey')
        batch_op.drop_column('submitted_by_token_id')
    with op.batch_alter_table('gpu', schema=None) as batch_op:
        batch_op.drop_constraint('fk_gpu_owner_token', type_='foreignkey')
        batch_op.drop_column('owner_token_id')
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.drop_column('scopes')
