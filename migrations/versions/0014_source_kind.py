"""annotators of kind "source": dataset annotators are not people; source_name for judges and sources

Revision ID: 0014_source_kind
Revises: 0013b

Adds ``user_account.source_name`` and classifies the rows already there: the annotators of
imported datasets (``whowhen:*``, ``mad:*``, and any passwordless "human" whose annotations all
came from imported audits) become kind ``source``; every judge and source gets its dataset or
judge name.
"""
from alembic import op
import sqlalchemy as sa


revision = "0014_source_kind"
down_revision = "0013b"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("user_account", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_name", sa.String(length=200), nullable=True))
    conn = op.get_bind()
    conn.execute(sa.text(
        "UPDATE user_account SET kind = 'source' WHERE kind = 'human' AND password_hash IS NULL AND ("
        "username LIKE 'whowhen:%' OR username LIKE 'mad:%' OR ("
        " EXISTS (SELECT 1 FROM annotation a WHERE a.user_id = user_account.id AND a.origin = 'audit')"
        " AND NOT EXISTS (SELECT 1 FROM annotation a WHERE a.user_id = user_account.id AND a.origin <> 'audit')))"))
    conn.execute(sa.text("UPDATE user_account SET source_name = 'Who&When' WHERE kind = 'source' "
                         "AND username LIKE 'whowhen:%'"))
    conn.execute(sa.text("UPDATE user_account SET source_name = 'MAD (MAST)' WHERE kind = 'source' "
                         "AND username LIKE 'mad:%'"))
    conn.execute(sa.text("UPDATE user_account SET source_name = substr(username, 7) WHERE kind = 'judge' "
                         "AND username LIKE 'judge:%'"))
    conn.execute(sa.text("UPDATE user_account SET source_name = substr(username, 10) WHERE kind = 'judge' "
                         "AND username LIKE 'detector:%'"))
    conn.execute(sa.text("UPDATE user_account SET source_name = username WHERE kind IN ('judge', 'source') "
                         "AND source_name IS NULL"))


def downgrade() -> None:
    conn = op.get_bind()
    conn.execute(sa.text("UPDATE user_account SET kind = 'human' WHERE kind = 'source'"))
    with op.batch_alter_table("user_account", schema=None) as batch_op:
        batch_op.drop_column("source_name")
