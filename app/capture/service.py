"""Live capture into the database: OTLP spans and A2A wire envelopes -> growing runs.

Both paths keep every raw record (`capture_record`, unique per source and key, so a re-sent batch
adds nothing), rebuild each run they touch from all of its records through the format's one
importer (app.ingest.readers.otlp / app.ingest.readers.wire), fill it from the sidecar (app.ingest.sidecar), and
store it with the one loader (`app.ingest.loader.store_live_run`). A run made this way has a
`live_run` row: "recording" while records arrive, "final" after `capture_idle_seconds` without
any, or when its A2A task reaches a terminal state. Only live runs are ever rewritten: a run id
that an ordinary import already holds is reported as a capture error, never overwritten.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select

from app.capture.models import CaptureError, CaptureRecord, LiveRun
from app.ingest.canonical import Location, RunFormatError
from app.ingest.items import item_from_raw
from app.ingest.loader import RunConflict, store_live_run
from app.ingest.readers.otlp import Span, build_runs, dedupe, iso_ns
from app.ingest.registry import registry
from app.ingest.sidecar import apply_sidecar
from app.runs.models import Run

OTLP = "otlp"
A2A = "a2a"
TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "cancelled", "rejected"})
_LOCK = threading.Lock()  # one rebuild at a time per process (batches of one run may race)
_CHUNK = 500


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _existing_keys(session: Session, source: str, keys: list[str]) -> set[str]:
    found: set[str] = set()
    for i in range(0, len(keys), _CHUNK):
        part = keys[i:i + _CHUNK]
        found.update(session.exec(select(CaptureRecord.record_key).where(
            CaptureRecord.source == source, col(CaptureRecord.record_key).in_(part))).all())
    return found


def record_error(session: Session, source: str, stream: str | None, message: str, location: str | None = None) -> None:
    session.add(CaptureError(source=source, stream=stream, message=message[:5000], location=location))


class CaptureResult:
    def __init__(self) -> None:
        self.accepted = 0  # new records
        self.duplicates = 0  # records already held (a re-sent batch)
        self.rejected = 0
        self.errors: list[str] = []
        self.runs: dict[str, str] = {}  # run id -> imported|replaced|unchanged|conflict

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "rejected": self.rejected,
                "errors": self.errors, "runs": self.runs}


def _store(session: Session, raw: dict, source: str, stream: str | None, sidecar: dict | None,
           n_records: int, result: CaptureResult, terminal: bool = False) -> None:
    """Normalize, store (growing) and keep the live state of one rebuilt run."""
    apply_sidecar(raw, sidecar)
    rid = str(raw.get("run_id"))
    item = item_from_raw(raw, Location(f"{source}:{stream or rid}", pointer=f"run {rid}"))
    if item.error is not None:
        result.errors.append(str(item.error))
        record_error(session, source, stream, item.error.message, item.error.location)
        result.runs[rid] = "rejected"
        return
    run = item.run
    live = session.exec(select(LiveRun).where(LiveRun.run_id == rid)).first()
    stored = session.exec(select(Run.id).where(Run.run_id == rid)).first()
    if live is None and stored is not None:
        msg = f"run {rid!r} already exists as an imported run; the captured records are kept but not merged into it"
        result.errors.append(msg)
        record_error(session, source, stream, msg)
        result.runs[rid] = "conflict"
        return
    if live is not None and source == A2A and live.stream != stream:
        msg = (f"context {rid!r} is already recorded in capture stream {live.stream!r}; records of stream "
               f"{stream!r} are kept but not merged (run every proxy of a conversation with the same --stream)")
        result.errors.append(msg)
        record_error(session, source, stream, msg)
        result.runs[rid] = "conflict"
        return
    try:
        outcome = store_live_run(session, run, source=f"live:{source}")
    except (RunConflict, RunFormatError) as exc:
        msg = f"run {rid!r}: {exc}"
        result.errors.append(msg)
        record_error(session, source, stream, msg)
        result.runs[rid] = "rejected"
        return
    now = _now()
    if live is None:
        live = LiveRun(run_id=rid, source=source, stream=stream, first_seen=now)
    if outcome != "unchanged":
        live.last_seen = now
        if live.state == "final" and not terminal:
            live.state, live.final_reason = "recording", None  # more arrived: it grows again
    live.n_records = n_records
    live.sidecar = sidecar or {}
    if terminal and live.state != "final":
        live.state = "final"
        live.final_reason = f"task {(run.get('metadata') or {}).get('a2a_last_task_state')}"
    session.add(live)
    result.runs[rid] = outcome


def _drop_stale(session: Session, run_ids: Iterable[str]) -> None:
    """Remove live runs that no longer exist after a rebuild (a trace that joined a conversation)."""
    for rid in run_ids:
        live = session.exec(select(LiveRun).where(LiveRun.run_id == rid)).first()
        if live is None:
            continue
        row = session.exec(select(Run).where(Run.run_id == rid)).first()
        if row is not None:
            from app.annotations.models import Annotation

            if session.exec(select(func.count()).select_from(Annotation).where(
                    Annotation.run_pk == row.id)).one():
                continue  # annotated: keep it
            session.delete(row)
        session.delete(live)


# --------------------------------------------------------------------------- OTLP

def ingest_spans(session: Session, spans: list[Span], sidecar: dict | None = None) -> CaptureResult:
    """Keep `spans` (new ones only) and grow every run they belong to. Caller commits."""
    with _LOCK:
        return _ingest_spans(session, spans, sidecar)


def _ingest_spans(session: Session, spans: list[Span], sidecar: dict | None) -> CaptureResult:
    result = CaptureResult()
    spans = dedupe(spans)
    have = _existing_keys(session, OTLP, [s.key for s in spans])
    new = [s for s in spans if s.key not in have]
    result.duplicates = len(spans) - len(new)
    result.accepted = len(new)
    if not new:
        return result
    for s in new:
        session.add(CaptureRecord(source=OTLP, stream=s.trace_id, record_key=s.key, ts=iso_ns(s.start_ns),
                                  payload=s.to_json()))
    session.flush()
    traces = sorted({s.trace_id for s in new})
    rows = _records_where(session, col(CaptureRecord.stream).in_, traces)
    build = _span_reader(new)
    first = build([Span.from_json(r.payload) for r in rows])
    run_ids = set(first)
    # other traces already in the same conversations
    more = _records_where(session, col(CaptureRecord.run_key).in_, sorted(run_ids))
    by_id = {r.id: r for r in rows}
    by_id.update({r.id: r for r in more})
    # and every record of those traces
    extra_traces = sorted({r.stream for r in more} - set(traces))
    for r in _records_where(session, col(CaptureRecord.stream).in_, extra_traces):
        by_id[r.id] = r
    records = list(by_id.values())
    spans_of = {r.id: Span.from_json(r.payload) for r in records}
    previous = {r.run_key for r in records if r.run_key}
    runs = build(list(spans_of.values()))
    key_to_run: dict[str, str] = {}
    for rid, raw in runs.items():
        for e in raw["events"]:
            o = e["data"].get("otel") if isinstance(e.get("data"), dict) else None
            if o:
                key_to_run[f"{o['trace_id']}:{o['span_id']}"] = rid
    counts: dict[str, int] = {}
    for r in records:
        rk = key_to_run.get(r.record_key)
        if rk is not None and r.run_key != rk:
            r.run_key = rk
            session.add(r)
        if rk is not None:
            counts[rk] = counts.get(rk, 0) + 1
    for rid, raw in runs.items():
        _store(session, raw, OTLP, rid, sidecar, counts.get(rid, 0), result)
    _drop_stale(session, previous - set(runs))
    session.flush()
    return result


def _span_reader(spans: list[Span]):
    """How the registry's reader for these spans (the built-in otlp reader unless a plugin scores
    higher) turns spans into raw runs."""
    pick = registry().pick_spans(spans)
    return pick.reader.runs_from_spans if pick.reader is not None else build_runs


def _records_where(session: Session, op, values: list[str]) -> list[CaptureRecord]:
    out: list[CaptureRecord] = []
    for i in range(0, len(values), _CHUNK):
        part = values[i:i + _CHUNK]
        out.extend(session.exec(select(CaptureRecord).where(CaptureRecord.source == OTLP, op(part))).all())
    return out


# --------------------------------------------------------------------------- A2A wire envelopes

def ingest_envelopes(session: Session, stream: str, envelopes: list[dict], sidecar: dict | None = None) -> CaptureResult:
    """Keep wire-log envelopes (each with a unique ``id``) of one recorder stream and grow its runs.

    The stream's records are read back in order and imported through app.ingest.readers.wire exactly as a
    wire-log file holding them would be."""
    with _LOCK:
        return _ingest_envelopes(session, stream, envelopes, sidecar)


def _ingest_envelopes(session: Session, stream: str, envelopes: list[dict], sidecar: dict | None) -> CaptureResult:
    from app.ingest.a2a import contexts_of_list
    from app.ingest.readers.wire import as_body, iter_wire_file, unwrap_rest

    result = CaptureResult()
    keys = [str(e.get("id")) for e in envelopes]
    have = _existing_keys(session, A2A, keys)
    seen: set[str] = set()
    touched: set[str] = set()
    for key, env in zip(keys, envelopes):
        if key in have or key in seen:
            result.duplicates += 1
            continue
        seen.add(key)
        ctx = env.get("context") if isinstance(env.get("context"), str) else None
        if ctx is not None:
            touched.add(ctx)
        else:  # untagged: a card, an error, or a ListTasks result naming several contexts
            conv = unwrap_rest(env) if isinstance(env.get("body"), dict) or isinstance(env.get("http"), dict) else None
            if conv is not None and isinstance(conv.get("body"), dict):
                touched.update(contexts_of_list(as_body(conv["body"])))
            touched.add("")  # the records without a context are looked at too (errors are reported)
        session.add(CaptureRecord(source=A2A, stream=stream, record_key=key, ts=env.get("ts"), run_key=ctx,
                                  payload={k: v for k, v in env.items() if k != "id"}))
        result.accepted += 1
    if not result.accepted:
        return result
    session.flush()
    # the touched contexts' records, plus every untagged one (cards name the agents), in arrival order
    contexts = sorted(touched - {""})
    q = select(CaptureRecord).where(CaptureRecord.source == A2A, CaptureRecord.stream == stream)
    rows = [r for r in session.exec(q.where(col(CaptureRecord.run_key).is_(None))).all()]
    for i in range(0, len(contexts), _CHUNK):
        rows.extend(session.exec(q.where(col(CaptureRecord.run_key).in_(contexts[i:i + _CHUNK]))).all())
    rows.sort(key=lambda r: r.id)
    per_ctx: dict[str, int] = {}
    for r in rows:
        if r.run_key:
            per_ctx[r.run_key] = per_ctx.get(r.run_key, 0) + 1
    fd, path = tempfile.mkstemp(prefix="a2annotate-capture-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r.payload, ensure_ascii=False) + "\n")
        items = list(iter_wire_file(path, display=f"a2a:{stream}"))
    finally:
        os.unlink(path)
    for item in items:
        if item.error is not None:
            if "" not in touched:
                continue  # an old error, reported when it came
            msg = item.error.message
            result.errors.append(str(item.error))
            if not session.exec(select(CaptureError.id).where(CaptureError.source == A2A, CaptureError.stream == stream,
                                                              CaptureError.message == msg[:5000])).first():
                record_error(session, A2A, stream, msg, item.error.location)
            continue
        if item.run is None:
            continue
        raw = item.run
        ctx = (raw.get("metadata") or {}).get("context_id", raw.get("run_id"))
        if ctx not in touched:
            continue  # only a part of its records was read: it is rebuilt when its context is touched
        state = (raw.get("metadata") or {}).get("a2a_last_task_state")
        _store(session, raw, A2A, stream, sidecar, per_ctx.get(ctx, 0), result, terminal=state in TERMINAL_STATES)
    session.flush()
    return result


# --------------------------------------------------------------------------- live state

def finalize_idle(session: Session, idle_seconds: float | None = None, now: datetime | None = None) -> int:
    """Mark recording runs idle for `idle_seconds` final; returns how many. Caller commits."""
    if idle_seconds is None:
        from app.core.config import get_settings

        idle_seconds = get_settings().capture_idle_seconds
    cutoff = (now or _now()) - timedelta(seconds=idle_seconds)
    ids = session.exec(select(LiveRun.id).where(LiveRun.state == "recording", LiveRun.last_seen < cutoff)).all()
    if not ids:  # the usual case: read only, no write lock taken by a page view
        return 0
    res = session.execute(update(LiveRun).where(col(LiveRun.id).in_(ids), LiveRun.state == "recording")
                          .values(state="final", final_reason="idle"))
    return res.rowcount or 0


def recording_run_ids(session: Session, run_ids: Iterable[str] | None = None) -> set[str]:
    """Ids of runs still recording (of `run_ids`, or all)."""
    q = select(LiveRun.run_id).where(LiveRun.state == "recording")
    if run_ids is not None:
        ids = list(run_ids)
        if not ids:
            return set()
        q = q.where(col(LiveRun.run_id).in_(ids))
    return set(session.exec(q).all())


def is_recording(session: Session, run_id: str) -> bool:
    return bool(recording_run_ids(session, [run_id]))


def capture_summary(session: Session) -> dict[str, Any]:
    """What live capture holds: runs by source and state, events, records, the latest errors."""
    rows = session.exec(select(LiveRun.source, LiveRun.state, func.count()).group_by(LiveRun.source, LiveRun.state)).all()
    runs = {}
    for source, state, n in rows:
        runs.setdefault(source, {"recording": 0, "final": 0})[state] = n
    events = dict(session.exec(select(LiveRun.source, func.coalesce(func.sum(Run.n_events), 0))
                               .join(Run, Run.run_id == LiveRun.run_id).group_by(LiveRun.source)).all())
    records = dict(session.exec(select(CaptureRecord.source, func.count()).group_by(CaptureRecord.source)).all())
    errors = dict(session.exec(select(CaptureError.source, func.count()).group_by(CaptureError.source)).all())
    latest = session.exec(select(CaptureError).order_by(col(CaptureError.id).desc()).limit(20)).all()
    live = session.exec(select(LiveRun).order_by(col(LiveRun.last_seen).desc()).limit(50)).all()
    sources = sorted(set(runs) | set(records) | set(errors))
    return {"sources": [{"source": s, "recording": runs.get(s, {}).get("recording", 0),
                         "final": runs.get(s, {}).get("final", 0), "events": int(events.get(s, 0) or 0),
                         "records": records.get(s, 0), "errors": errors.get(s, 0)} for s in sources],
            "errors": [{"source": e.source, "stream": e.stream, "at": e.at, "location": e.location,
                        "message": e.message} for e in latest],
            "runs": [{"run_id": r.run_id, "source": r.source, "state": r.state, "final_reason": r.final_reason,
                      "last_seen": _aware(r.last_seen), "records": r.n_records} for r in live]}


def clear_capture_errors(session: Session) -> None:
    session.execute(delete(CaptureError))
