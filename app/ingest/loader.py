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

from sqlalchemy import delete, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.core.db import TransactionClock, write_session
from app.ingest.canonical import RunFormatError, canonical_json, canonical_json_bytes, compact_json
from app.ingest.safety.limits import storage_problem, surrogate_path
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
    #: informational notices (kept verbatim in metadata, nothing lost): not warnings, `strict` keeps them
    notices: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        """Returns the summary line `imported N, unchanged M, rejected K, warnings W` (replaced runs
        count as imported; `replaced` says how many of them)."""
        return (f"imported {self.imported}, unchanged {self.unchanged}, rejected {self.rejected}, "
                f"warnings {len(self.warnings)}")

    def to_dict(self) -> dict[str, Any]:
        return {"imported": self.imported, "unchanged": self.unchanged, "replaced": self.replaced,
                "rejected": self.rejected, "errors": self.errors, "unused_files": self.unused_files,
                "warnings": self.warnings, "unknown_modes": self.unknown_modes, "notices": self.notices}


class RunConflict(Exception):
    pass


def _scenario_overrides(session: Session, runs: list[dict[str, Any]], cache: dict[str, dict]) -> list[dict | None]:
    """For the runs of a batch at once: one SELECT of their scenarios not yet in `cache`, one
    INSERT of those not stored yet (the first run naming one defines it), and per run the
    scenario override to keep on the run (None when it is the stored scenario)."""
    table = Scenario.__table__
    unknown = [sid for sid in dict.fromkeys(r["scenario"]["id"] for r in runs) if sid not in cache]
    conn = session.connection()
    for k in range(0, len(unknown), 500):
        for row in conn.execute(select(table).where(table.c.id.in_(unknown[k:k + 500]))).mappings():
            cache[row["id"]] = {"id": row["id"], "family": row["family"], "alignment": row["alignment"],
                                "title": row["title"], "description": row["description"],
                                "metadata": dict(row["extra"] or {})}
    new: list[dict[str, Any]] = []
    out: list[dict | None] = []
    for run in runs:
        sc = run["scenario"]
        stored = cache.get(sc["id"])
        if stored is None:
            stored = {"id": sc["id"], "family": sc["family"], "alignment": sc.get("alignment"),
                      "title": sc.get("title"), "description": sc.get("description"),
                      "metadata": dict(sc.get("metadata") or {})}
            new.append({**{k: v for k, v in stored.items() if k != "metadata"}, "extra": stored["metadata"]})
            cache[sc["id"]] = stored
        out.append(None if stored == sc else dict(sc))
    if new:
        conn.execute(insert(table), new)
    return out


#: the columns of each content table, in the order `_content_tuples` makes them
_COLUMNS = {
    Principal: ("run_pk", "position", "principal_id", "name", "kind", "objective", "constraints", "success",
                "score", "metrics", "extra"),
    Agent: ("run_pk", "position", "agent_id", "principal_id", "role", "model", "harness", "private_state",
            "extra"),
    Event: ("run_pk", "seq", "ts", "kind", "actor", "recipients", "visibility", "content", "data", "parent_seq",
            "hop", "extra"),
    Audit: ("run_pk", "position", "source", "level", "mode", "agent", "evidence", "note", "extra"),
    Check: ("run_pk", "position", "source", "level", "check_id", "passed", "agent", "evidence", "detail", "extra"),
}


def _json_encoder(sqlite: bool, plain: bool) -> Callable[[Any], str | None]:
    """How a JSON column's value is written: None as JSON ``null`` on SQLite (as the JSON type
    writes it) or SQL NULL for COPY on PostgreSQL; `plain` as for `_prepare`."""
    null = "null" if sqlite else None

    def encode(value: Any) -> str | None:
        return null if value is None else compact_json(value, plain)

    return encode


_ENCODERS = {(sqlite, plain): _json_encoder(sqlite, plain) for sqlite in (True, False) for plain in (True, False)}


