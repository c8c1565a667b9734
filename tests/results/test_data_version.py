"""The data version (app.results.service.data_version) is a counter bumped by database triggers
(migration 0015_data_version) on every write to the tables the stored results read: a stored
result goes stale after each kind of write, whichever path or process makes it; writes to other
tables leave it fresh; a cached GET reads none of the big tables; two processes writing at once
lose no bump. Both databases."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, select

from app.annotations.service import save_annotation
from app.auth.service import create_token, create_user, get_user
from app.core.config import get_settings
from app.core.db import make_engine
from app.ingest.canonical import normalize_run
from app.ingest.items import ImportItem
from app.ingest.loader import load_items, store_run
from app.results import service as results
from app.results.service import COMPUTATIONS, RESULT_TABLES, data_version, get_result
from app.runs.models import Run
from app.taxonomies.service import latest
from tests.agreement_db import _hand
from tests.annotations.factories import make_run, raw_run

AGREEMENT = {"study": None, "taxonomy": None, "family": None, "annotators": None, "include_judges": False,
             "level": "run", "n_boot": 10, "seed": 1, "confidence": 0.95}


@pytest.fixture
def corpus(engine, tmp_path, monkeypatch):
    """The hand-worked corpus plus an unlabelled run r9 and a study; jobs go to a real (SQLite)
    queue no worker reads, so a stale result stays stale until a test looks."""
    from app.studies.service import create_study

    monkeypatch.setenv("JOBS_BROKER", f"sqlite:///{tmp_path / 'jobs.db'}")
    get_settings.cache_clear()
    with Session(engine) as s:
        _hand.build(s)
        make_run(s, "r9")
        create_study(s, "pilot", selection={"family": ["commerce"]}, leads=["rev"])
        s.commit()
    other = make_engine(engine.url.render_as_string(hide_password=False))  # "another process"
    yield other
    other.dispose()
    get_settings.cache_clear()


def _fresh_agreement(engine: Engine):
    with Session(engine) as s:
        got = get_result(s, "agreement", AGREEMENT)
        return got


def _pk(s: Session, run_id: str) -> int:
    return s.exec(select(Run.id).where(Run.run_id == run_id)).one()


# each write kind, made on the other engine, as the app (or an admin's tool) makes it -----------------


def _label_saved(e: Engine) -> None:
    with Session(e) as s:
        save_annotation(s, get_user(s, "b"), s.get(Run, _pk(s, "r2")), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        s.commit()


def _draft(e: Engine, user: str, run: str, status: str, mode: str = "CF1") -> None:
    with Session(e) as s:
        save_annotation(s, get_user(s, user), s.get(Run, _pk(s, run)), latest(s, "a2-failures"),
                        [{"mode": mode, "agent": "buyer_agent", "evidence": [1]}], status=status)
        s.commit()


def _draft_submitted(e: Engine) -> None:  # d's draft on r1 (tests/agreement_db/_hand.py)
    _draft(e, "d", "r1", "submitted")


def _submission_withdrawn(e: Engine) -> None:  # a's submitted r1 back to a draft
    _draft(e, "a", "r1", "draft")


def _runs_imported(e: Engine) -> None:  # the loader: multi-row INSERT + COPY (PostgreSQL) / executemany
    summary = load_items(e, [ImportItem(run=normalize_run(raw_run(f"n{i}"))) for i in range(3)])
    assert summary.imported == 3


def _run_replaced(e: Engine) -> None:  # re-import with other content, replace: rewritten in place
    with Session(e) as s:
        store_run(s, normalize_run(raw_run("r9", status="failed")), replace=True)
        s.commit()


def _run_deleted(e: Engine) -> None:  # an admin's SQL: its principals and agents go by cascade
    with e.begin() as c:
        c.execute(text("DELETE FROM run WHERE run_id = 'r9'"))


def _gold_adjudicated(e: Engine) -> None:
    from app.agreement import adjudication

    with Session(e) as s:
        run, tax, rev = s.get(Run, _pk(s, "r1")), latest(s, "a2-failures"), get_user(s, "rev")
        gold = adjudication.open_adjudication(s, run, tax, rev)
        adjudication.accept(s, gold, run, tax, "CF1", "buyer_agent", rev)
        adjudication.finish(s, gold, run, rev, "agreed")
        s.commit()


def _detector_labels(e: Engine) -> None:  # machine annotations (ORM + a Core multi-row INSERT)
    from app.detectors import DetectorResult
    from app.detectors.service import registry, store_results

    with Session(e) as s:
        det = registry().detectors[0]
        store_results(s, s.get(Run, _pk(s, "r3")), latest(s, "a2-failures"), [DetectorResult(det, labels=[
            {"mode": "CF1", "agent": "buyer_agent", "principals": [], "evidence": [1], "note": "x"}])])
        s.commit()


def _user_becomes_judge(e: Engine) -> None:  # an edit in place: no new row, no new id
    with e.begin() as c:
        c.execute(text("UPDATE user_account SET kind = 'judge' WHERE username = 'c'"))


def _user_created(e: Engine) -> None:
    with Session(e) as s:
        create_user(s, "newcomer", "annotator")
        s.commit()


def _taxonomy_edited(e: Engine) -> None:  # same value written back: still a write to the table
    with e.begin() as c:
        c.execute(text("UPDATE taxonomy SET name = name WHERE key = 'a2-failures'"))


def _scenario_edited(e: Engine) -> None:
    with e.begin() as c:
        c.execute(text("UPDATE scenario SET alignment = 'cooperative' WHERE family = 'travel'"))


def _agent_edited(e: Engine) -> None:
    with e.begin() as c:
        c.execute(text("UPDATE agent SET model = 'model-z' WHERE agent_id = 'buyer_agent'"))


def _principal_edited(e: Engine) -> None:
    with e.begin() as c:
        c.execute(text("UPDATE principal SET score = 0.5 WHERE principal_id = 'seller'"))


def _study_selection_changed(e: Engine) -> None:
    from app.studies.service import get_study, update_selection

    with Session(e) as s:
        update_selection(s, get_study(s, "pilot"), {"family": ["travel"]})
        s.commit()


def _labels_bulk_copied(e: Engine) -> None:  # raw bulk load beside the app: COPY on PostgreSQL
    with e.begin() as c:
        ann = c.execute(text("SELECT min(id) FROM annotation")).scalar()
        if e.dialect.name == "postgresql":
            cur = c.connection.dbapi_connection.cursor()
            with cur.copy("COPY label (annotation_id, mode, agent, principals, evidence, time_ms, created_at) "
                          "FROM STDIN") as cp:
                for _ in range(3):
                    cp.write_row((ann, "GR1", "seller_agent", "[]", "[2]", 0, "2026-01-01"))
        else:
            c.execute(text("INSERT INTO label (annotation_id, mode, agent, principals, evidence, time_ms, created_at) "
                           "VALUES (:a, 'GR1', 'seller_agent', '[]', '[2]', 0, '2026-01-01')"), [{"a": ann}] * 3)


WRITES: dict[str, Callable[[Engine], None]] = {
    "label saved": _label_saved, "draft submitted": _draft_submitted, "submission withdrawn": _submission_withdrawn,
    "runs imported": _runs_imported, "run replaced": _run_replaced,
    "run deleted": _run_deleted, "gold adjudicated": _gold_adjudicated, "detector labels": _detector_labels,
    "user becomes a judge": _user_becomes_judge, "user created": _user_created,
    "taxonomy edited": _taxonomy_edited, "scenario edited": _scenario_edited, "agent edited": _agent_edited,
    "principal edited": _principal_edited, "study selection changed": _study_selection_changed,
    "labels bulk-copied": _labels_bulk_copied,
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_stored_result_goes_stale_after_each_kind_of_write(corpus, engine, write):
    first = _fresh_agreement(engine)
    assert first.state == "fresh"
    with Session(engine) as s:
        v0 = data_version(s)
    WRITES[write](corpus)
    with Session(engine) as s:
        assert data_version(s) != v0
    again = _fresh_agreement(engine)
    assert again.state == "stale" and again.job_id is not None
    assert again.payload == first.payload  # the last result, served while the job recomputes


def _drafts_saved(e: Engine) -> None:  # autosaves: d's draft again, a new draft by ann, its labels edited
    _draft(e, "d", "r1", "draft", "GR1")
    _draft(e, "ann", "r2", "draft")
    _draft(e, "ann", "r2", "draft", "GR1")


def _draft_deleted(e: Engine) -> None:
    with e.begin() as c:
        c.execute(text("DELETE FROM label WHERE annotation_id IN (SELECT id FROM annotation WHERE status = 'draft')"))
        c.execute(text("DELETE FROM annotation WHERE status = 'draft'"))


def _logged_out(e: Engine) -> None:  # user columns no result reads
    with e.begin() as c:
        c.execute(text("UPDATE user_account SET session_generation = session_generation + 1, role = 'reviewer', "
                       "password_hash = 'x' WHERE username = 'a'"))


def _token_created(e: Engine) -> None:
    with Session(e) as s:
        create_token(s, get_user(s, "rev"))
        s.commit()


def _job_created(e: Engine) -> None:
    from app.jobs import service as jobs

    with Session(e) as s:
        jobs.create_job(s, "result", {"kind": "agreement", "params": {}}, None)
        s.commit()


def _member_added(e: Engine) -> None:
    from app.studies.service import get_study, set_member

    with Session(e) as s:
        set_member(s, get_study(s, "pilot"), "a", "annotator")
        s.commit()


def _rolled_back(e: Engine) -> None:
    with Session(e) as s:
        save_annotation(s, get_user(s, "b"), s.get(Run, _pk(s, "r2")), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        s.flush()  # written, and the triggers fired, inside the transaction
        s.rollback()


OTHER_WRITES: dict[str, Callable[[Engine], None]] = {
    "drafts saved": _drafts_saved, "drafts deleted": _draft_deleted, "logout, role and password": _logged_out, "token created": _token_created, "job created": _job_created,
    "study member added": _member_added, "label save rolled back": _rolled_back,
}


@pytest.mark.parametrize("write", list(OTHER_WRITES))
def test_writes_the_results_do_not_read_leave_it_fresh(corpus, engine, write):
    assert _fresh_agreement(engine).state == "fresh"
    n = COMPUTATIONS["agreement"]
    OTHER_WRITES[write](corpus)
    again = _fresh_agreement(engine)
    assert again.state == "fresh" and COMPUTATIONS["agreement"] == n


# what the computations read, and the triggers on it ----------------------------------------------


def _tables_in(sql: str, names: set[str]) -> set[str]:
    """The tables a statement names: after FROM / JOIN / INTO / UPDATE, and as the qualifier of a
    column (``run.id``; SQLAlchemy qualifies every column, so a comma join is seen too)."""
    found = re.findall(r'\b(?:FROM|JOIN|INTO|UPDATE)\s+"?([a-z_]+)"?', sql, re.IGNORECASE)
    found += re.findall(r'"?\b([a-z_]+)"?\.', sql)
    return {m for m in found if m in names}


#: parameters of every stored kind, as its route resolves them (with a study where the kind takes one)
STUDY = ("pilot",)
KIND_PARAMS = {
    "agreement": {**AGREEMENT, "study": STUDY},
    "agreement_gold": {**AGREEMENT, "study": STUDY},
    "agreement_judges": {**AGREEMENT, "study": STUDY},
    "agreement_attribution": {**AGREEMENT, "study": STUDY, "k": 1},
    "agreement_disagreements": {**AGREEMENT, "study": STUDY, "page": 1, "page_size": 10},
    "disagreements_page": {**AGREEMENT, "study": STUDY, "page": 1, "page_size": 10},
    "agreement_judges_page": {**AGREEMENT, "study": STUDY},
    "report_outcomes": {"study": STUDY, "threshold": 0.5, "by": "agent", "source": "auto"},
    "report_blind_spots": {"study": STUDY, "threshold": 0.5, "source": "auto"},
    "report_crossplay": {"study": STUDY, "threshold": 0.5, "by": "model", "value": "a_mean_score"},
    "reports_page": {"study": STUDY, "threshold": 0.5, "by": "agent", "source": "auto", "crossplay": "model"},
    "detector_scores": {"reference": "truth", "level": "run", "n_boot": 10, "seed": 0},
}


def test_the_computations_read_only_the_tables_that_bump_the_version(corpus, engine):
    """Every stored kind, computed on data in every table it may read (gold included): the tables
    its statements name are all in RESULT_TABLES. A computation that starts reading another
    table fails here until the table is added there (and given triggers, next test)."""
    from app.studies.service import get_study

    _gold_adjudicated(engine)
    _detector_labels(engine)
    kinds = results._kinds()
    assert set(KIND_PARAMS) == set(kinds), "give every stored kind its parameters here"
    names = set(SQLModel.metadata.tables)
    seen: dict[str, set[str]] = {}
    current: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if current:
            seen.setdefault(current[0], set()).update(_tables_in(statement, names))

    event.listen(engine, "before_cursor_execute", record)
    try:
        with Session(engine) as s:
            study_id = get_study(s, "pilot").id
            for kind, params in KIND_PARAMS.items():
                p = {**params, "study": (study_id, '{"family": ["commerce"]}')} if params.get("study") else params
                current[:] = [kind]
                kinds[kind](s, p)
                current.clear()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    for kind, tables in seen.items():
        assert tables <= set(RESULT_TABLES), (kind, tables - set(RESULT_TABLES))
    assert {"label", "annotation", "run", "gold_label"} <= set().union(*seen.values())  # the listener saw them


def test_drafts_change_no_computation(corpus, engine):
    """Why a draft bumps nothing: every stored kind computes the same payload after drafts are
    saved, added and deleted (the computations read submitted annotations only)."""
    import json

    from app.studies.service import get_study

    kinds = results._kinds()

    def payloads() -> str:
        with Session(engine) as s:
            study_id = get_study(s, "pilot").id
            out = {}
            for kind, params in KIND_PARAMS.items():
                p = {**params, "study": (study_id, '{"family": ["commerce"]}')} if params.get("study") else params
                out[kind] = kinds[kind](s, p)
            return json.dumps(out, sort_keys=True, default=str)

    before = payloads()
    _drafts_saved(corpus)
    assert payloads() == before
    _draft_deleted(corpus)
    assert payloads() == before
    _draft_submitted(corpus)
    assert payloads() != before  # and the test can tell


def _triggers(engine: Engine) -> dict[str, set[str]]:
    """table -> the write events whose triggers bump the data version."""
    out: dict[str, set[str]] = {}
    with engine.connect() as c:
        if engine.dialect.name == "postgresql":
            bits = {4: "insert", 8: "delete", 16: "update", 32: "truncate"}
            for table, tgtype in c.execute(text(
                    "SELECT c.relname, t.tgtype FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                    "JOIN pg_proc p ON p.oid = t.tgfoid WHERE p.proname IN "
                    "('a2a_data_version_written', 'a2a_annotation_written', 'a2a_label_written')")):
                # statement-level (one call per COPY), but for the two whose rows are looked at
                assert not tgtype & 1 or table in ("annotation", "label"), table
                out.setdefault(table, set()).update(name for bit, name in bits.items() if tgtype & bit)
        else:
            for table, sql in c.execute(text("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")):
                if "data_version" in sql:
                    out.setdefault(table, set()).update(
                        e.lower() for e in re.findall(r"AFTER (INSERT|UPDATE|DELETE)", sql, re.IGNORECASE))
    return out


def test_every_result_table_carries_the_triggers(engine):
    found = _triggers(engine)
    for table in RESULT_TABLES:
        assert {"insert", "update", "delete"} <= found.get(table, set()), table
    assert set(found) == set(RESULT_TABLES)  # and no other table bumps it


# a cached GET ----------------------------------------------------------------------------------------


def test_a_cached_get_reads_no_big_table(corpus, engine):
    from fastapi.testclient import TestClient

    from app.main import create_app

    with Session(engine) as s:
        tok = create_token(s, get_user(s, "rev"))
        s.commit()
    client = TestClient(create_app(engine))
    rev = {"Authorization": f"Bearer {tok}"}
    assert client.get("/api/v1/agreement", params={"n_boot": 10}, headers=rev).status_code == 200
    statements: list[str] = []
    listen = lambda conn, cursor, statement, *a: statements.append(statement)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        r = client.get("/api/v1/agreement", params={"n_boot": 10}, headers=rev)
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert r.status_code == 200 and r.json()["stale"] is False
    touched = set().union(*(_tables_in(q, set(SQLModel.metadata.tables)) for q in statements))
    assert not touched & {"label", "annotation", "run", "agent", "principal", "gold_label", "gold_run", "event"}, \
        touched
    assert "data_version" in touched and "stored_result" in touched


# concurrent writers in two processes -------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, time
    from sqlalchemy import text
    from app.core.db import make_engine, session_scope
    url, n, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    engine = make_engine(url)
    while time.time() < start:
        time.sleep(0.001)
    for i in range(n):  # one label per transaction, as an annotator's save is one transaction
        with session_scope(engine, write=True) as s:
            ann = s.execute(text("SELECT min(id) FROM annotation")).scalar()
            s.execute(text("INSERT INTO label (annotation_id, mode, agent, principals, evidence, time_ms, "
                           "created_at) VALUES (:a, 'GR1', 'seller_agent', '[]', '[2]', 0, '2026-01-01')"), {"a": ann})
""")


