"""Engine and session helpers. Services take a `Session`; nothing else here knows about the web.

SQLite is set up for several writers at once (an import and annotators saving):

* WAL journal, so readers never wait for a writer and a writer never waits for readers;
* a busy timeout (`SQLITE_BUSY_TIMEOUT_MS`), so a writer waits for the write lock instead of
  failing at once with "database is locked";
* transactions are begun by SQLAlchemy (pysqlite's own implicit BEGIN is switched off, the
  documented recipe), deferred by default. A transaction that will write can ask for
  ``BEGIN IMMEDIATE`` with ``write_session(engine)`` / ``session_scope(engine, write=True)``:
  it takes the write lock first, waiting out the busy timeout, instead of reading first and then
  failing with SQLITE_BUSY_SNAPSHOT ("database is locked") when another writer committed in
  between, which no busy timeout can cure.
* writers of one process queue on a lock of the engine before ``BEGIN IMMEDIATE`` (held until
  the transaction ends): SQLite's busy handler polls with sleeps of up to 100 ms, so 20 writers
  waiting in it leave the database idle between turns and the last of them waits for seconds;
  on the lock the next writer starts as soon as the last one commits. Writers of other
  processes (a CLI import) still meet the busy timeout.
"""
from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from app.core.config import get_settings

#: execution option asking SQLite for BEGIN IMMEDIATE (write lock at the start of the transaction)
SQLITE_BEGIN = "a2a_sqlite_begin"


def json_dumps(value) -> str:
    """How JSON columns are written: compact, non-ASCII kept (the text the exports write, so
    they can pass it through without decoding; see app.exports.arrow)."""
    if not value and isinstance(value, (dict, list)):  # the most common values, without the encoder
        return "{}" if isinstance(value, dict) else "[]"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def other_processes_can_open(engine: Engine) -> bool:
    """Whether another process opening this engine's URL reaches the same database (not for an
    in-memory SQLite one, which lives in this process only)."""
    url = engine.url
    return not (engine.dialect.name == "sqlite" and (
        not url.database or url.database == ":memory:" or "mode=memory" in str(url)))


def make_engine(url: str) -> Engine:
    """Create an engine for `url`; SQLite gets foreign keys on, WAL, a busy timeout and
    SQLAlchemy-controlled transactions (see the module docstring)."""
    if url.startswith("sqlite"):
        busy_ms = get_settings().sqlite_busy_timeout_ms
        kw = {}
        if url.startswith("sqlite:///") and ":memory:" not in url and "mode=memory" not in url:
            # a connection per worker thread of the server (40): beyond a pool of 5 every request
            # waited for one or opened and closed its own (connect and pragmas each time)
            kw = {"pool_size": 20, "max_overflow": 30}
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": busy_ms / 1000},
                               json_serializer=json_dumps, **kw)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # pragma: no cover - trivial
            dbapi_conn.isolation_level = None  # no implicit BEGIN: SQLAlchemy emits it (below)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
            cur.close()

        # this process's writers take turns here (module docstring). Not first come first served
        # on purpose: a fair hand-over gives the turn to a thread that must then win the GIL back,
        # and next to a thread computing an agreement report the lock sat idle meanwhile (labels/s
        # fell 1.7-1.8x instead of 1.3x); with the plain lock a thread already running takes it.
        writers = threading.Lock()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # pragma: no cover - trivial
            if conn.get_execution_options().get(SQLITE_BEGIN) != "immediate":
                conn.exec_driver_sql("BEGIN")
                return
            # a thread that already holds it (two write sessions at once) waits out the busy
            # timeout and then meets SQLite's own busy handling, as without the lock
            if writers.acquire(timeout=busy_ms / 1000):
                conn.info[_WRITER_TURN] = writers
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            except BaseException:
                _end_turn(conn)
                raise

        event.listen(engine, "commit", _end_turn)
        event.listen(engine, "rollback", _end_turn)

        @event.listens_for(engine.pool, "checkin")
        def _checkin(_dbapi_conn, record):  # pragma: no cover - a connection lost mid-transaction
            lock = record.info.pop(_WRITER_TURN, None)  # Connection.info is the record's info
            if lock is not None:
                lock.release()

        return engine
    return create_engine(url, pool_pre_ping=True, json_serializer=json_dumps)


#: `Connection.info` key of the writer lock a connection holds (released when its transaction ends)
_WRITER_TURN = "a2a_sqlite_writer_turn"


def _end_turn(conn) -> None:
    lock = conn.info.pop(_WRITER_TURN, None)
    if lock is not None:
        lock.release()


