"""data version: a counter bumped by database triggers on every write to the tables the stored
results read (app.results.service.RESULT_TABLES), so a cached GET reads one small table instead of
scanning those ten

Revision ID: 0015_data_version
Revises: 0014_results

The counter is the sum of ``data_version.version`` over its rows. PostgreSQL: one AFTER ... FOR
EACH STATEMENT trigger per table (COPY and multi-row INSERTs fire it once, TRUNCATE too) notes
the transaction, once (a transaction-local setting remembers it; a rolled-back savepoint forgets
it with its note), in ``data_version_pending``; a deferred constraint trigger on that note bumps
the row ``pg_backend_pid() % 16`` when the transaction commits. So the counter's row lock is the
last one a writer takes and is held only while it commits: it cannot deadlock with the writer's
other row locks, and concurrent writers on different connections rarely wait for the same row.
SQLite (row triggers only; its writers take turns anyway): each written row bumps row 0. The
bump is in the writer's transaction, so it is visible exactly when its data are, to every process.

Annotations and labels count only when they are (or were) submitted, or belong to a submitted
annotation (the results read nothing else): a draft's autosave bumps nothing, its submission or
withdrawal does (the annotation's status changes). These two tables have row triggers on
PostgreSQL too, whose WHEN skips every row once the transaction is noted. A label whose
annotation is gone counts. Every path of the app writes a label in the transaction that inserts
or updates its annotation, whose row lock orders it after a concurrent submission; a tool that
wrote labels alone, onto a draft being submitted at that moment by another connection, could go
unseen until the next counted write.

The table list and the user columns are frozen here as they were at this revision: a later change
to what the results read changes them in a migration of its own.
"""
import sqlalchemy as sa
from alembic import op

revision = "0015_data_version"
down_revision = "0014_results"
branch_labels = None
depends_on = None

#: the tables the stored results read (app.results.service.RESULT_TABLES at this revision)
TABLES = ("run", "scenario", "principal", "agent", "user_account", "taxonomy", "annotation", "label",
          "gold_run", "gold_label", "study")
#: of user_account only these columns are read (a login, logout or password change bumps nothing)
USER_COLUMNS = ("id", "username", "kind", "source_name")
SLOTS = 16
FUNCTION = "a2a_bump_data_version"
WRITTEN = "a2a_data_version_written"
SETTING = "a2a.data_version_bumped"


#: the tables whose rows count only when they are, or belong to, a submitted annotation (the
#: results read submitted annotations only: a draft's autosave bumps nothing)
SUBMITTED_ONLY = ("annotation", "label")
NOTE = "a2a_note_data_write"
ANNOTATION = "a2a_annotation_written"
LABEL = "a2a_label_written"
GUARD = f"current_setting('{SETTING}', true) IS DISTINCT FROM 'on'"


