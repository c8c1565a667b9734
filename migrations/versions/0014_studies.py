"""studies: study, members, assignment batches, queue rules, run quotas, removals; the sampling
columns of an assignment (study, policy, seed, inclusion probability, stratum)

Revision ID: 0014_studies
Revises: 0014_judges
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0014_studies'
down_revision = "0014_judges"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('study',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('taxonomy_pk', sa.Integer(), nullable=False),
    sa.Column('selection', sa.JSON(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['created_by'], ['user_account.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['taxonomy_pk'], ['taxonomy.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('assignment_removal',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_key', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('taxonomy_pk', sa.Integer(), nullable=False),
    sa.Column('removed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('removed_by', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['removed_by'], ['user_account.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['run_pk'], ['run.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['taxonomy_pk'], ['taxonomy.id'], ),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_key', 'run_pk', 'user_id', 'taxonomy_pk')
    )
    with op.batch_alter_table('assignment_removal', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assignment_removal_run_pk'), ['run_pk'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignment_removal_user_id'), ['user_id'], unique=False)

    op.create_table('queue_rule',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('policy', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('annotators', sa.JSON(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('last_applied_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_id', 'name')
    )
    with op.batch_alter_table('queue_rule', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_queue_rule_study_id'), ['study_id'], unique=False)

    op.create_table('run_quota',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_key', sa.Integer(), nullable=False),
    sa.Column('taxonomy_pk', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.CheckConstraint('n <= k', name='ck_run_quota_n_at_most_k'),
    sa.CheckConstraint('n >= 0', name='ck_run_quota_n_nonnegative'),
    sa.ForeignKeyConstraint(['run_pk'], ['run.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['taxonomy_pk'], ['taxonomy.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_key', 'taxonomy_pk', 'run_pk')
    )
    with op.batch_alter_table('run_quota', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_quota_run_pk'), ['run_pk'], unique=False)

    op.create_table('study_member',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_id', 'user_id')
    )
    with op.batch_alter_table('study_member', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_member_study_id'), ['study_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_study_member_user_id'), ['user_id'], unique=False)

    op.create_table('assignment_batch',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('taxonomy_pk', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=True),
    sa.Column('policy', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('frame_size', sa.Integer(), nullable=False),
    sa.Column('frame_max_run_pk', sa.Integer(), nullable=True),
    sa.Column('strata', sa.JSON(), nullable=False),
    sa.Column('rule_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['created_by'], ['user_account.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['rule_id'], ['queue_rule.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['taxonomy_pk'], ['taxonomy.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', 'taxonomy_pk')
    )
    with op.batch_alter_table('assignment_batch', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assignment_batch_study_id'), ['study_id'], unique=False)

    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.add_column(sa.Column('study_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('policy', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True))
        batch_op.add_column(sa.Column('seed', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('inclusion_prob', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('stratum', sa.Text(), nullable=True))
        batch_op.create_index(batch_op.f('ix_assignment_study_id'), ['study_id'], unique=False)
        batch_op.create_foreign_key('fk_assignment_study_id', 'study', ['study_id'], ['id'], ondelete='SET NULL')



def downgrade() -> None:
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.drop_constraint('fk_assignment_study_id', type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_assignment_study_id'))
        batch_op.drop_column('stratum')
        batch_op.drop_column('inclusion_prob')
        batch_op.drop_column('seed')
        batch_op.drop_column('policy')
        batch_op.drop_column('study_id')

    with op.batch_alter_table('assignment_batch', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assignment_batch_study_id'))

    op.drop_table('assignment_batch')
    with op.batch_alter_table('study_member', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_study_member_user_id'))
        batch_op.drop_index(batch_op.f('ix_study_member_study_id'))

    op.drop_table('study_member')
    with op.batch_alter_table('run_quota', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_quota_run_pk'))

    op.drop_table('run_quota')
    with op.batch_alter_table('queue_rule', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_queue_rule_study_id'))

    op.drop_table('queue_rule')
    with op.batch_alter_table('assignment_removal', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assignment_removal_user_id'))
        batch_op.drop_index(batch_op.f('ix_assignment_removal_run_pk'))

    op.drop_table('assignment_removal')
    op.drop_table('study')