def write_bind(engine: Engine) -> Engine:
    """`engine` (sharing its pool) whose transactions take SQLite's write lock when they begin
    (BEGIN IMMEDIATE); the same engine on other databases."""
    if engine.dialect.name != "sqlite":
        return engine
    return engine.execution_options(**{SQLITE_BEGIN: "immediate"})


def write_session(engine: Engine, **kwargs) -> Session:
    """A Session for a unit of work that writes (see `write_bind`)."""
    return Session(write_bind(engine), **kwargs)


def begin_write(session: Session) -> None:
    """Start the write part of a request: on SQLite, end the session's read transaction (nothing
    written yet; loaded objects stay usable when the session does not expire on commit) and begin
    a new one with BEGIN IMMEDIATE, so the reads that validate the change and the change itself
    see one state and the write lock is waited for (busy timeout) instead of failing. A no-op on
    other databases and when the session has already written."""
    bind = session.get_bind()
    if bind.dialect.name != "sqlite" or session.new or session.dirty or session.deleted:
        return
    if session.in_transaction():
        conn = session.connection()
        if conn.get_execution_options().get(SQLITE_BEGIN) == "immediate":
            return
        session.commit()
    session.connection(execution_options={SQLITE_BEGIN: "immediate"})


_GC_LOCK = threading.Lock()
_GC_PAUSED = [0, False]  # threads inside gc_paused(); whether the collector was enabled before the first


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a loader builds its rows (a context manager
    or a decorator). Reading a few hundred thousand rows creates as many tuples, which trigger
    collections that traverse every object alive, the rows read so far included: about a third
    of the agreement and report loaders' CPU time at 20,000 runs. The rows hold no reference
    cycles, so nothing is left uncollected; reference counting frees as usual. Threads share the
    collector: it is enabled again (if it was) when the last thread inside leaves."""
    with _GC_LOCK:
        if _GC_PAUSED[0] == 0:
            _GC_PAUSED[1] = gc.isenabled()
            gc.disable()
        _GC_PAUSED[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSED[0] -= 1
            if _GC_PAUSED[0] == 0 and _GC_PAUSED[1]:
                gc.enable()


def fetch_rows(session: Session, stmt) -> list[tuple]:
    """All rows of a Core statement on the session's connection, as the driver's tuples, read with
    one ``fetchall``: no ORM loading, no Row objects and no result processing, so the statement
    should select integers, floats and text only (cast JSON columns to text; SQLite gives booleans
    as 0 / 1). Iterating a SQLAlchemy result instead fetches one row per call on psycopg, several
    times slower on large reads (the agreement and report loaders read every label)."""
    if session.autoflush:
        session.flush()
    result = session.connection().execute(stmt)
    try:
        cursor = getattr(result, "cursor", None)
        return cursor.fetchall() if cursor is not None else [tuple(r) for r in result.all()]
    finally:
        result.close()


@lru_cache
def get_engine() -> Engine:
    return make_engine(get_settings().database_url)


@contextmanager
def session_scope(engine: Engine | None = None, *, write: bool = False, **kwargs) -> Iterator[Session]:
    """A session that commits on success and rolls back on error (`write=True`: see `write_bind`)."""
    engine = engine or get_engine()
    with Session(write_bind(engine) if write else engine, **kwargs) as session:
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise


class TransactionClock:
    """Tells a long writer (an import) when to commit so that, on SQLite, the write lock is held
    for at most `max_ms` at a time and other writers (annotators saving) get their turn:
    `due()` is true once the current transaction is older than `max_ms`; `pause()` (after a
    commit) sleeps `yield_ms` so a writer waiting in SQLite's busy handler can take the lock.
    On other databases (row locks, no database-wide write lock) `due()` is always false."""

    def __init__(self, engine: Engine, max_ms: int | None = None, yield_ms: int | None = None):
        s = get_settings()
        self.enabled = engine.dialect.name == "sqlite"
        self.max_s = (s.sqlite_max_write_ms if max_ms is None else max_ms) / 1000
        self.yield_s = (s.sqlite_writer_yield_ms if yield_ms is None else yield_ms) / 1000
        self.started = time.monotonic()

    def due(self) -> bool:
        return self.enabled and time.monotonic() - self.started >= self.max_s

    def restart(self) -> None:
        self.started = time.monotonic()

    def pause(self) -> None:
        if self.enabled and self.yield_s > 0:
            time.sleep(self.yield_s)
        self.restart()
