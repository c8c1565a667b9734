"""Live runs in the app: "recording" in the run list and the trace view (which reloads), read-only and
not assignable until final (idle timeout or terminal task state), the admin capture page."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.assignments import create_assignments
from app.auth.service import create_token
from app.capture.models import CaptureError, LiveRun
from app.capture.service import capture_summary, finalize_idle, ingest_spans, is_recording
from app.ingest.readers.otlp import spans_from_json
from app.main import create_app
from app.runs.service import RunFilter
from app.taxonomies.service import latest
from tests.annotations.factories import make_user
from tests.api.clients import login
from tests.ingest import otlp_gen


def _ingest(engine, spans):
    with Session(engine) as s:
        res = ingest_spans(s, spans)
        s.commit()
    return res


def _spans():
    exp = otlp_gen.openinference_spans()["research-app"]
    spans, _ = spans_from_json(otlp_gen.to_otlp_json(exp.get_finished_spans()))
    return spans


def test_recording_until_idle_then_annotatable(engine):
    spans = _spans()
    first = _ingest(engine, spans[:2])
    assert first.accepted == 2 and first.runs == {otlp_gen.SESSION: "imported"}
    grown = _ingest(engine, spans)  # the rest arrives; the first two again (a re-sent batch)
    assert (grown.accepted, grown.duplicates, grown.runs) == (3, 2, {otlp_gen.SESSION: "replaced"})
    assert _ingest(engine, spans).runs == {}  # all known: nothing rebuilt
    with Session(engine) as s:
        make_user(s, "boss", "admin")
        ann = make_user(s, "ann", "annotator")
        token = create_token(s, ann)
        s.commit()
        assert is_recording(s, otlp_gen.SESSION)
        tax = latest(s, "a2-failures")
        res = create_assignments(s, RunFilter(), None, 1, ["ann"], 1, tax)
        assert res.runs_matching == 0  # a recording run is not assigned
        s.rollback()
    client = TestClient(create_app(engine))
    login(client, "boss")
    page = client.get("/runs").text
    assert "recording</span>" in page
    run_page = client.get(f"/runs/{otlp_gen.SESSION}").text
    assert 'http-equiv="refresh"' in run_page and "still receiving events" in run_page
    body = {"run_id": otlp_gen.SESSION, "labels": [], "no_failure": True, "status": "submitted"}
    h = {"Authorization": f"Bearer {token}"}
    r = client.post("/api/v1/annotations", json=body, headers=h)
    assert r.status_code == 409 and "still recording" in r.text
    admin_page = client.get("/admin/capture")
    assert admin_page.status_code == 200 and "capture-sources" in admin_page.text and "otlp" in admin_page.text
    # idle: final
    with Session(engine) as s:
        assert finalize_idle(s, idle_seconds=60, now=datetime.now(UTC) + timedelta(seconds=61)) == 1
        s.commit()
        live = s.exec(select(LiveRun)).one()
        assert (live.state, live.final_reason) == ("final", "idle")
        summary = capture_summary(s)
        assert summary["sources"][0] == {"source": "otlp", "recording": 0, "final": 1, "events": 8, "records": 5,
                                         "errors": 0}
    assert "recording</span>" not in client.get("/runs").text
    assert 'http-equiv="refresh"' not in client.get(f"/runs/{otlp_gen.SESSION}").text
    r = client.post("/api/v1/annotations", json=body, headers=h)
    assert r.status_code == 200, r.text


def test_captured_run_never_overwrites_an_imported_one(engine):
    from tests.e2e.live import load_runs

    spans = _spans()
    from app.ingest.readers.otlp import build_runs

    raw = build_runs(spans)[otlp_gen.SESSION]
    raw["events"] = raw["events"][:1]
    load_runs(engine, [raw])  # an ordinary import holds this run id
    res = _ingest(engine, spans)
    assert res.runs == {otlp_gen.SESSION: "conflict"}
    with Session(engine) as s:
        (err,) = s.exec(select(CaptureError)).all()
        assert "already exists as an imported run" in err.message
        assert s.exec(select(LiveRun)).all() == []


def test_trace_joining_a_conversation_replaces_its_own_run(engine):
    """Spans of a trace arrive before the one naming the conversation: the trace-id run they made
    first is replaced by the conversation's run."""
    spans = _spans()
    for s in spans:
        s.attributes.pop("session.id", None)
    root = next(s for s in spans if s.parent_span_id is None)
    others = [s for s in spans if s is not root]
    _ingest(engine, others)
    with Session(engine) as s:
        assert [r.run_id for r in s.exec(select(LiveRun)).all()] == [root.trace_id]
    root.attributes["session.id"] = "sess-late"
    res = _ingest(engine, [root])
    assert res.runs == {"sess-late": "imported"}
    with Session(engine) as s:
        assert [r.run_id for r in s.exec(select(LiveRun)).all()] == ["sess-late"]


def test_wire_capture_rebuilds_only_touched_contexts_and_matches_the_file(engine):
    """The REST/ListTasks fixture captured as a proxy tags it (envelope_context), in two batches:
    the stored runs equal the file import; the error without context is a capture error."""
    import json
    from pathlib import Path

    from app.capture.models import CaptureError
    from app.capture.service import ingest_envelopes
    from app.ingest import iter_path
    from app.ingest.readers.wire import envelope_context
    from app.runs.service import get_run, to_canonical

    path = Path(__file__).parents[1] / "ingest" / "data" / "wire" / "rest_binding.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    task_ctx: dict = {}
    exchange_ctx: dict = {}
    for i, env in enumerate(lines):
        env["id"] = f"e{i}"
        ctx = envelope_context(env, task_ctx) or exchange_ctx.get(env.get("exchange"))
        if ctx:
            exchange_ctx[env.get("exchange")] = ctx
            env["context"] = ctx
    with Session(engine) as s:
        first = ingest_envelopes(s, "t", lines[:5])
        assert set(first.runs) == {"ctx-rest"}
        second = ingest_envelopes(s, "t", lines)  # all again: only the new ones count
        assert second.duplicates == 5 and set(second.runs) == {"ctx-rest", "ctx-old"}
        s.commit()
        expected = {i.run["run_id"]: i.run for i in iter_path(path) if i.run}
        for rid, run in expected.items():
            got = to_canonical(s, get_run(s, rid))
            assert [(e["kind"], e["actor"], e["content"]) for e in got["events"]] == [
                (e["kind"], e["actor"], e["content"]) for e in run["events"]]
        assert any("no known context" in e.message for e in s.exec(select(CaptureError)).all())