def _pg_upgrade() -> None:
    # a write: note the transaction in data_version_pending, once per transaction
    op.execute(f"""
CREATE OR REPLACE FUNCTION {NOTE}() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF {GUARD} THEN
        INSERT INTO data_version_pending (txid) VALUES (txid_current()) ON CONFLICT DO NOTHING;
        PERFORM set_config('{SETTING}', 'on', true);
    END IF;
END
$$""")
    op.execute(f"""
CREATE OR REPLACE FUNCTION {WRITTEN}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {NOTE}();
    RETURN NULL;
END
$$""")
    # an annotation counts when it is or was submitted
    op.execute(f"""
CREATE OR REPLACE FUNCTION {ANNOTATION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status = 'submitted' THEN PERFORM {NOTE}(); END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF OLD.status = 'submitted' THEN PERFORM {NOTE}(); END IF;
    ELSIF NEW.status = 'submitted' OR OLD.status = 'submitted' THEN
        PERFORM {NOTE}();
    END IF;
    RETURN NULL;
END
$$""")
    # a label counts unless its annotation is known and not submitted (a draft's): an annotation
    # that changes status is itself written, and counted, in that transaction
    op.execute(f"""
CREATE OR REPLACE FUNCTION {LABEL}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        SELECT status INTO st FROM annotation WHERE id = OLD.annotation_id;
        IF NOT FOUND OR st = 'submitted' THEN PERFORM {NOTE}(); RETURN NULL; END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        SELECT status INTO st FROM annotation WHERE id = NEW.annotation_id;
        IF NOT FOUND OR st = 'submitted' THEN PERFORM {NOTE}(); END IF;
    END IF;
    RETURN NULL;
END
$$""")
    # at commit (a deferred constraint trigger on that note): the bump, the last lock the
    # transaction takes, held only while it commits, so it can never close a cycle of lock waits
    op.execute(f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM data_version_pending WHERE txid = NEW.txid;
    INSERT INTO data_version (slot, version) VALUES (pg_backend_pid() % {SLOTS}, 1)
        ON CONFLICT (slot) DO UPDATE SET version = data_version.version + 1;
    RETURN NULL;
END
$$""")
    op.execute("CREATE CONSTRAINT TRIGGER a2a_data_version_commit AFTER INSERT ON data_version_pending "
               f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {FUNCTION}()")
    for t in TABLES:
        if t in SUBMITTED_ONLY:  # row triggers, called only until the transaction is noted
            op.execute(f'CREATE TRIGGER a2a_data_version AFTER TRUNCATE ON "{t}" '
                       f"FOR EACH STATEMENT EXECUTE FUNCTION {WRITTEN}()")
            op.execute(f'CREATE TRIGGER a2a_data_version_row AFTER INSERT OR UPDATE OR DELETE ON "{t}" '
                       f"FOR EACH ROW WHEN ({GUARD}) EXECUTE FUNCTION "
                       f"{ANNOTATION if t == 'annotation' else LABEL}()")
            continue
        update = f"UPDATE OF {', '.join(USER_COLUMNS)}" if t == "user_account" else "UPDATE"
        op.execute(f'CREATE TRIGGER a2a_data_version AFTER INSERT OR {update} OR DELETE OR TRUNCATE ON "{t}" '
                   f"FOR EACH STATEMENT EXECUTE FUNCTION {WRITTEN}()")


def _sqlite_when(t: str, event: str) -> str:
    if t == "annotation":
        return {"INSERT": " WHEN NEW.status = 'submitted'", "DELETE": " WHEN OLD.status = 'submitted'",
                "UPDATE": " WHEN NEW.status = 'submitted' OR OLD.status = 'submitted'"}[event]
    if t == "label":
        def counts(row: str) -> str:
            return f"coalesce((SELECT status FROM annotation WHERE id = {row}.annotation_id), 'submitted') = 'submitted'"
        return {"INSERT": f" WHEN {counts('NEW')}", "DELETE": f" WHEN {counts('OLD')}",
                "UPDATE": f" WHEN {counts('NEW')} OR {counts('OLD')}"}[event]
    return ""


def _sqlite_upgrade() -> None:
    bump = ("INSERT INTO data_version (slot, version) VALUES (0, 1) "
            "ON CONFLICT (slot) DO UPDATE SET version = version + 1;")
    for t in TABLES:
        for event in ("INSERT", "UPDATE", "DELETE"):
            on = f"UPDATE OF {', '.join(USER_COLUMNS)}" if (t, event) == ("user_account", "UPDATE") else event
            op.execute(f'CREATE TRIGGER a2a_data_version_{t}_{event.lower()} AFTER {on} ON "{t}"'
                       f"{_sqlite_when(t, event)} BEGIN {bump} END")


def upgrade() -> None:
    op.create_table(
        "data_version",
        sa.Column("slot", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.create_table("data_version_pending", sa.Column("txid", sa.BigInteger(), primary_key=True,
                                                      autoincrement=False))
    op.bulk_insert(sa.table("data_version", sa.column("slot", sa.Integer()), sa.column("version", sa.BigInteger())),
                   [{"slot": i, "version": 0} for i in range(SLOTS)])
    if op.get_bind().dialect.name == "postgresql":
        _pg_upgrade()
    else:
        _sqlite_upgrade()
    # results stored under the fingerprint's versions (or under a counter before a downgrade) are
    # served stale once and recomputed
    op.execute("UPDATE stored_result SET data_version = NULL")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for t in TABLES:
            op.execute(f'DROP TRIGGER IF EXISTS a2a_data_version ON "{t}"')
            op.execute(f'DROP TRIGGER IF EXISTS a2a_data_version_row ON "{t}"')
        op.execute("DROP TRIGGER IF EXISTS a2a_data_version_commit ON data_version_pending")
        for fn in (WRITTEN, ANNOTATION, LABEL, FUNCTION, NOTE):
            op.execute(f"DROP FUNCTION IF EXISTS {fn}()")
    else:
        for t in TABLES:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS a2a_data_version_{t}_{event}")
    op.drop_table("data_version_pending")
    op.drop_table("data_version")
    op.execute("UPDATE stored_result SET data_version = NULL")
