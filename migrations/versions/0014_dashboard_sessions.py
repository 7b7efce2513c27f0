"""server-side dashboard sessions: logging out ends a session, not just the browser's cookie

The login cookie names a row here (only the SHA-256 of its random id is stored); logging out,
expiry and revoking the token end it. Cookies made before this (which named the token itself)
no longer log anyone in: their holders log in again. Issue 20.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23 12:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'dashboard_session',
        sa.Column('id_hash', sa.String(length=64), nullable=False),
        sa.Column('token_id', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['token_id'], ['api_token.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id_hash'),
    )
    op.create_index('ix_dashboard_session_token_id', 'dashboard_session', ['token_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_dashboard_session_token_id', table_name='dashboard_session')
    op.drop_table('dashboard_session')
