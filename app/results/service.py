"""Stored results: agreement and outcome-report payloads kept in the database by (kind,
parameters, data version), where every app process and worker finds them.

A GET asks `get_result(session, kind, params)`:

* a stored payload of the **current data version** is served as it is (``stale`` false), with
  the time it was computed;
* a stored payload of an **older data version** is served marked ``stale``, and a recompute job
  (kind ``result``, `app.jobs.handlers`) is enqueued unless one for the same parameters is already
  queued or running; the request computes nothing;
* **nothing stored**: when the data are small (at most ``RESULTS_INLINE_ROWS`` runs + labels) the
  request computes the payload itself and stores it; otherwise it enqueues the job and waits up to
  ``RESULTS_WAIT_SECONDS`` for it, answering ``pending`` (the route's 202 with the job's
  ``Location``) when it has not finished.

The **data version** is a counter kept by the database itself (`app.results.models.DataVersion`,
migration 0015_data_version): triggers on every table the payloads read (``RESULT_TABLES``) bump it
in the transaction of each insert, update or delete (COPY, bulk inserts, cascades and TRUNCATE
included, whichever process or tool writes), so it changes exactly when those data are committed
and is the same in every process. Annotations and labels count only when they are, were or belong
to a submitted annotation: the payloads read submitted annotations only, so drafts (the labelling
page's autosave) leave every stored result fresh. Reading it is one statement over a 16-row table, however many
labels there are; the data's size (runs + labels, for the inline decision) is counted only when
nothing is stored yet. ``tests/results/test_data_version.py`` checks that the computations read no
table outside ``RESULT_TABLES`` and that each of them carries its triggers.

The **key** of a result is a sha256 of the canonical JSON of its ``params``: every request
parameter after defaults are resolved (a ``study`` parameter included when a route passes it)
plus any query parameter the route did not resolve (`with_query`), so a parameter a route gains
later is part of the key even before its computation reads it.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from app.annotations.models import Label
from app.core.config import get_settings
from app.core.errors import FieldError
from app.results.models import DataVersion, StoredResult
from app.runs.models import Run, utcnow

__all__ = ["COMPUTATIONS", "KINDS", "RESULT_TABLES", "Served", "compute_and_store", "data_version", "get_result",
           "result_key"]

#: kind -> function(session, params) -> JSON-ready payload; registered by `app.results.kinds`
KINDS: dict[str, Callable[[Session, dict[str, Any]], Any]] = {}
#: computations done by this process, per kind (tests and the bench count them)
COMPUTATIONS: Counter[str] = Counter()
_COUNT_LOCK = threading.Lock()

#: the tables the computations of ``KINDS`` read (a study only for its selection); each carries the
#: triggers that bump the data version (migration 0015_data_version; a table added here needs them
#: in a migration of its own, and tests/results/test_data_version.py fails until it has them)
RESULT_TABLES = ("run", "scenario", "principal", "agent", "user_account", "taxonomy", "annotation", "label",
                 "gold_run", "gold_label", "study")


def register(kind: str) -> Callable[[Callable[[Session, dict[str, Any]], Any]], Callable[[Session, dict[str, Any]], Any]]:
    def add(fn: Callable[[Session, dict[str, Any]], Any]) -> Callable[[Session, dict[str, Any]], Any]:
        KINDS[kind] = fn
        return fn
    return add


def _kinds() -> dict[str, Callable[[Session, dict[str, Any]], Any]]:
    import app.results.kinds  # noqa: F401 - registers the computations

    return KINDS


# --------------------------------------------------------------------------------------------
# data version and key


def _current_version(session: Session) -> str:
    """The data version as the database holds it now: one statement over `DataVersion`'s rows."""
    return str(session.execute(select(func.coalesce(func.sum(DataVersion.version), 0))).scalar_one())


def _size(session: Session) -> int:
    """The data's size (runs + labels): two counts, read only when nothing is stored yet."""
    return int(session.execute(select(select(func.count()).select_from(Run).scalar_subquery()
                                      + select(func.count()).select_from(Label).scalar_subquery())).scalar_one())


def data_version(session: Session) -> str:
    """The current data version (the same in every process; changes with every committed write
    to ``RESULT_TABLES``)."""
    return _current_version(session)


