"""Agreement payloads cached per data version.

A payload is kept under its request parameters together with the **data version** it was
computed from; a request whose data version differs recomputes (and replaces the entry).  The
data version has two parts:

* a **fingerprint** read from the database with one cheap aggregate query: row count and
  largest id of every table the payloads read (annotations, labels, gold runs and labels, runs,
  agents, scenarios, users, taxonomies) and the latest ``updated_at`` of annotations and gold
  runs.  Every save of an annotation rewrites its labels (new ids) and moves ``updated_at``; an
  import adds rows; deletions lower a count.  This also sees writes made by other processes (a
  CLI import, another server worker);
* a **write counter** of this process: every INSERT, UPDATE or DELETE statement on those tables
  run through an engine of this process bumps it (an SQLAlchemy ``after_cursor_execute``
  hook), and so does the commit of a connection that ran one; this covers edits in place that
  leave counts and ids alone (a gold label un-accepted, a user's kind changed).

Concurrent requests for the same entry wait for one computation instead of each doing it.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.runs.models import Agent, Run, Scenario
from app.taxonomies.models import Taxonomy

__all__ = ["AgreementCache", "data_version"]

_TABLES = (Annotation, Label, GoldRun, GoldLabel, Run, Agent, User, Taxonomy)
_TABLE_NAMES = tuple(t.__tablename__ for t in (*_TABLES, Scenario))
_WRITE_WORDS = ("insert", "update", "delete")

_counters: weakref.WeakKeyDictionary[Engine, list[int]] = weakref.WeakKeyDictionary()
_listen_lock = threading.Lock()


def _writes(engine: Engine) -> int:
    """This process's count of write statements on the payloads' tables through ``engine``."""
    with _listen_lock:
        counter = _counters.get(engine)
        if counter is None:
            counter = [0]
            _counters[engine] = counter

            def bump(conn, cursor, statement, parameters, context, executemany):  # noqa: ARG001
                head = statement.lstrip()[:7].lower()
                if head.startswith(_WRITE_WORDS):
                    low = statement[:400].lower()
                    if any(name in low for name in _TABLE_NAMES):
                        counter[0] += 1
                        conn.info["agreement_writes"] = True

            def committed(conn):
                # bumped again at commit: a payload computed between the write and its commit
                # (from the data before it) is not served afterwards
                if conn.info.pop("agreement_writes", False):
                    counter[0] += 1

            def rolled_back(conn):
                conn.info.pop("agreement_writes", None)

            event.listen(engine, "after_cursor_execute", bump)
            event.listen(engine, "commit", committed)
            event.listen(engine, "rollback", rolled_back)
    return counter[0]


def _fingerprint(session: Session) -> tuple:
    cols = []
    for t in _TABLES:
        cols += [select(func.count()).select_from(t).scalar_subquery(),
                 select(func.max(t.id)).scalar_subquery()]
    cols.append(select(func.count()).select_from(Scenario).scalar_subquery())
    cols.append(select(func.max(Annotation.updated_at)).scalar_subquery())
    cols.append(select(func.max(GoldRun.updated_at)).scalar_subquery())
    row = session.execute(select(*cols)).one()
    return tuple(str(v) for v in row)


def data_version(session: Session) -> tuple:
    """The data version the agreement payloads depend on (see the module docstring)."""
    engine = session.get_bind()
    writes = _writes(engine)
    return (writes, _fingerprint(session))


class AgreementCache:
    """A small LRU of payloads by request key, each valid for one data version."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._entries: OrderedDict[Any, tuple[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[Any, threading.Lock] = {}
        #: computations done (not served from the cache); for tests and the bench
        self.misses = 0

    def get(self, session: Session, key: Any, compute: Callable[[], Any]) -> Any:
        """Returns the payload for ``key`` at the current data version, computing it when absent."""
        _writes(session.get_bind())  # the hook is in place before the version is read
        version = data_version(session)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] == version:
                self._entries.move_to_end(key)
                return hit[1]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:  # another request may have computed it meanwhile
                hit = self._entries.get(key)
                if hit is not None and hit[0] == version:
                    return hit[1]
            payload = compute()
            self.misses += 1
            with self._lock:
                self._entries[key] = (version, payload)
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    old, _ = self._entries.popitem(last=False)
                    self._key_locks.pop(old, None)
        return payload

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
