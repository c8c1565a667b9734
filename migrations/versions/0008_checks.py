"""check table: deterministic L0/L1 checks shipped with runs

Revision ID: 0008
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0008'
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('check',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('level', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('check_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=True),
    sa.Column('agent', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('evidence', sa.JSON(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('check', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_check_run_pk'), ['run_pk'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('check', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_check_run_pk'))
    op.drop_table('check')
