"""Store normalized canonical runs in the database.

Runs are stored and committed in batches of `batch_size`: the batch's new runs together inside one
SAVEPOINT (one lookup of existing ids, one multi-row INSERT of the runs, one executemany / COPY per
content table). If that fails, the batch is stored again run by run, each inside its own
SAVEPOINT, so a run that fails anywhere (a bad field, a value the database refuses) leaves no rows
at all while the other runs of the batch still import. Re-importing a run_id with the same content hash is
counted as unchanged; different content is rejected unless `replace=True`, which rewrites the
run's content in place (annotations on it are kept).
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, delete, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.core.db import TransactionClock, json_dumps, write_session
from app.ingest.canonical import RunFormatError, canonical_json
from app.ingest.limits import storage_problem
from app.runs.models import Agent, Audit, Check, Event, Principal, Run, Scenario, utcnow


@dataclass
class ImportSummary:
    imported: int = 0
    unchanged: int = 0
    replaced: int = 0
    rejected: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    unused_files: list[str] = field(default_factory=list)
    #: what lenient readers kept aside instead of rejecting: ``[{location, message, field?, run_id?}]``
    warnings: list[dict[str, Any]] = field(default_factory=list)
    #: audit mode names matching nothing in the taxonomy -> how often (kept in run metadata)
    unknown_modes: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """Returns the summary line `imported N, unchanged M, rejected K, warnings W` (replaced runs
        count as imported; `replaced` says how many of them)."""
        return (f"imported {self.imported}, unchanged {self.unchanged}, rejected {self.rejected}, "
                f"warnings {len(self.warnings)}")

    def to_dict(self) -> dict[str, Any]:
        return {"imported": self.imported, "unchanged": self.unchanged, "replaced": self.replaced,
                "rejected": self.rejected, "errors": self.errors, "unused_files": self.unused_files,
                "warnings": self.warnings, "unknown_modes": self.unknown_modes}


class RunConflict(Exception):
    pass


def _scenario_row(session: Session, sc: dict[str, Any], cache: dict[str, dict]) -> dict | None:
    """Insert the scenario if new; return the override to keep on the run when it differs."""
    stored = cache.get(sc["id"])
    if stored is None:
        row = session.get(Scenario, sc["id"])
        if row is None:
            row = Scenario(id=sc["id"], family=sc["family"], alignment=sc.get("alignment"),
                           title=sc.get("title"), description=sc.get("description"),
                           extra=dict(sc.get("metadata") or {}))
            session.add(row)
            session.flush()
        from app.runs.service import scenario_dict

        stored = scenario_dict(row)
        cache[sc["id"]] = stored
    return None if stored == sc else dict(sc)


def _content_rows(run_pk: int, run: dict[str, Any]) -> list[tuple[Any, list[dict[str, Any]]]]:
    """The (table, rows) of a run's principals, agents, events, audits and checks."""
    principals = [
        {"run_pk": run_pk, "position": i, "principal_id": p["id"], "name": p.get("name"), "kind": p.get("kind"),
         "objective": p.get("objective"), "constraints": p.get("constraints") or [],
         "success": (p.get("outcome") or {}).get("success"), "score": (p.get("outcome") or {}).get("score"),
         "metrics": (p.get("outcome") or {}).get("metrics") or {}, "extra": p.get("metadata") or {}}
        for i, p in enumerate(run["principals"])
    ]
    agents = [
        {"run_pk": run_pk, "position": i, "agent_id": a["id"], "principal_id": a.get("principal"),
         "role": a.get("role"), "model": a.get("model"), "harness": a.get("harness"),
         "private_state": a.get("private_state") or {}, "extra": a.get("metadata") or {}}
        for i, a in enumerate(run["agents"])
    ]
    events = [
        {"run_pk": run_pk, "seq": e["seq"], "ts": e.get("ts"), "kind": e["kind"], "actor": e["actor"],
         "recipients": e.get("recipients") or [], "visibility": e["visibility"], "content": e.get("content"),
         "data": e.get("data"), "parent_seq": e.get("parent_seq"), "hop": e.get("hop"),
         "extra": e.get("metadata") or {}}
        for e in run["events"]
    ]
    audits = [
        {"run_pk": run_pk, "position": i, "source": a["source"], "level": a.get("level"), "mode": a["mode"],
         "agent": a.get("agent"), "evidence": a.get("evidence") or [], "note": a.get("note"),
         "extra": a.get("metadata") or {}}
        for i, a in enumerate(run.get("audits") or [])
    ]
    checks = [
        {"run_pk": run_pk, "position": i, "source": c["source"], "level": c.get("level"),
         "check_id": c["check_id"], "passed": c.get("passed"), "agent": c.get("agent"),
         "evidence": c.get("evidence") or [], "detail": c.get("detail"), "extra": c.get("metadata") or {}}
        for i, c in enumerate(run.get("checks") or [])
    ]
    return [(Principal, principals), (Agent, agents), (Event, events), (Audit, audits), (Check, checks)]


