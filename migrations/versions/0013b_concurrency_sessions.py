"""optimistic concurrency versions, session generation, token expiry

Revision ID: 0013b
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0013b'
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('annotation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('version', sa.Integer(), server_default='1', nullable=False))
    with op.batch_alter_table('gold_label', schema=None) as batch_op:
        batch_op.add_column(sa.Column('version', sa.Integer(), server_default='1', nullable=False))
    with op.batch_alter_table('user_account', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_generation', sa.Integer(), server_default='0', nullable=False))
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column('revoked_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.drop_column('revoked_at')
        batch_op.drop_column('expires_at')
    with op.batch_alter_table('user_account', schema=None) as batch_op:
        batch_op.drop_column('session_generation')
    with op.batch_alter_table('gold_label', schema=None) as batch_op:
        batch_op.drop_column('version')
    with op.batch_alter_table('annotation', schema=None) as batch_op:
        batch_op.drop_column('version')