def test_two_processes_writing_at_once_lose_no_bump(corpus, engine):
    import time

    first = _fresh_agreement(engine)
    assert first.state == "fresh"
    with Session(engine) as s:
        v0 = int(data_version(s))
        labels0 = s.exec(text("SELECT count(*) FROM label")).one()[0]
    n = 40
    url = engine.url.render_as_string(hide_password=False)
    start = time.time() + 2
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(n), str(start)]) for _ in range(2)]
    assert [p.wait(120) for p in procs] == [0, 0]
    with Session(engine) as s:
        assert int(data_version(s)) == v0 + 2 * n  # one bump per committed transaction, none lost
        assert s.exec(text("SELECT count(*) FROM label")).one()[0] == labels0 + 2 * n
    assert _fresh_agreement(engine).state == "stale"


# the migration, both ways ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_migration_upgrades_and_downgrades(backend, tmp_path):
    from alembic import command

    from app.core.migrate import alembic_config, upgrade
    from tests.conftest import _create_pg_database, _drop_pg_database

    name, url = (None, f"sqlite:///{tmp_path / 'm.db'}") if backend == "sqlite" else _create_pg_database()
    engine = make_engine(url)
    try:
        upgrade(url)
        assert set(_triggers(engine)) == set(RESULT_TABLES)
        with engine.begin() as c:
            c.execute(text("INSERT INTO stored_result (kind, key, params, data_version, updated_at) "
                           "VALUES ('agreement', 'k', '{}', '7', '2026-01-01')"))
            c.execute(text("INSERT INTO user_account (username, role, kind, is_active, created_at, session_generation) "
                           "VALUES ('x', 'annotator', 'human', true, '2026-01-01', 0)"))
        with Session(engine) as s:
            assert data_version(s) == "1"
        command.downgrade(alembic_config(url), "0014_results")
        assert _triggers(engine) == {}
        with engine.begin() as c:  # writes work without the counter
            c.execute(text("UPDATE user_account SET kind = 'judge'"))
            assert "data_version" not in {r[0] for r in c.execute(text(
                "SELECT name FROM sqlite_master" if backend == "sqlite" else
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))}
        upgrade(url)
        assert set(_triggers(engine)) == set(RESULT_TABLES)
        with engine.connect() as c:  # a result stored before is stale, not matched by a restarted count
            assert c.execute(text("SELECT data_version FROM stored_result")).scalar() is None
    finally:
        engine.dispose()
        if name is not None:
            _drop_pg_database(name)