def _insert_content(session: Session, tables: list[tuple[Any, list[dict[str, Any]]]]) -> None:
    """One executemany (SQLite) or one COPY (PostgreSQL) per table."""
    conn = session.connection()
    copy = conn.dialect.name == "postgresql"
    for table, rows in tables:
        if not rows:
            continue
        if copy:  # COPY ... FROM STDIN on the session's own connection (inside its savepoint)
            _copy_rows(conn, table.__table__, rows)
        else:  # SQLite: executemany on one prepared statement, on the driver's cursor
            _executemany_rows(conn, table.__table__, rows)


def _executemany_rows(conn, table, rows: list[dict[str, Any]]) -> None:
    """``sqlite3`` ``executemany`` of ``rows`` (JSON columns encoded as the JSON type encodes them,
    None as JSON ``null``), skipping SQLAlchemy's per-row parameter processing."""
    cols = list(rows[0])
    is_json = [isinstance(table.c[c].type, JSON) for c in cols]
    sql = f'INSERT INTO "{table.name}" ({", ".join(cols)}) VALUES ({", ".join("?" * len(cols))})'
    data = [tuple(json_dumps(r[c]) if j else r[c] for c, j in zip(cols, is_json)) for r in rows]
    cur = conn.connection.driver_connection.cursor()
    try:
        cur.executemany(sql, data)
    finally:
        cur.close()


def _write_content(session: Session, run_pk: int, run: dict[str, Any]) -> None:
    _insert_content(session, _content_rows(run_pk, run))


def _copy_rows(conn, table, rows: list[dict[str, Any]]) -> None:
    cols = list(rows[0])
    is_json = [isinstance(table.c[c].type, JSON) for c in cols]
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        with cur.copy(f'COPY "{table.name}" ({", ".join(cols)}) FROM STDIN') as cp:
            for r in rows:
                cp.write_row([json_dumps(r[c]) if j and r[c] is not None else r[c]
                              for c, j in zip(cols, is_json)])


def _clear_content(session: Session, run_pk: int) -> None:
    for table in (Event, Audit, Check, Agent, Principal):
        session.execute(delete(table).where(table.run_pk == run_pk))


def store_run(session: Session, run: dict[str, Any], *, replace: bool = False, source: str | None = None,
              scenario_cache: dict[str, dict] | None = None,
              after_store: Callable[[Session, Run, dict, dict], None] | None = None,
              cache: dict | None = None) -> str:
    """Store one normalized run. Returns "imported", "unchanged" or "replaced"; raises RunConflict,
    or RunFormatError (with `field`) for a value the database cannot store (see app.ingest.limits)."""
    text = canonical_json(run)
    problem = storage_problem(run, text)
    if problem is not None:
        raise RunFormatError(None, problem[1], run_id=run.get("run_id"), field=problem[0])
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    existing = session.exec(select(Run).where(Run.run_id == run["run_id"])).first()
    if existing is not None:
        if existing.content_hash == digest:
            return "unchanged"
        if not replace:
            raise RunConflict(
                f"run {run['run_id']!r} is already stored with different content "
                f"(hash {existing.content_hash[:12]} vs {digest[:12]}); use --replace to overwrite it")
    override = _scenario_row(session, run["scenario"], scenario_cache if scenario_cache is not None else {})
    fields = dict(scenario_id=run["scenario"]["id"], status=run["status"],
                  aggregate_score=run.get("aggregate_score"), started_at=run.get("started_at"),
                  ended_at=run.get("ended_at"), extra=run.get("metadata") or {}, scenario_override=override,
                  content_hash=digest, n_events=len(run["events"]), source=source)
    if existing is not None:
        _clear_content(session, existing.id)
        for k, v in fields.items():
            setattr(existing, k, v)
        row = existing
        outcome = "replaced"
    else:
        row = Run(run_id=run["run_id"], **fields)
        outcome = "imported"
    session.add(row)
    session.flush()
    _write_content(session, row.id, run)
    if after_store is not None:
        after_store(session, row, run, cache if cache is not None else {})
    return outcome


