"""run_flag: an annotator's skip or flag of a run, with a reason

Revision ID: 0011
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0011'
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('run_flag',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('taxonomy_pk', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('resolved_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('resolved_by', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['resolved_by'], ['user_account.id'], ),
    sa.ForeignKeyConstraint(['run_pk'], ['run.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['taxonomy_pk'], ['taxonomy.id'], ),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_pk', 'user_id', 'taxonomy_pk')
    )
    with op.batch_alter_table('run_flag', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_flag_run_pk'), ['run_pk'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_flag_user_id'), ['user_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('run_flag', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_flag_user_id'))
        batch_op.drop_index(batch_op.f('ix_run_flag_run_pk'))
    op.drop_table('run_flag')
