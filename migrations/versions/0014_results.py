"""results: agreement and report payloads stored by (kind, parameters, data version) for every process

Revision ID: 0014_results
Revises: 0014_studies
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0014_results"
down_revision = "0014_studies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stored_result",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("data_version", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("computed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("compute_seconds", sa.Float(), nullable=True),
        sa.Column("job_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.UniqueConstraint("kind", "key", name="uq_stored_result_kind_key"),
    )


def downgrade() -> None:
    op.drop_table("stored_result")