def _content_tuples(run_pk: int, run: dict[str, Any], sqlite: bool,
                    out: dict[Any, list[tuple]] | None = None, plain: bool = False) -> dict[Any, list[tuple]]:
    """The rows of a run's principals, agents, events, audits and checks as tuples in the
    order of `_COLUMNS` (JSON columns already encoded), added to `out` per table. `plain`: as
    for `_prepare`."""
    js = _ENCODERS[sqlite, plain]
    out = out if out is not None else {t: [] for t in _COLUMNS}
    rows = out[Principal]
    for i, p in enumerate(run["principals"]):
        outcome = p.get("outcome") or {}
        c, m, x = p.get("constraints") or [], outcome.get("metrics") or {}, p.get("metadata") or {}
        rows.append((run_pk, i, p["id"], p.get("name"), p.get("kind"), p.get("objective"),
                     js(c) if c else "[]", outcome.get("success"), outcome.get("score"),
                     js(m) if m else "{}", js(x) if x else "{}"))
    rows = out[Agent]
    for i, a in enumerate(run["agents"]):
        ps, x = a.get("private_state") or {}, a.get("metadata") or {}
        rows.append((run_pk, i, a["id"], a.get("principal"), a.get("role"), a.get("model"), a.get("harness"),
                     js(ps) if ps else "{}", js(x) if x else "{}"))
    rows = out[Event]
    append = rows.append
    for e in run["events"]:
        r, d, x = e.get("recipients") or [], e.get("data"), e.get("metadata") or {}
        append((run_pk, e["seq"], e.get("ts"), e["kind"], e["actor"], js(r) if r else "[]", e["visibility"],
                e.get("content"), js(d), e.get("parent_seq"), e.get("hop"), js(x) if x else "{}"))
    rows = out[Audit]
    for i, a in enumerate(run.get("audits") or []):
        ev, x = a.get("evidence") or [], a.get("metadata") or {}
        rows.append((run_pk, i, a["source"], a.get("level"), a["mode"], a.get("agent"), js(ev) if ev else "[]",
                     a.get("note"), js(x) if x else "{}"))
    rows = out[Check]
    for i, c in enumerate(run.get("checks") or []):
        ev, x = c.get("evidence") or [], c.get("metadata") or {}
        rows.append((run_pk, i, c["source"], c.get("level"), c["check_id"], c.get("passed"), c.get("agent"),
                     js(ev) if ev else "[]", c.get("detail"), js(x) if x else "{}"))
    return out


def _insert_content(session: Session, tables: dict[Any, list[tuple]]) -> None:
    """One executemany (SQLite) or one COPY (PostgreSQL) per table, of `_content_tuples` rows."""
    conn = session.connection()
    raw = conn.connection.driver_connection
    copy = conn.dialect.name == "postgresql"
    for table, rows in tables.items():
        if not rows:
            continue
        cols = _COLUMNS[table]
        name = table.__tablename__
        if copy:  # COPY ... FROM STDIN on the session's own connection (inside its savepoint)
            with raw.cursor() as cur:
                with cur.copy(f'COPY "{name}" ({", ".join(cols)}) FROM STDIN') as cp:
                    write = cp.write_row
                    for r in rows:
                        write(r)
        else:  # SQLite: executemany on one prepared statement, on the driver's cursor
            cur = raw.cursor()
            try:
                cur.executemany(f'INSERT INTO "{name}" ({", ".join(cols)}) VALUES ({", ".join("?" * len(cols))})',
                                rows)
            finally:
                cur.close()


def _write_content(session: Session, run_pk: int, run: dict[str, Any]) -> None:
    _insert_content(session, _content_tuples(run_pk, run, session.connection().dialect.name != "postgresql"))


def _clear_content(session: Session, run_pk: int) -> None:
    for table in (Event, Audit, Check, Agent, Principal):
        session.execute(delete(table).where(table.run_pk == run_pk))


def store_run(session: Session, run: dict[str, Any], *, replace: bool = False, source: str | None = None,
              scenario_cache: dict[str, dict] | None = None,
              after_store: Callable[[Session, Run, dict, dict], None] | None = None,
              cache: dict | None = None) -> str:
    """Store one normalized run. Returns "imported", "unchanged" or "replaced"; raises RunConflict,
    or RunFormatError (with `field`) for a value the database cannot store (see app.ingest.safety.limits)."""
    digest = _prepare(run)[1]
    existing = session.exec(select(Run).where(Run.run_id == run["run_id"])).first()
    if existing is not None:
        if existing.content_hash == digest:
            return "unchanged"
        if not replace:
            raise RunConflict(
                f"run {run['run_id']!r} is already stored with different content "
                f"(hash {existing.content_hash[:12]} vs {digest[:12]}); use --replace to overwrite it")
    override = _scenario_overrides(session, [run], scenario_cache if scenario_cache is not None else {})[0]
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