def _prepare(run: dict[str, Any]) -> tuple[str, str]:
    """The run's canonical text and content hash; raises RunFormatError as store_run does."""
    text = canonical_json(run)
    problem = storage_problem(run, text)
    if problem is not None:
        raise RunFormatError(None, problem[1], run_id=run.get("run_id"), field=problem[0])
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


def _store_new_runs(session: Session, entries: list[tuple[Any, dict, str]], scenario_cache: dict[str, dict],
                    after_store: Callable[[Session, Run, dict, dict], None] | None, cache: dict) -> None:
    """Store runs whose run_id is not in the database, all at once: one multi-row INSERT of the
    runs returning their ids, then one executemany / COPY per content table for all of them,
    then ``after_store`` per run.  The caller holds a savepoint around it."""
    now = utcnow()
    run_rows = []
    for item, run, digest in entries:
        override = _scenario_row(session, run["scenario"], scenario_cache)
        run_rows.append(dict(run_id=run["run_id"], scenario_id=run["scenario"]["id"], status=run["status"],
                             aggregate_score=run.get("aggregate_score"), started_at=run.get("started_at"),
                             ended_at=run.get("ended_at"), extra=run.get("metadata") or {},
                             scenario_override=override, content_hash=digest, n_events=len(run["events"]),
                             source=getattr(item, "source", None), imported_at=now))
    table = Run.__table__
    ids = session.connection().execute(
        insert(table).returning(table.c.id, sort_by_parameter_order=True), run_rows).scalars().all()
    content: dict[Any, list[dict[str, Any]]] = {}
    for pk, (_, run, _) in zip(ids, entries):
        for t, rows in _content_rows(pk, run):
            content.setdefault(t, []).extend(rows)
    _insert_content(session, list(content.items()))
    del content
    if after_store is not None:
        for pk, fields, (_, run, _) in zip(ids, run_rows, entries):
            after_store(session, Run(id=pk, **fields), run, cache)


