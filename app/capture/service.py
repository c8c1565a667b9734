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
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select

from app.capture.models import CaptureError, CaptureRecord, LiveRun
from app.ingest.canonical import Location, RunFormatError
from app.ingest.items import item_from_raw
from app.ingest.loader import RunConflict, store_live_run
from app.ingest.readers import otlp_agents_sdk
from app.ingest.readers.otlp import Span, build_run, conversation_of, dedupe, group_runs, iso_ns
from app.ingest.registry import registry
from app.ingest.sidecar import apply_sidecar
from app.runs.models import Run

OTLP = "otlp"
#: a marker record per trace of a rejected OTLP run (its later spans are refused)
OTLP_REJECTED = "otlp-rejected"
A2A = "a2a"
TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "cancelled", "rejected"})
_STREAM_LOCKS: dict[str, threading.Lock] = {}  # A2A: one rebuild at a time per recorder stream
_STREAM_LOCKS_GUARD = threading.Lock()
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


def _drop_stale(session: Session, run_ids: Iterable[str], keep_live: bool = False) -> None:
    """Remove live runs that no longer exist after a rebuild (a trace that joined a conversation)
    (`keep_live`: only the stored run, e.g. of a run rejected)."""
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
        if not keep_live:
            session.delete(live)


# --------------------------------------------------------------------------- OTLP

def _rebuild_policy() -> tuple[int, float, int]:
    from app.core.config import get_settings

    s = get_settings()
    return s.capture_sync_rebuild_records, s.capture_rebuild_growth, s.max_events_per_run


