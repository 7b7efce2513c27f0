"""a posted run_id is its token's own

`run_id` was unique across all posts, so the first token to post an id owned it: a `results`
token that claimed `job-GPU-<uuid>-42` first made the real post of that id a no-op
(`created: false`). Now it is unique per submitting token, and among posts without a token
(writes open) as before. Issue 37, row 10.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 00:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

WITHOUT_TOKEN = sa.text("submitted_by_token_id IS NULL")


def upgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_constraint('uq_job_run_id', type_='unique')
        batch_op.create_unique_constraint('uq_job_token_run_id', ['submitted_by_token_id', 'run_id'])
    op.create_index('uq_job_run_id_without_token', 'job', ['run_id'], unique=True,
                    sqlite_where=WITHOUT_TOKEN, postgresql_where=WITHOUT_TOKEN)


def downgrade() -> None:
    # Fails where two tokens posted one run_id: which of the two runs to keep is not a migration's call.
    op.drop_index('uq_job_run_id_without_token', table_name='job')
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_constraint('uq_job_token_run_id', type_='unique')
        batch_op.create_unique_constraint('uq_job_run_id', ['run_id'])