def result_key(kind: str, params: dict[str, Any]) -> str:
    text = json.dumps({"kind": kind, "params": params}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def with_query(params: dict[str, Any], query_params: Any, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    """``params`` plus, under ``query``, the request's query parameters that ``params`` does not
    hold already (sorted [name, value] pairs): a parameter a route gains later (a ``study``) keys
    its own result even before the route resolves it, while spellings of the same request
    (``level=run`` or its default) share one. ``ignore``: parameters that only change how the result
    is shown (a page's sorting)."""
    extra = sorted([k, v] for k, v in query_params.multi_items() if k not in params and k not in ignore)
    return {**params, "query": extra} if extra else dict(params)


# --------------------------------------------------------------------------------------------
# computing and storing


def _store(engine: Engine, kind: str, key: str, params: dict[str, Any], **values: Any) -> None:
    """Insert or update the row of (kind, key) in a short write transaction of its own."""
    from app.core.db import session_scope

    for _ in range(3):
        try:
            with session_scope(engine, write=True) as s:
                n = s.execute(update(StoredResult).where(StoredResult.kind == kind, StoredResult.key == key)
                              .values(updated_at=utcnow(), **values)).rowcount
                if not n:
                    s.add(StoredResult(kind=kind, key=key, params=params, **values))
            return
        except IntegrityError:  # another process inserted it meanwhile: update it instead
            continue


def _insert_missing(engine: Engine, kind: str, key: str, params: dict[str, Any]) -> None:
    """The (empty) row of (kind, key) unless one exists: never overwrites a job claimed meanwhile."""
    from app.core.db import session_scope

    try:
        with session_scope(engine, write=True) as s:
            if _row(s, kind, key) is None:
                s.add(StoredResult(kind=kind, key=key, params=params, job_id=None))
    except IntegrityError:  # another process inserted it meanwhile
        pass


def compute_and_store(engine: Engine, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Compute the payload of (kind, params) on the data as they are now and store it with the
    data version read *before* computing (a write during the computation leaves it stale)."""
    fn = _kinds()[kind]
    key = result_key(kind, params)
    with Session(engine) as s:
        version = data_version(s)
        t0 = time.perf_counter()
        payload = fn(s, params)
        seconds = time.perf_counter() - t0
    with _COUNT_LOCK:
        COMPUTATIONS[kind] += 1
    computed_at = utcnow()
    _store(engine, kind, key, params, data_version=version, payload=payload, computed_at=computed_at,
           compute_seconds=seconds)
    return {"kind": kind, "key": key, "data_version": version, "computed_at": computed_at.isoformat(),
            "compute_seconds": round(seconds, 4)}


# --------------------------------------------------------------------------------------------
# serving


class ResultFailed(ValueError):
    """The computation failed on these parameters: the route answers 422 with the message."""


@dataclass
class Served:
    #: ``fresh`` (current data version), ``stale`` (older; a recompute job refreshes it) or
    #: ``pending`` (nothing stored yet; ``job_id`` computes it)
    state: str
    payload: Any = None
    computed_at: datetime | None = None
    job_id: str | None = None

    @property
    def stale(self) -> bool:
        return self.state == "stale"

    def age_seconds(self) -> int | None:
        if self.computed_at is None:
            return None
        at = self.computed_at if self.computed_at.tzinfo else self.computed_at.replace(tzinfo=utcnow().tzinfo)
        return max(0, int((utcnow() - at).total_seconds()))


def _row(session: Session, kind: str, key: str) -> StoredResult | None:
    # populate_existing: the row as stored now, not as this session last loaded it
    return session.execute(select(StoredResult).where(StoredResult.kind == kind, StoredResult.key == key)
                           .execution_options(populate_existing=True)).scalar()


def _ensure_job(session: Session, kind: str, key: str, params: dict[str, Any], row: StoredResult | None,
                user_id: int | None) -> str:
    """The id of a queued or running recompute job of (kind, key), enqueued now unless there is one."""
    from app.core.db import begin_write
    from app.jobs import service as jobs
    from app.jobs.models import Job
    from app.jobs.queue import send

    engine = session.get_bind()
    # SQLite: end the read transaction begun by the data version's read and wait for the write lock, so two
    # requests that enqueue at once take turns instead of one failing with "database is locked"
    begin_write(session)
    old = row.job_id if row is not None else None
    if old is not None:
        state = session.execute(select(Job.state).where(Job.id == old)).scalar()
        if state in ("queued", "running"):
            session.commit()  # give the write lock back
            return old
    job = jobs.create_job(session, "result", {"kind": kind, "params": params}, user_id)
    if row is None:
        _insert_missing(engine, kind, key, params)
    from app.core.db import session_scope

    with session_scope(engine, write=True) as s:  # claim: one recompute per (kind, key) at a time
        cond = StoredResult.job_id.is_(None) if old is None else StoredResult.job_id == old
        claimed = s.execute(update(StoredResult).where(StoredResult.kind == kind, StoredResult.key == key, cond)
                            .values(job_id=job.id)).rowcount
    if not claimed:  # another process enqueued one meanwhile
        jobs.request_cancel(session, job.id)
        session.commit()
        other = _row(session, kind, key)
        return other.job_id if other is not None and other.job_id else job.id
    session.commit()
    send(job.id, engine=engine)
    return job.id


def get_result(session: Session, kind: str, params: dict[str, Any], *, user_id: int | None = None) -> Served:
    """The stored result of (kind, params): see the module docstring. Raises ResultFailed when the
    computation fails on these parameters (inline, or its job within the wait)."""
    from app.jobs.service import wait_for

    settings = get_settings()
    key = result_key(kind, params)
    version = _current_version(session)
    row = _row(session, kind, key)
    if row is not None and row.payload is not None and row.data_version == version:
        return Served("fresh", row.payload, row.computed_at)
    engine = session.get_bind()
    if row is not None and row.payload is not None:
        job_id = _ensure_job(session, kind, key, params, row, user_id)
        session.commit()  # a new read: the immediate broker may have refreshed it already
        again = _row(session, kind, key)
        if again is not None and again.data_version == version:
            return Served("fresh", again.payload, again.computed_at)
        return Served("stale", row.payload, row.computed_at, job_id)
    if _size(session) <= settings.results_inline_rows:
        try:
            compute_and_store(engine, kind, params)
        except FieldError as exc:
            raise ResultFailed(str(exc)) from None
        session.commit()
        row = _row(session, kind, key)
        return Served("fresh", row.payload, row.computed_at)
    job_id = _ensure_job(session, kind, key, params, row, user_id)
    job = wait_for(engine, job_id, settings.results_wait_seconds)
    session.commit()
    if job is not None and job.state == "failed":
        raise ResultFailed((job.error or "failed").split(": ", 1)[-1])
    row = _row(session, kind, key)
    if row is not None and row.payload is not None:
        return Served("fresh" if row.data_version == version else "stale", row.payload, row.computed_at,
                      None if row.data_version == version else job_id)
    return Served("pending", job_id=job_id)