# savepoints, and when PostgreSQL takes the counter's lock ----------------------------------------------

LABEL = ("INSERT INTO label (annotation_id, mode, agent, principals, evidence, time_ms, created_at) "
         "SELECT min(id), 'GR1', 'seller_agent', '[]', '[2]', 0, '2026-01-01' FROM annotation")


def test_a_rolled_back_savepoint_takes_its_bump_with_it(corpus, engine):
    with Session(engine) as s:
        v0 = data_version(s)
    with corpus.begin() as c:  # the loader's way: a batch in a savepoint, rolled back on failure
        sp = c.begin_nested()
        c.execute(text(LABEL))
        sp.rollback()
    with Session(engine) as s:
        assert data_version(s) == v0
    with corpus.begin() as c:
        sp = c.begin_nested()
        c.execute(text(LABEL))
        sp.rollback()
        c.execute(text(LABEL))  # written after: bumps again
    with Session(engine) as s:
        assert int(data_version(s)) == int(v0) + 1


@pytest.fixture(scope="module")
def pg_url():
    """A PostgreSQL database of this module's own, migrated."""
    from app.core.migrate import upgrade
    from tests.conftest import _create_pg_database, _drop_pg_database

    name, url = _create_pg_database()
    try:
        upgrade(url)
        yield url
    finally:
        _drop_pg_database(name)


def test_postgresql_bumps_only_when_the_writer_commits(pg_url):
    """A writer holds no lock on the counter until it commits, so the counter can never be the
    lock that closes a cycle (writer A bumps, then waits for a row writer B holds, while B waits
    for A's counter row): another connection locks every counter row with NOWAIT meanwhile."""
    engine = make_engine(pg_url)
    try:
        with Session(engine) as s:
            create_user(s, "w", "annotator")
            s.commit()
            v0 = int(data_version(s))
        with engine.connect() as writer, engine.connect() as other:
            writer.execute(text("UPDATE user_account SET kind = 'judge' WHERE username = 'w'"))
            writer.execute(text("UPDATE user_account SET kind = 'source' WHERE username = 'w'"))
            with other.begin():
                locked = other.execute(text("SELECT slot FROM data_version FOR UPDATE NOWAIT")).all()
            assert len(locked) == 16
            assert int(other.execute(text("SELECT sum(version) FROM data_version")).scalar()) == v0
            other.rollback()
            writer.commit()
            assert int(other.execute(text("SELECT sum(version) FROM data_version")).scalar()) == v0 + 1  # once
            assert other.execute(text("SELECT count(*) FROM data_version_pending")).scalar() == 0
    finally:
        engine.dispose()
