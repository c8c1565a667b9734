"""Engine and session helpers. Services take a `Session`; nothing else here knows about the web."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from app.core.config import get_settings


def json_dumps(value) -> str:
    """How JSON columns are written: compact, non-ASCII kept (the text the exports write, so
    they can pass it through without decoding; see app.exports.arrow)."""
    if not value and isinstance(value, (dict, list)):  # the most common values, without the encoder
        return "{}" if isinstance(value, dict) else "[]"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def make_engine(url: str) -> Engine:
    """Create an engine for `url`; SQLite gets foreign keys on and a friendly busy timeout."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               json_serializer=json_dumps)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # pragma: no cover - trivial
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, json_serializer=json_dumps)


@lru_cache
def get_engine() -> Engine:
    return make_engine(get_settings().database_url)


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with Session(engine or get_engine()) as session:
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise
