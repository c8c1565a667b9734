"""trace-level and attribution-only labels: label.mode and audit.mode may be null

Revision ID: 0009
Revises: 0001

Imported and judge labels may be attribution-only (who and when, no failure mode), e.g. the
Who&When dataset's labels, and audits shipped with runs may be attributions (``mode: null``).
Labels made in the app still need a mode (the annotation service enforces it).
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0009'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('label', schema=None) as batch_op:
        batch_op.alter_column('mode', existing_type=sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True)
    with op.batch_alter_table('audit', schema=None) as batch_op:
        batch_op.alter_column('mode', existing_type=sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM label WHERE mode IS NULL")
    op.execute("DELETE FROM audit WHERE mode IS NULL")
    with op.batch_alter_table('audit', schema=None) as batch_op:
        batch_op.alter_column('mode', existing_type=sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False)
    with op.batch_alter_table('label', schema=None) as batch_op:
        batch_op.alter_column('mode', existing_type=sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False)