class _Bulk:
    """SQLite settings for the length of an import: a larger page cache (restored after)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sqlite = session.get_bind().dialect.name == "sqlite"

    def __enter__(self) -> _Bulk:
        if self.sqlite:
            self.session.connection().exec_driver_sql("PRAGMA cache_size=-65536")  # 64 MiB
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.sqlite:
            try:
                self.session.connection().exec_driver_sql("PRAGMA cache_size=-2000")  # SQLite's default
            except Exception:  # noqa: BLE001 - best effort on a connection that is going away
                pass


def load_items(engine: Engine, items: Iterable[Any], *, replace: bool = False, batch_size: int = 200,
               progress: Callable[[ImportSummary], None] | None = None,
               after_store: Callable[[Session, Run, dict, dict], None] | None = None,
               strict: bool = False) -> ImportSummary:
    """Store every `ImportItem` (run or parse error) from `items`; never raises for a bad run.

    Runs are stored in batches of `batch_size` and committed per batch.  The run ids and hashes
    of a batch are looked up in one query; the batch's new runs are inserted together (one
    multi-row INSERT of the runs, one executemany or COPY per content table) inside one
    savepoint.  If anything in that fails, the savepoint is rolled back and the batch's runs are
    stored one by one, each in its own savepoint (`store_run`), so a bad run still leaves no row
    and the others import.  Runs already stored (unchanged, conflicting or replaced) and a
    run_id seen twice in one batch always take the one-by-one path.  The summary is counted in
    input order.

    On SQLite the write lock is held only while a batch is written (parsing happens outside any
    write transaction), batches start small and grow while they hold the lock for less than
    SQLITE_MAX_WRITE_MS (a slower one halves the next), and after each commit the import pauses briefly (SQLITE_WRITER_YIELD_MS)
    so that annotators' saves get their turn.

    An item's `warnings` (what a lenient reader kept aside) are collected in the summary; with
    `strict` a run with warnings is rejected instead, each warning one entry of `errors`.

    `after_store(session, run_row, run, cache)` runs inside the savepoint, once per stored run;
    `cache` lives for the whole import and is emptied whenever a savepoint is rolled back.
    """
    summary = ImportSummary()
    scenario_cache: dict[str, dict] = {}
    cache: dict = {}
    session = write_session(engine)  # SQLite: BEGIN IMMEDIATE (see app.core.db)
    clock = TransactionClock(engine)  # SQLite: hold the write lock briefly, then let annotators in
    batch: list[Any] = []
    # SQLite: the batch size adapts so that one batch holds the write lock for at most
    # SQLITE_MAX_WRITE_MS: it starts small, doubles while batches are quick, halves when one is slow
    size = [min(max(1, batch_size), 25) if clock.enabled else max(1, batch_size)]

    def reject(item: Any, run: dict, exc: Exception) -> None:
        summary.rejected += 1
        rid = str(run.get("run_id"))
        location = f"{getattr(item, 'source', None) or '?'}: run {rid if len(rid) <= 100 else rid[:100] + '...'}"
        if isinstance(exc, RunFormatError) and exc.field:
            location += f": field {exc.field}"
        summary.errors.append({"location": location, "message": _message(exc)})

    def count(outcome: str) -> None:
        if outcome == "imported":
            summary.imported += 1
        elif outcome == "replaced":
            summary.imported += 1
            summary.replaced += 1
        else:
            summary.unchanged += 1

    def one_by_one(item: Any) -> tuple[str, Any]:
        run = item.run
        savepoint = session.begin_nested()
        try:
            outcome = store_run(session, run, replace=replace, source=getattr(item, "source", None),
                                scenario_cache=scenario_cache, after_store=after_store, cache=cache)
            savepoint.commit()
        except Exception as exc:  # noqa: BLE001 - any failure rejects just this run
            savepoint.rollback()
            scenario_cache.clear()
            cache.clear()
            return "error", exc
        return "ok", outcome

    def flush_batch() -> None:
        if not batch:
            return
        started = time.monotonic()
        results: list[tuple[str, Any] | None] = [None] * len(batch)
        prepared: list[tuple[str, str] | None] = [None] * len(batch)
        for i, item in enumerate(batch):
            try:
                prepared[i] = _prepare(item.run)[1], item.run["run_id"]
            except Exception as exc:  # noqa: BLE001
                results[i] = ("error", exc)
        run_ids = list({p[1] for p in prepared if p is not None})
        existing = set()
        for k in range(0, len(run_ids), 500):
            existing.update(session.exec(select(Run.run_id).where(Run.run_id.in_(run_ids[k:k + 500]))).all())
        seen: set[str] = set()
        fresh: list[int] = []
        for i, p in enumerate(prepared):
            if p is None:
                continue
            digest, rid = p
            if rid in existing or rid in seen:
                continue
            seen.add(rid)
            fresh.append(i)
        if fresh:
            savepoint = session.begin_nested()
            try:
                _store_new_runs(session, [(batch[i], batch[i].run, prepared[i][0]) for i in fresh],
                                scenario_cache, after_store, cache)
                savepoint.commit()
            except Exception:  # noqa: BLE001 - find the bad run(s) one by one
                savepoint.rollback()
                scenario_cache.clear()
                cache.clear()
            else:
                for i in fresh:
                    results[i] = ("ok", "imported")
        for i, item in enumerate(batch):
            if results[i] is None:
                results[i] = one_by_one(item)
        session.commit()
        if clock.enabled:  # keep the write lock for at most SQLITE_MAX_WRITE_MS a batch
            held = time.monotonic() - started
            if held > clock.max_s:
                size[0] = max(1, size[0] // 2)
            elif held < clock.max_s / 2:
                size[0] = min(max(1, batch_size), size[0] * 2)
        for item, (kind, value) in zip(batch, results):
            if kind == "ok":
                if value != "unchanged" and item.run.get("audits"):
                    _count_unknown_modes(session, item.run, summary, cache)
                count(value)
            else:
                reject(item, item.run, value)
            if progress is not None:
                progress(summary)
        session.commit()  # end the read transaction of the counting above
        batch.clear()
        clock.pause()

    try:
        with _Bulk(session):
            session.commit()  # the pragma's transaction: hold no lock while the first batch is read
            clock.restart()
            for item in items:
                warnings = list(getattr(item, "warnings", None) or [])
                for name, n in (getattr(item, "unknown_modes", None) or {}).items():
                    summary.unknown_modes[name] = summary.unknown_modes.get(name, 0) + n
                if strict and warnings and getattr(item, "run", None) is not None:
                    flush_batch()  # keep the errors in input order
                    summary.rejected += 1
                    rid = str(item.run.get("run_id"))
                    for w in warnings:
                        summary.errors.append({"location": f"{w.get('location') or item.source}: run {rid}"
                                               + (f": field {w['field']}" if w.get("field") else ""),
                                               "message": f"(strict) {w['message']}"})
                    warnings = []
                    if progress is not None:
                        progress(summary)
                elif getattr(item, "error", None) is not None:
                    flush_batch()  # keep the errors in input order
                    summary.rejected += 1
                    summary.errors.append(_error_dict(item.error, getattr(item, "source", None)))
                    for more in getattr(item, "more_errors", None) or []:
                        summary.errors.append(_error_dict(more, getattr(item, "source", None)))
                    if progress is not None:
                        progress(summary)
                elif getattr(item, "run", None) is not None:
                    batch.append(item)
                    if len(batch) >= size[0]:
                        flush_batch()
                elif progress is not None:
                    progress(summary)
                summary.warnings.extend(warnings)
                for f in getattr(item, "unused_files", None) or []:
                    summary.unused_files.append(f)
            flush_batch()
            session.commit()
    finally:
        session.close()
    return summary


def _count_unknown_modes(session: Session, run: dict, summary: ImportSummary, cache: dict) -> None:
    """Audits whose mode is in no taxonomy stay in the audit table only (no judge label): name them."""
    from app.taxonomies.service import taxonomy_for_mode

    for audit in run["audits"]:
        if taxonomy_for_mode(session, audit["mode"], cache) is None:
            summary.unknown_modes[audit["mode"]] = summary.unknown_modes.get(audit["mode"], 0) + 1


def _message(exc: Exception) -> str:
    if isinstance(exc, RunConflict):
        return str(exc)
    if isinstance(exc, RunFormatError):
        return exc.message
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()[0]
    return f"{type(exc).__name__}: {text}"


def _error_dict(err: Any, source: str | None) -> dict[str, str]:
    if isinstance(err, RunFormatError):
        return {"location": err.location, "message": err.message}
    return {"location": source or "?", "message": str(err)}


def _after_store_default(session: Session, row: Run, run: dict, cache: dict) -> None:
    """Audits shipped with the run become annotations by `judge:<source>` users."""
    from app.annotations.service import sync_audit_annotations

    sync_audit_annotations(session, row, run, cache)
    from app.core.config import get_settings

    if get_settings().detectors_on_import:  # off by default (docs/detectors.md)
        from app.detectors.service import detect_on_import

        detect_on_import(session, row, run, cache)


def import_paths(engine: Engine, paths: Iterable[str], *, fmt: str | None = None, mapping: str | None = None,
                 replace: bool = False, batch_size: int = 200,
                 progress: Callable[[ImportSummary], None] | None = None,
                 profile: Any = None, strict: bool = False) -> ImportSummary:
    """Import every file or directory in `paths` (format auto-detected unless `fmt`).

    `profile` (a path, a built-in profile name or a loaded profile) says how to read directory
    trees; without one a tree is read with the profile `a2annotate inspect` infers for it.
    `strict` rejects runs that needed any warning."""
    from app.ingest import iter_path

    def items():
        for p in paths:
            yield from iter_path(p, format=fmt, mapping=mapping, profile=profile)

    return load_items(engine, items(), replace=replace, batch_size=batch_size, progress=progress,
                      after_store=_after_store_default, strict=strict)


def store_live_run(session: Session, run: dict[str, Any], *, source: str | None = None) -> str:
    """Store a run that is still growing (live capture: POST /v1/traces, the recording proxy).

    The first call inserts it; each later call rewrites its content in place with the run rebuilt
    from everything received so far (seq in time order; annotations on it kept), inside a
    SAVEPOINT, so a failure leaves the previous state. Returns "imported", "unchanged" or
    "replaced"; raises like `store_run`. The caller decides that the run may grow (it is live)."""
    savepoint = session.begin_nested()
    try:
        outcome = store_run(session, run, replace=True, source=source, after_store=_after_store_default)
    except Exception:
        savepoint.rollback()
        raise
    savepoint.commit()
    return outcome


def import_upload(engine: Engine, path: str, filename: str, replace: bool = False,
                  strict: bool = False) -> ImportSummary:
    """Import an upload already on disk at `path` (its name's ending tells the format, as
    `app.api.uploads.receive_upload` writes it); errors name the client's `filename`."""
    from app.ingest import iter_path

    return load_items(engine, iter_path(path, display=filename), replace=replace,
                      after_store=_after_store_default, strict=strict)
