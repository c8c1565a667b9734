"""Shared fixtures. Every storage test runs on SQLite and on PostgreSQL (a fresh database per run).

PostgreSQL is reached through A2A_TEST_PG_ADMIN_URL (default: the local server with trust auth);
a database named a2annotate_test_<random> is created for the session and dropped at the end.
"""
from __future__ import annotations

import os
import secrets

# Jobs run at once in the process that enqueues them (no worker needed); the tests that exercise
# real workers and brokers (tests/jobs) set JOBS_BROKER for the processes they start.
os.environ.setdefault("JOBS_BROKER", "immediate")
from collections.abc import Iterator

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


@pytest.fixture(scope="session", params=BACKENDS)
def db_url(request, tmp_path_factory) -> Iterator[str]:
    """A migrated database URL (taxonomies registered), one per backend per test session."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.db'}"
        upgrade(url)
        _sync_taxonomies(url)
        yield url
    else:
        name, url = _create_pg_database()
        try:
            upgrade(url)
            _sync_taxonomies(url)
            yield url
        finally:
            _drop_pg_database(name)


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
    tables = [t for t in reversed(SQLModel.metadata.sorted_tables) if t.name not in KEEP_TABLES]
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("TRUNCATE " + ", ".join(f'"{t.name}"' for t in tables) + " RESTART IDENTITY CASCADE"))
        else:
            for t in tables:
                conn.execute(t.delete())


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


def pytest_collection_modifyitems(config, items) -> None:
    """For `make test` (`-n 2 --dist loadgroup`): the tests of a module that builds something per
    module (a module-scoped fixture: a live server, a browser, a corpus) run on one worker, so it
    is built once; every other test is scheduled on its own, so the two workers finish together.
    Modules marked `xdist_group` themselves keep their group (the live-server modules share one)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        defs = getattr(item, "_fixtureinfo", None)
        if defs and any(fd.scope == "module" for fds in defs.name2fixturedefs.values() for fd in fds):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
