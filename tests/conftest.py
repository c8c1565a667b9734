"""Shared fixtures. Every storage test runs on SQLite and on PostgreSQL (a fresh database per run).

PostgreSQL is reached through A2A_TEST_PG_ADMIN_URL (default: the local server with trust auth);
a database named a2annotate_test_<random> is created for the session and dropped at the end.
"""
from __future__ import annotations

import json
import os
import secrets

# Jobs run at once in the process that enqueues them (no worker needed); the tests that exercise
# real workers and brokers (tests/jobs) set JOBS_BROKER for the processes they start.
os.environ.setdefault("JOBS_BROKER", "immediate")
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel

import app.models  # noqa: F401
from app.core.db import make_engine
from app.core.migrate import upgrade

PG_ADMIN_URL = os.environ.get("A2A_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
BACKENDS = ["sqlite", "postgresql"]


def _create_pg_database() -> tuple[str, str]:
    name = f"a2annotate_test_{os.getpid()}_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    return name, f"{base}/{name}"


def _drop_pg_database(name: str) -> None:
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def _databases(tmp_path_factory) -> Iterator:
    """Both backends' migrated databases of this test session, each made on first use and kept
    to the end: `db_url` switches between them as the (reordered) tests ask for one or the other,
    without dropping and making a database again at each switch."""
    urls: dict[str, str] = {}
    pg_names: list[str] = []

    def get(backend: str) -> str:
        if backend not in urls:
            if backend == "sqlite":
                url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.db'}"
            else:
                name, url = _create_pg_database()
                pg_names.append(name)
            upgrade(url)
            _sync_taxonomies(url)
            urls[backend] = url
        return urls[backend]

    try:
        yield get
    finally:
        for name in pg_names:
            _drop_pg_database(name)


@pytest.fixture(scope="session", params=BACKENDS)
def db_url(request, _databases) -> str:
    """A migrated database URL (taxonomies registered), one per backend per test session."""
    return _databases(request.param)


def _sync_taxonomies(url: str) -> None:
    from app.core.config import get_settings
    from app.taxonomies.service import sync_builtin

    engine = make_engine(url)
    with Session(engine) as session:
        sync_builtin(session, get_settings().taxonomy_dir)
        session.commit()
    engine.dispose()


KEEP_TABLES = {"taxonomy", "alembic_version"}


def _truncate(engine: Engine) -> None:
    """Empty every table but KEEP_TABLES and restart their id sequences.

    On PostgreSQL a TRUNCATE costs per table (new files for the table and each of its indexes),
    and it must name every table that references a truncated one, rows or not: truncating them
    all took 0.1-0.7 s per test. So one query finds the tables that hold rows, those are emptied
    with DELETE (with triggers off, as TRUNCATE fires no row trigger; children first) and every
    sequence of the emptied tables is set back to its start (also those of empty tables whose
    sequence moved, e.g. by a rolled-back insert): the end state of TRUNCATE ... RESTART IDENTITY."""
    tables = [t for t in reversed(SQLModel.metadata.sorted_tables) if t.name not in KEEP_TABLES]
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            names = [t.name for t in tables]
            full = conn.execute(text(" UNION ALL ".join(
                f'SELECT {i} WHERE EXISTS (SELECT 1 FROM "{n}")' for i, n in enumerate(names)))).scalars().all()
            if full and _pg_superuser(conn):
                conn.execute(text("SET LOCAL session_replication_role = replica"))  # no triggers, as TRUNCATE
            for i in sorted(full):  # `tables` lists children before parents
                conn.execute(text(f'DELETE FROM "{names[i]}"'))
            conn.execute(text(
                "SELECT setval(d.objid::regclass, s.seqstart, false) FROM pg_depend d"
                " JOIN pg_class t ON t.oid = d.refobjid JOIN pg_sequence s ON s.seqrelid = d.objid"
                " WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass"
                " AND d.deptype IN ('a', 'i') AND t.relname = ANY(:names)"
                " AND t.relnamespace = current_schema()::regnamespace"), {"names": names})
        else:
            for t in tables:
                conn.execute(t.delete())


def _pg_superuser(conn) -> bool:
    return bool(conn.execute(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar())


@pytest.fixture
def engine(db_url) -> Iterator[Engine]:
    """An engine on an emptied database (taxonomies kept)."""
    eng = make_engine(db_url)
    _truncate(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def session(engine) -> Iterator[Session]:
    with Session(engine) as s:
        yield s


#: worker-seconds (setup + call + teardown) of each test module in a full run, measured with
#: `pytest -n 2 --dist worksteal --durations=0`; see pytest_collection_modifyitems
DURATIONS = Path(__file__).with_name("durations.json")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The slowest modules first (by the recorded table; a module not in it last), each module's
    tests together in the order pytest gave them (a module's shared server, browser or corpus is
    built once). Under --dist worksteal each worker takes a contiguous half and the one that runs
    out takes tests from the end of the other's: with the long tests at the front nothing long is
    left for the end, where a 40 s test would keep one worker busy while the other waits."""
    try:
        table = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(item.nodeid.split("::", 1)[0], i)
    order = {i: n for n, i in enumerate(items)}
    items.sort(key=lambda it: (-float(table.get(it.nodeid.split("::", 1)[0], 0.0)),
                               first[it.nodeid.split("::", 1)[0]], order[it]))
