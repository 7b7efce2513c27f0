"""job sources

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 07:11:39.310026
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sources', sa.JSON(), server_default='[]', nullable=False))



def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_column('sources')

