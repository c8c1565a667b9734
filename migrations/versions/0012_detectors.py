"""detectors: annotation.hints_on and annotation.source_version

Revision ID: 0012
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0012'
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('annotation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('hints_on', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('source_version', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('annotation', schema=None) as batch_op:
        batch_op.drop_column('source_version')
        batch_op.drop_column('hints_on')