def _prepare(run: dict[str, Any], plain: bool = False) -> tuple[bytes, str]:
    """The run's canonical JSON (UTF-8) and content hash; raises RunFormatError as store_run does.
    `plain`: the run holds no float json and orjson write apart (`ImportItem.plain_floats`)."""
    try:
        data = canonical_json_bytes(run, plain)
    except UnicodeEncodeError:  # a lone surrogate: a problem the checks name comes first, as before
        data = canonical_json(run)
    problem = storage_problem(run, data)
    if problem is not None:
        raise RunFormatError(None, problem[1], run_id=run.get("run_id"), field=problem[0])
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate (JSON "\ud800"): rejected, naming the field
            char = exc.object[exc.start:exc.start + 1] if isinstance(exc.object, str) else ""
            raise RunFormatError(None, f"contains a lone surrogate ({ascii(char)[1:-1]}), which is not valid "
                                       "Unicode text and cannot be stored", run_id=run.get("run_id"),
                                 field=surrogate_path(run) or "run") from None
    return data, hashlib.sha256(data).hexdigest()


def _store_new_runs(session: Session, entries: list[tuple[Any, dict, str]], scenario_cache: dict[str, dict],
                    after_store: Callable[[Session, Run, dict, dict], None] | None, cache: dict) -> None:
    """Store runs whose run_id is not in the database, all at once: one multi-row INSERT of the
    runs returning their ids, then one executemany / COPY per content table for all of them,
    then ``after_store`` (its ``many`` form, for all the runs at once, when it has one).  The
    caller holds a savepoint around it."""
    now = utcnow()
    overrides = _scenario_overrides(session, [run for _, run, _ in entries], scenario_cache)
    run_rows = []
    for (item, run, digest), override in zip(entries, overrides):
        run_rows.append(dict(run_id=run["run_id"], scenario_id=run["scenario"]["id"], status=run["status"],
                             aggregate_score=run.get("aggregate_score"), started_at=run.get("started_at"),
                             ended_at=run.get("ended_at"), extra=run.get("metadata") or {},
                             scenario_override=override, content_hash=digest, n_events=len(run["events"]),
                             source=getattr(item, "source", None), imported_at=now))
    table = Run.__table__
    ids = session.connection().execute(
        insert(table).returning(table.c.id, sort_by_parameter_order=True), run_rows).scalars().all()
    sqlite = session.connection().dialect.name != "postgresql"
    content: dict[Any, list[tuple]] = {t: [] for t in _COLUMNS}
    for pk, (item, run, _) in zip(ids, entries):
        _content_tuples(pk, run, sqlite, content, getattr(item, "plain_floats", False))
    _insert_content(session, content)
    del content
    if after_store is None:
        return
    many = getattr(after_store, "many", None)
    if many is not None:
        many(session, [(pk, fields, run) for pk, fields, (_, run, _) in zip(ids, run_rows, entries)], cache)
    else:
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
    SQLITE_MAX_WRITE_MS (a slower one halves the next), and between two batches at least
    SQLITE_WRITER_YIELD_MS pass without the lock (reading the next batch counts; the import
    sleeps only for the rest) so that annotators' saves get their turn.

    An item's `warnings` (what a lenient reader kept aside) are collected in the summary; with
    `strict` a run with warnings is rejected instead, each warning one entry of `errors`.

    Once everything is committed, the studies' queue rules (app.studies.rules) take the new
    runs (one count query when no rule is enabled).

    `after_store(session, run_row, run, cache)` runs inside the savepoint, once per stored run;
    `cache` lives for the whole import and is emptied whenever a savepoint is rolled back.
    """
    summary = ImportSummary()
    scenario_cache: dict[str, dict] = {}
    cache: dict = {}
    from app.studies.rules import after_import, max_run_pk

    with Session(engine) as probe:
        first_new_pk = max_run_pk(probe)  # the runs above it are this import's (for the queue rules)
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

    committed = [float("-inf")]  # when the last batch was committed

    def flush_batch() -> None:
        if not batch:
            return
        if clock.enabled:  # annotators get at least SQLITE_WRITER_YIELD_MS between two batches;
            # the time spent reading the batch since the last commit counts towards it
            wait = clock.yield_s - (time.monotonic() - committed[0])
            if wait > 0:
                time.sleep(wait)
        started = time.monotonic()
        results: list[tuple[str, Any] | None] = [None] * len(batch)
        prepared: list[tuple[str, str] | None] = [None] * len(batch)
        for i, item in enumerate(batch):
            try:
                prepared[i] = _prepare(item.run, getattr(item, "plain_floats", False))[1], item.run["run_id"]
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
        committed[0] = time.monotonic()

    try:
        with _Bulk(session):
            session.commit()  # the pragma's transaction: hold no lock while the first batch is read
            clock.restart()
            for item in items:
                warnings = list(getattr(item, "warnings", None) or [])
                if getattr(item, "run", None) is not None:
                    summary.notices.extend(getattr(item, "notices", None) or [])
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
    if summary.imported:
        after_import(engine, first_new_pk)  # queue rules top up the studies' queues with the new runs
    return summary


def _count_unknown_modes(session: Session, run: dict, summary: ImportSummary, cache: dict) -> None:
    """Audits whose mode is in no taxonomy stay in the audit table only (no judge label): name them.
    A mode-less audit (an attribution: who and when, no mode) is no unknown mode."""
    from app.taxonomies.service import taxonomy_for_mode

    for audit in run["audits"]:
        if audit.get("mode") in (None, ""):
            continue
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


def _after_store_many(session: Session, stored: list[tuple[int, dict, dict]], cache: dict) -> None:
    """`_after_store_default` for the new runs of a batch at once (``(run pk, run row fields,
    run)`` each): their judge annotations in one INSERT per table."""
    from app.annotations.service import insert_audit_annotations

    insert_audit_annotations(session, [(pk, run) for pk, _, run in stored], cache)
    from app.core.config import get_settings

    if get_settings().detectors_on_import:
        from app.detectors.service import detect_on_import

        for pk, fields, run in stored:
            detect_on_import(session, Run(id=pk, **fields), run, cache)


_after_store_default.many = _after_store_many  # type: ignore[attr-defined]


def import_paths(engine: Engine, paths: Iterable[str], *, fmt: str | None = None, mapping: str | None = None,
                 replace: bool = False, batch_size: int = 200,
                 progress: Callable[[ImportSummary], None] | None = None,
                 profile: Any = None, strict: bool = False) -> ImportSummary:
    """Import every file or directory in `paths` (format auto-detected unless `fmt`).

    `profile` (a path, a built-in profile name or a loaded profile) says how to read directory
    trees, and with a `runs` block files holding runs (a file given is then read by it); without
    one a tree is read with the profile `a2annotate inspect` infers for it.
    `strict` rejects runs that needed any warning."""
    from app.ingest import iter_path

    def items():
        for p in paths:
            yield from iter_path(p, format=fmt, mapping=mapping, profile=profile)

    with _fewer_collections():
        return load_items(engine, read_ahead(items), replace=replace, batch_size=batch_size, progress=progress,
                          after_store=_after_store_default, strict=strict)


class _fewer_collections:  # noqa: N801 - used as a context manager
    """Python's cyclic garbage collector runs every 700 new containers; reading and storing a run
    makes tens of thousands (dicts, lists, tuples), so it ran hundreds of times per batch and
    went over every live object each time. For the length of a CLI import it runs every 50,000
    (memory stays flat: the runs' objects are freed by reference counting, not by the collector)."""

    def __enter__(self) -> None:
        import gc

        self.old = gc.get_threshold()
        gc.set_threshold(max(self.old[0], 50_000), *self.old[1:])

    def __exit__(self, *exc: Any) -> None:
        import gc

        gc.set_threshold(*self.old)


#: items per message from the reading process (a message is pickled whole; the pipe holds ~64 KiB)
READ_AHEAD_CHUNK = 8


def read_ahead(make_items: Callable[[], Iterable[Any]]) -> Iterable[Any]:
    """The items of ``make_items()``, read and normalised in a second process while this one
    writes (parsing takes about as long as storing; on two cores they overlap).

    Only where that is safe and pays: a forked child (it inherits the readers' arguments,
    nothing is pickled but the items), in a process without other threads (a fork copies no
    thread, so a lock another thread held would stay locked in the child), and only while a
    core is free (1-minute load average below the core count minus one: on a busy machine the
    second process only competes, measured slower). ``IMPORT_READ_AHEAD=1`` reads ahead whatever
    the load, ``IMPORT_READ_AHEAD=0`` never; otherwise the items are read here, as before.
    Memory stays flat: the child blocks once the pipe is full. Items arrive in order with their
    own locations; an exception the readers raise is raised here."""
    import multiprocessing
    import os
    import threading

    setting = os.environ.get("IMPORT_READ_AHEAD", "")
    if (setting == "0" or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods()
            or (setting != "1" and os.getloadavg()[0] > (os.cpu_count() or 1) - 1)):
        return make_items()
    return _read_in_child(make_items)


def _read_in_child(make_items: Callable[[], Iterable[Any]]) -> Iterable[Any]:
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_reader, args=(make_items, receiver, sender), daemon=True)
    proc.start()
    sender.close()
    try:
        while True:
            try:
                kind, value = receiver.recv()
            except EOFError:
                raise RuntimeError(f"the reading process ended unexpectedly (exit code {proc.exitcode})") from None
            if kind == "items":
                yield from value
            elif kind == "raise":
                raise value
            else:
                break
    finally:
        receiver.close()
        if proc.is_alive():
            proc.terminate()
        proc.join()


