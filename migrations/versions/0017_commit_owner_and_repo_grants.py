"""a commit's owner, and the repositories a token is granted

A commit's identity (branch, parents, message, date) was rewritten by every post that named its
sha: any `jobs` token could give another repository's commit its own branch and parents, and
with them take away its baseline (issue 37, row 4). Now the token whose write first recorded a
commit owns it (`commit.owner_token_id`); only that token, a token granted the commit's
repository (`api_token.repos`, a list of repository names) or an admin token may change it.
Commits recorded before (or with writes open) have no owner: only a granted or admin token
changes them.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28 00:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner_token_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_commit_owner_token', 'api_token', ['owner_token_id'], ['id'])
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.add_column(sa.Column('repos', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.drop_column('repos')
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.drop_constraint('fk_commit_owner_token', type_='foreignkey')
        batch_op.drop_column('owner_token_id')
