"""Store normalized canonical runs in the database.

Each run is written inside its own SAVEPOINT, so a run that fails anywhere (a bad field, a value
the database refuses) leaves no rows at all while the other runs of the batch still import.
Runs are committed in batches of `batch_size`. Re-importing a run_id with the same content hash is
counted as unchanged; different content is rejected unless `replace=True`, which rewrites the
run's content in place (annotations on it are kept).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, delete, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.core.db import json_dumps
from app.ingest.canonical import RunFormatError, canonical_json
from app.ingest.limits import storage_problem
from app.runs.models import Agent, Audit, Event, Principal, Run, Scenario


@dataclass
class ImportSummary:
    imported: int = 0
    unchanged: int = 0
    replaced: int = 0
    rejected: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    unused_files: list[str] = field(default_factory=list)

    def line(self) -> str:
        """Returns the summary line, exactly `imported N, unchanged M, rejected K` (replaced runs
        count as imported; `replaced` says how many of them)."""
        return f"imported {self.imported}, unchanged {self.unchanged}, rejected {self.rejected}"

    def to_dict(self) -> dict[str, Any]:
        return {"imported": self.imported, "unchanged": self.unchanged, "replaced": self.replaced,
                "rejected": self.rejected, "errors": self.errors, "unused_files": self.unused_files}


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


def _write_content(session: Session, run_pk: int, run: dict[str, Any]) -> None:
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
    conn = session.connection()
    copy = conn.dialect.name == "postgresql"
    for table, rows in ((Principal, principals), (Agent, agents), (Event, events), (Audit, audits)):
        if not rows:
            continue
        if copy:  # COPY ... FROM STDIN on the run's own connection (inside its savepoint)
            _copy_rows(conn, table.__table__, rows)
        else:  # SQLite: executemany on one prepared statement
            conn.execute(insert(table.__table__), rows)


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
    for table in (Event, Audit, Agent, Principal):
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


def load_items(engine: Engine, items: Iterable[Any], *, replace: bool = False, batch_size: int = 200,
               progress: Callable[[ImportSummary], None] | None = None,
               after_store: Callable[[Session, Run, dict, dict], None] | None = None) -> ImportSummary:
    """Store every `ImportItem` (run or parse error) from `items`; never raises for a bad run.

    `after_store(session, run_row, run, cache)` runs inside the run's savepoint; `cache` lives for
    the whole import and is emptied whenever a run is rolled back.
    """
    summary = ImportSummary()
    scenario_cache: dict[str, dict] = {}
    cache: dict = {}
    session = Session(engine)
    pending = 0
    try:
        for item in items:
            if getattr(item, "error", None) is not None:
                summary.rejected += 1
                summary.errors.append(_error_dict(item.error, getattr(item, "source", None)))
            elif getattr(item, "run", None) is not None:
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
                    summary.rejected += 1
                    rid = str(run.get("run_id"))
                    location = f"{getattr(item, 'source', None) or '?'}: run {rid if len(rid) <= 100 else rid[:100] + '...'}"
                    if isinstance(exc, RunFormatError) and exc.field:
                        location += f": field {exc.field}"
                    summary.errors.append({"location": location, "message": _message(exc)})
                else:
                    if outcome == "imported":
                        summary.imported += 1
                    elif outcome == "replaced":
                        summary.imported += 1
                        summary.replaced += 1
                    else:
                        summary.unchanged += 1
                    pending += 1
            for f in getattr(item, "unused_files", None) or []:
                summary.unused_files.append(f)
            if pending >= batch_size:
                session.commit()
                pending = 0
            if progress is not None:
                progress(summary)
        session.commit()
    finally:
        session.close()
    return summary


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


def import_paths(engine: Engine, paths: Iterable[str], *, fmt: str | None = None, mapping: str | None = None,
                 replace: bool = False, batch_size: int = 200,
                 progress: Callable[[ImportSummary], None] | None = None) -> ImportSummary:
    """Import every file or directory in `paths` (format auto-detected unless `fmt`)."""
    from app.ingest import iter_path

    def items():
        for p in paths:
            yield from iter_path(p, format=fmt, mapping=mapping)

    return load_items(engine, items(), replace=replace, batch_size=batch_size, progress=progress,
                      after_store=_after_store_default)


def import_bytes(engine: Engine, data: bytes, filename: str, content_type: str = "",
                 replace: bool = False) -> ImportSummary:
    """Import an uploaded body (JSON array, JSON Lines, single run, wire log or zip)."""
    from app.ingest import iter_bytes

    return load_items(engine, iter_bytes(data, filename, content_type), replace=replace,
                      after_store=_after_store_default)
