"""jobs: background work (imports, exports, detectors, judges) with state, progress and result

Revision ID: 0014_jobs
Revises: 0014_source_kind
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0014_jobs"
down_revision = "0014_source_kind"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), primary_key=True),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("user_account.id", ondelete="SET NULL"), nullable=True),
        sa.Column("progress_done", sa.Integer(), nullable=False),
        sa.Column("progress_total", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("finished_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("heartbeat_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("worker", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    )
    op.create_index("ix_job_kind", "job", ["kind"])
    op.create_index("ix_job_state", "job", ["state"])
    op.create_index("ix_job_user_id", "job", ["user_id"])


def downgrade() -> None:
    op.drop_table("job")