def _reader(make_items: Callable[[], Iterable[Any]], receiver: Any, sender: Any) -> None:
    """The reading process: sends ``("items", [item, ...])`` messages, then ``("end", None)``, or
    ``("raise", exception)`` for an exception of the readers."""
    receiver.close()  # so that the pipe breaks (and this process ends) if the importer dies
    try:
        chunk: list[Any] = []
        try:
            for item in make_items():
                chunk.append(item)
                if len(chunk) >= READ_AHEAD_CHUNK:
                    sender.send(("items", chunk))
                    chunk = []
        except (BrokenPipeError, KeyboardInterrupt):
            return
        except Exception as exc:  # noqa: BLE001 - raised again in the importer
            if chunk:
                sender.send(("items", chunk))
            import pickle

            try:
                pickle.loads(pickle.dumps(exc))
            except Exception:  # noqa: BLE001 - not picklable: the same message, as a RuntimeError
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            sender.send(("raise", exc))
            return
        if chunk:
            sender.send(("items", chunk))
        sender.send(("end", None))
    except (BrokenPipeError, KeyboardInterrupt):
        return
    finally:
        sender.close()


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
                  strict: bool = False, budget: Any = None, *, job: Any = None,
                  profile: Any = None) -> ImportSummary:
    """Import an upload already on disk at `path` (its name's ending tells the format, as
    `app.api.uploads.receive_upload` writes it); errors name the client's `filename`.
    `profile` (a built-in name or a profile document, see `app.ingest.profile.upload_profile`)
    reads it as `import --profile` does: trees, zips and files holding runs.
    `budget` (an `app.ingest.budget.ImportBudget`: records, CPU seconds, cancellation) bounds the
    whole import; its CPU clock starts here, in the thread that reads and stores. `job` (an
    `app.jobs.service.JobContext`) is checked before each run is read and told the progress."""
    from app.ingest import budget as budget_mod
    from app.ingest import iter_path

    spend = budget if budget is not None else (budget_mod.current() or budget_mod.ImportBudget())
    spend.start_clock()
    progress = None
    with budget_mod.use(spend):
        items: Iterable[Any] = iter_path(path, display=filename, profile=profile)
        if job is not None:
            items = job.checked(iter(items))

            def progress(s: ImportSummary) -> None:
                job.progress(s.imported + s.unchanged + s.rejected)
        return load_items(engine, items, replace=replace, after_store=_after_store_default, strict=strict,
                          progress=progress)