def _lock_keys(session: Session, keys: Iterable[str]) -> None:
    """Serialize batches of the same traces/runs between processes (PostgreSQL advisory locks, held
    until the transaction ends; SQLite serializes writers itself: the session began with BEGIN
    IMMEDIATE or takes the write lock at its first insert)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    from sqlalchemy import text

    for k in sorted(set(keys)):
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"a2annotate-capture:{k}"})


def ingest_spans(session: Session, spans: list[Span], sidecar: dict | None = None,
                 budget: Callable[[], bool] | None = None) -> CaptureResult:
    """Keep `spans` (new ones only) and grow every run they belong to. Caller commits.

    Incremental: spans of a trace that is already part of a run (and name no other conversation)
    are added to that run's records, and the run is rebuilt only while it is small
    (CAPTURE_SYNC_REBUILD_RECORDS) or once it grew by CAPTURE_REBUILD_GROWTH since its last build,
    so a long trace costs linear time in all, not quadratic; the rest is built when more arrives
    or when the run becomes final (`finalize_idle`). A run over MAX_EVENTS_PER_RUN spans is
    rejected before anything is built; a rejected run keeps no records and refuses its traces'
    later spans (`result.rejected`, named in `result.errors`). `budget()` false: the CPU budget
    of the request is spent, the runs not yet rebuilt are left pending (built later)."""
    result = CaptureResult()
    spans = dedupe(spans)
    if not spans:
        return result
    traces = sorted({s.trace_id for s in spans})
    convs = sorted({c for c in (conversation_of(s) for s in spans) if c})
    _lock_keys(session, traces + convs)
    have = _existing_keys(session, OTLP, [s.key for s in spans])
    new = [s for s in spans if s.key not in have]
    result.duplicates = len(spans) - len(new)
    new = _refuse_rejected(session, new, result)
    if not new:
        return result
    result.accepted = len(new)
    by_trace: dict[str, list[Span]] = {}
    for s in new:
        by_trace.setdefault(s.trace_id, []).append(s)
    known = _known_runs(session, list(by_trace))
    grow: dict[str, int] = {}
    full: list[str] = []
    run_key_of: dict[str, str] = {}
    for tid, group in by_trace.items():
        keys = known.get(tid, set())
        if len(keys) == 1:
            (rk,) = keys
            if all(conversation_of(s) in (None, rk) for s in group):
                run_key_of[tid] = rk
                grow[rk] = grow.get(rk, 0) + len(group)
                continue
        full.append(tid)
    for s in new:
        session.add(CaptureRecord(source=OTLP, stream=s.trace_id, record_key=s.key, ts=iso_ns(s.start_ns),
                                  run_key=run_key_of.get(s.trace_id), payload=s.to_json()))
    session.flush()
    sync_records, growth, max_events = _rebuild_policy()
    rebuild: list[str] = []
    for rk, added in sorted(grow.items()):
        _lock_keys(session, [rk])
        live = session.exec(select(LiveRun).where(LiveRun.run_id == rk)).first()
        total = _count_records(session, rk)
        built = live.n_records if live is not None else 0
        if total > max_events:
            _reject(session, rk, _records_traces(session, rk), f"{total} spans, more than MAX_EVENTS_PER_RUN "
                    f"({max_events}) events", result, added)
        elif live is None or total <= sync_records or total - built >= growth * max(built, 1) \
                or live.state != "recording":
            rebuild.append(rk)
        else:  # recorded, built later: the stored run is at most CAPTURE_REBUILD_GROWTH behind
            _mark_pending(session, live, result, rk)
    if rebuild:
        full.extend(sorted({r.stream for r in _records_where(session, col(CaptureRecord.run_key).in_, rebuild)}))
    if full:
        _rebuild_traces(session, sorted(set(full)), sidecar, result, budget, new_keys={s.key for s in new})
    session.flush()
    return result


def _mark_pending(session: Session, live: LiveRun, result: CaptureResult, rid: str) -> None:
    live.last_seen = _now()
    if live.state == "final":
        live.state, live.final_reason = "recording", None
    session.add(live)
    result.runs[rid] = "pending"


def _count_records(session: Session, run_key: str) -> int:
    return session.exec(select(func.count()).select_from(CaptureRecord).where(
        CaptureRecord.source == OTLP, CaptureRecord.run_key == run_key)).one()


def _records_traces(session: Session, run_key: str) -> list[str]:
    return sorted(set(session.exec(select(CaptureRecord.stream).where(
        CaptureRecord.source == OTLP, CaptureRecord.run_key == run_key).distinct()).all()))


def _known_runs(session: Session, traces: list[str]) -> dict[str, set[str]]:
    """For each trace already recorded: the runs its records went into at their last build."""
    out: dict[str, set[str]] = {}
    for i in range(0, len(traces), _CHUNK):
        part = traces[i:i + _CHUNK]
        for tid, rk in session.exec(select(CaptureRecord.stream, CaptureRecord.run_key).where(
                CaptureRecord.source == OTLP, col(CaptureRecord.stream).in_(part),
                col(CaptureRecord.run_key).is_not(None)).distinct()).all():
            out.setdefault(tid, set()).add(rk)
    return out


def _refuse_rejected(session: Session, spans: list[Span], result: CaptureResult) -> list[Span]:
    """Drop (and count as rejected) the spans of traces or conversations whose run was rejected."""
    if not spans:
        return spans
    traces = sorted({s.trace_id for s in spans})
    marks: dict[str, tuple[str, str]] = {}
    for i in range(0, len(traces), _CHUNK):
        for r in session.exec(select(CaptureRecord).where(CaptureRecord.source == OTLP_REJECTED,
                                                          col(CaptureRecord.record_key).in_(traces[i:i + _CHUNK]))):
            marks[r.record_key] = (r.run_key or r.record_key, (r.payload or {}).get("reason", "rejected"))
    names = sorted({c for c in (conversation_of(s) for s in spans) if c} | set(traces))
    dead: dict[str, str] = {}
    for i in range(0, len(names), _CHUNK):
        for live in session.exec(select(LiveRun).where(col(LiveRun.run_id).in_(names[i:i + _CHUNK]),
                                                       LiveRun.state == "rejected")):
            dead[live.run_id] = live.final_reason or "rejected"
    kept: list[Span] = []
    refused: dict[str, int] = {}
    why: dict[str, str] = {}
    for s in spans:
        hit = marks.get(s.trace_id)
        if hit is None:
            c = conversation_of(s)
            for rid in (c, s.trace_id):
                if rid is not None and rid in dead:
                    hit = (rid, dead[rid])
                    break
        if hit is None:
            kept.append(s)
            continue
        refused[hit[0]] = refused.get(hit[0], 0) + 1
        why[hit[0]] = hit[1]
    for rid, n in refused.items():
        result.rejected += n
        result.errors.append(f"run {rid!r} was rejected ({why[rid]}): {n} later span(s) of its traces refused")
        result.runs.setdefault(rid, "refused")
    return kept


def _reject(session: Session, rid: str, traces: Iterable[str], reason: str, result: CaptureResult,
            n_new: int, note: bool = True) -> None:
    """Reject run `rid` for good: its records are deleted, its traces marked (later spans refused),
    its live state "rejected", a partly stored run removed (unless annotated)."""
    traces = sorted(set(traces))
    msg = f"run {rid!r} rejected: {reason}; its records are dropped and later spans of its traces refused"
    session.execute(delete(CaptureRecord).where(CaptureRecord.source == OTLP, CaptureRecord.run_key == rid))
    for i in range(0, len(traces), _CHUNK):
        part = traces[i:i + _CHUNK]
        session.execute(delete(CaptureRecord).where(CaptureRecord.source == OTLP, col(CaptureRecord.stream).in_(part)))
        have = set(session.exec(select(CaptureRecord.record_key).where(
            CaptureRecord.source == OTLP_REJECTED, col(CaptureRecord.record_key).in_(part))).all())
        for tid in part:
            if tid not in have:
                session.add(CaptureRecord(source=OTLP_REJECTED, stream=tid, record_key=tid, run_key=rid,
                                          payload={"reason": reason[:2000]}))
    _drop_stale(session, [rid], keep_live=True)
    live = session.exec(select(LiveRun).where(LiveRun.run_id == rid)).first()
    if live is None:
        live = LiveRun(run_id=rid, source=OTLP, stream=rid, first_seen=_now())
    live.state, live.final_reason, live.last_seen, live.n_records = "rejected", reason[:200], _now(), 0
    session.add(live)
    result.rejected += n_new
    result.errors.append(msg)
    if note:
        record_error(session, OTLP, rid, msg)
    result.runs[rid] = "rejected"


def _rebuild_traces(session: Session, traces: list[str], sidecar: dict | None, result: CaptureResult,
                    budget: Callable[[], bool] | None, new_keys: set[str]) -> None:
    """Rebuild every run that spans of `traces` belong to (with the other traces of the same
    conversations), each from all of its records."""
    rows = _records_where(session, col(CaptureRecord.stream).in_, traces)
    first = group_runs(Span.from_json(r.payload) for r in rows)
    run_ids = set(first)
    del first
    _lock_keys(session, run_ids)
    # other traces already in the same conversations, and every record of those traces
    more = _records_where(session, col(CaptureRecord.run_key).in_, sorted(run_ids))
    by_id = {r.id: r for r in rows}
    by_id.update({r.id: r for r in more})
    extra_traces = sorted({r.stream for r in more} - set(traces))
    for r in _records_where(session, col(CaptureRecord.stream).in_, extra_traces):
        by_id[r.id] = r
    records = list(by_id.values())
    del rows, more, by_id
    previous = {r.run_key for r in records if r.run_key}
    groups, key_to_run, prebuilt = _group_by_reader([Span.from_json(r.payload) for r in records])
    for r in records:
        rk = key_to_run.get(r.record_key)
        if rk is not None and r.run_key != rk:
            r.run_key = rk
            session.add(r)
    del records
    _, _, max_events = _rebuild_policy()
    for rid in sorted(groups):
        group = groups.pop(rid)
        n_new = sum(1 for s in group if s.key in new_keys)
        if len(group) > max_events:  # at least one event per span: rejected without building it
            _reject(session, rid, {s.trace_id for s in group}, f"{len(group)} spans, more than "
                    f"MAX_EVENTS_PER_RUN ({max_events}) events", result, n_new)
            continue
        live = session.exec(select(LiveRun).where(LiveRun.run_id == rid)).first()
        if budget is not None and not budget() and live is not None and live.state == "recording":
            _mark_pending(session, live, result, rid)  # this request's CPU budget is spent
            continue
        raw = prebuilt.pop(rid, None) or otlp_agents_sdk.build_run(rid, group) or build_run(rid, group)
        _store(session, raw, OTLP, rid, sidecar, len(group), result)
        if result.runs.get(rid) == "rejected":
            err = result.errors.pop() if result.errors else "rejected"
            _reject(session, rid, {s.trace_id for s in group}, err.removeprefix(f"run {rid!r}: "), result, n_new,
                    note=False)
    _drop_stale(session, previous - set(key_to_run.values()))


def _group_by_reader(spans: list[Span]) -> tuple[dict[str, list[Span]], dict[str, str], dict[str, dict]]:
    """(spans by run id, run id by span key, runs already built) by the registry's reader for
    these spans: a plugin with ``sniff_spans`` / ``runs_from_spans`` that claims them builds the
    runs itself (its events name their spans in ``data.otel``); otherwise the built-in OTLP
    mapping groups them and each run is built by `build_run` (or, for OpenAI Agents SDK spans, as
    that SDK's export is built)."""
    pick = registry().pick_spans(spans)
    if pick.reader is None or getattr(pick.reader, "name", "") == "otlp":
        groups = group_runs(spans)
        return groups, {s.key: rid for rid, group in groups.items() for s in group}, {}
    built = pick.reader.runs_from_spans(spans)
    by_key = {s.key: s for s in spans}
    key_to_run: dict[str, str] = {}
    for rid, raw in built.items():
        for e in raw.get("events") or []:
            o = e.get("data", {}).get("otel") if isinstance(e.get("data"), dict) else None
            if isinstance(o, dict) and f"{o.get('trace_id')}:{o.get('span_id')}" in by_key:
                key_to_run[f"{o['trace_id']}:{o['span_id']}"] = rid
    groups: dict[str, list[Span]] = {rid: [] for rid in built}
    for key, rid in key_to_run.items():
        groups[rid].append(by_key[key])
    return groups, key_to_run, built


def rebuild_run(session: Session, run_id: str, *, finalizing: bool = False) -> CaptureResult:
    """Rebuild one live OTLP run from all of its records now (a pending one, e.g. when it becomes final)."""
    result = CaptureResult()
    live = session.exec(select(LiveRun).where(LiveRun.run_id == run_id)).first()
    traces = _records_traces(session, run_id)
    if live is None or live.source != OTLP or not traces:
        return result
    sidecar = live.sidecar or None
    _rebuild_traces(session, traces, sidecar, result, None, set())
    if finalizing and live.state == "recording":
        live.state, live.final_reason = "final", "idle"
        session.add(live)
    return result


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
    with _STREAM_LOCKS_GUARD:
        lock = _STREAM_LOCKS.setdefault(stream, threading.Lock())
    with lock:
        _lock_keys(session, [f"a2a:{stream}"])
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
        payload = {k: v for k, v in env.items() if k != "id"}
        run_key = ctx
        if ctx is not None:
            touched.add(ctx)
        elif (card := _card_key(payload)) is not None:
            run_key = card  # only the first of identical cards is read back (`_stream_rows`)
            touched.add("")
        else:  # untagged: an error, or a ListTasks result naming several contexts
            conv = unwrap_rest(env) if isinstance(env.get("body"), dict) or isinstance(env.get("http"), dict) else None
            if conv is not None and isinstance(conv.get("body"), dict):
                touched.update(contexts_of_list(as_body(conv["body"])))
            touched.add("")  # the records without a context are looked at too (errors are reported)
        session.add(CaptureRecord(source=A2A, stream=stream, record_key=key, ts=env.get("ts"), run_key=run_key,
                                  payload=payload))
        result.accepted += 1
    if not result.accepted:
        return result
    session.flush()
    # the touched contexts' records, plus every untagged one (cards name the agents), in arrival order
    contexts = sorted(touched - {""})
    rows = _stream_rows(session, stream, contexts)
    per_ctx: dict[str, int] = {}
    for r in rows:
        if r.run_key and not r.run_key.startswith(_CARD_PREFIX):
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


_CARD_PREFIX = "card:"


def _card_key(payload: dict) -> str | None:
    """``card:<digest>`` for an untagged agent card response (identical cards share it), else None."""
    from app.capture.proxy import CARD_PATHS, EXTENDED_CARD_SUFFIXES

    http = payload.get("http") if isinstance(payload.get("http"), dict) else {}
    path = http.get("path")
    if payload.get("direction") != "response" or not isinstance(path, str) or not (
            path in CARD_PATHS or path.endswith(EXTENDED_CARD_SUFFIXES)):
        return None
    import hashlib

    body = json.dumps([path, http.get("status"), payload.get("from_agent"), payload.get("to_agent"),
                       payload.get("body")], sort_keys=True, ensure_ascii=False, default=str)
    return _CARD_PREFIX + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _stream_rows(session: Session, stream: str, contexts: list[str]) -> list[CaptureRecord]:
    """The records a rebuild of `contexts` reads, in arrival order: theirs, the untagged ones
    (errors, ListTasks results) and the first of each distinct agent card (not every copy: a
    client fetches the card on each connection, and re-reading them all made each batch slower)."""
    q = select(CaptureRecord).where(CaptureRecord.source == A2A, CaptureRecord.stream == stream)
    rows = list(session.exec(q.where(col(CaptureRecord.run_key).is_(None))).all())
    firsts = session.exec(select(func.min(CaptureRecord.id)).where(
        CaptureRecord.source == A2A, CaptureRecord.stream == stream,
        col(CaptureRecord.run_key).startswith(_CARD_PREFIX)).group_by(CaptureRecord.run_key)).all()
    for i in range(0, len(firsts), _CHUNK):
        rows.extend(session.exec(q.where(col(CaptureRecord.id).in_(firsts[i:i + _CHUNK]))).all())
    for i in range(0, len(contexts), _CHUNK):
        rows.extend(session.exec(q.where(col(CaptureRecord.run_key).in_(contexts[i:i + _CHUNK]))).all())
    rows.sort(key=lambda r: r.id)
    return rows


# --------------------------------------------------------------------------- live state

def finalize_idle(session: Session, idle_seconds: float | None = None, now: datetime | None = None) -> int:
    """Mark recording runs idle for `idle_seconds` final; returns how many. Caller commits."""
    if idle_seconds is None:
        from app.core.config import get_settings

        idle_seconds = get_settings().capture_idle_seconds
    cutoff = (now or _now()) - timedelta(seconds=idle_seconds)
    idle = session.exec(select(LiveRun).where(LiveRun.state == "recording", LiveRun.last_seen < cutoff)).all()
    if not idle:  # the usual case: read only, no write lock taken by a page view
        return 0
    ids = [live.id for live in idle]
    rebuilt = 0
    for live in idle:  # OTLP records not built yet (see ingest_spans): the final run holds them all
        if live.source == OTLP and _count_records(session, live.run_id) != live.n_records:
            rebuild_run(session, live.run_id, finalizing=True)
            rebuilt += 1
    res = session.execute(update(LiveRun).where(col(LiveRun.id).in_(ids), LiveRun.state == "recording")
                          .values(state="final", final_reason="idle"))
    return (res.rowcount or 0) + rebuilt


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
