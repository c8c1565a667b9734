"""POST /v1/traces against a live server, fed by the real opentelemetry-sdk OTLP/HTTP exporter."""
from __future__ import annotations

import gzip
import json

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlmodel import Session, select

from app.auth.service import create_token, create_user
from app.capture.models import LiveRun
from app.ingest import iter_path
from tests.e2e.live import LiveServer
from tests.ingest import otlp_gen


@pytest.fixture
def live(engine):
    with Session(engine) as s:
        admin = create_user(s, "collector", "reviewer", "password123")
        ann = create_user(s, "ann", "annotator", "password123")
        token, ann_token = create_token(s, admin), create_token(s, ann)
        s.commit()
    with LiveServer(engine) as url:
        yield url, token, ann_token


def _providers(url, token, compression=Compression.NoCompression):
    tracers, memories = {}, {}
    for svc in ("planner-svc", "booker-svc"):
        tp = TracerProvider(resource=Resource.create({"service.name": svc, "service.version": "1.2"}))
        # one export per ended span: many batches, children before parents, two "processes"
        tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {token}"}, compression=compression)))
        mem = InMemorySpanExporter()
        tp.add_span_processor(SimpleSpanProcessor(mem))
        tracers[svc] = tp.get_tracer("agent-framework", "0.9")
        memories[svc] = mem
    return tracers, memories


def _run(url, token, run_id):
    r = httpx.get(f"{url}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r.json()


def _strip(run):
    return [{k: e[k] for k in ("seq", "kind", "actor", "recipients", "visibility", "content", "parent_seq")}
            for e in run["events"]]


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_real_exporter_batches_grow_one_run_like_the_file_import(live, tmp_path, compression):
    url, token, _ = live
    tracers, memories = _providers(url, token, compression)
    otlp_gen.genai_spans(tracers)
    run = _run(url, token, otlp_gen.CONV)
    assert [a["id"] for a in run["agents"]] == ["planner", "booker", "payments-agent"]
    kinds = [e["kind"] for e in run["events"]]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_result") == 2
    (handoff,) = [e for e in run["events"] if e["kind"] == "delegation"]
    assert (handoff["actor"], handoff["recipients"], handoff["data"]["transfer_mode"]) == (
        "planner", ["booker"], "return_to_caller")
    ts = [e["ts"] for e in run["events"]]
    assert ts == sorted(ts)  # seq in time order although the spans arrived children first
    # the same spans written to a trace file and imported give the same run
    path = otlp_gen.write_file(tmp_path / "spans.jsonl", memories)
    (item,) = list(iter_path(path))
    assert _strip(item.run) == _strip(run)
    assert item.run["agents"] == run["agents"]
    # re-sending every batch adds nothing
    for mem in memories.values():
        exp = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {token}"})
        assert exp.export(mem.get_finished_spans()).name == "SUCCESS"
    again = _run(url, token, otlp_gen.CONV)
    assert _strip(again) == _strip(run)


def test_json_body_partial_success_auth_and_media_type(live, engine):
    url, token, ann_token = live
    mem = otlp_gen.openinference_spans()["research-app"]
    doc = otlp_gen.to_otlp_json(mem.get_finished_spans())
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append({"name": "no ids"})
    side = {"agents": {"researcher": {"principal": "lab", "objective": "Answer correctly", "model": "model-b2"}}}
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "a2annotate-sidecar": json.dumps(side)}
    r = httpx.post(f"{url}/v1/traces", content=gzip.compress(json.dumps(doc).encode()),
                   headers={**headers, "Content-Encoding": "gzip"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    ps = r.json()["partialSuccess"]
    assert ps["rejectedSpans"] == "1" and "without traceId" in ps["errorMessage"]
    run = _run(url, token, otlp_gen.SESSION)
    assert [a["id"] for a in run["agents"]] == ["researcher", "summarizer"]
    assert run["agents"][0]["model"] == "model-b2" and run["agents"][0]["principal"] == "lab"  # the sidecar
    assert run["principals"] == [{"id": "lab", "name": None, "kind": None, "objective": "Answer correctly",
                                  "constraints": [], "outcome": {"success": None, "score": None, "metrics": {}},
                                  "metadata": {}}]
    bad_side = httpx.post(f"{url}/v1/traces", content=b"{}", headers={**headers, "a2annotate-sidecar": '{"agents": 3}'})
    assert bad_side.status_code == 400 and "agents" in bad_side.json()["message"]
    with Session(engine) as s:
        live_row = s.exec(select(LiveRun).where(LiveRun.run_id == otlp_gen.SESSION)).one()
        assert live_row.state == "recording" and live_row.n_records == 5
    # errors answer as OTLP does: google.rpc.Status in the request's encoding
    bad = httpx.post(f"{url}/v1/traces", content=b"\x0a\xff\xff", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"})
    assert bad.status_code == 400 and bad.headers["content-type"] == "application/x-protobuf"
    from google.rpc.status_pb2 import Status

    assert "protobuf" in Status.FromString(bad.content).message
    assert httpx.post(f"{url}/v1/traces", content=b"{}", headers={"Content-Type": "application/json"}).status_code == 401
    assert httpx.post(f"{url}/v1/traces", content=b"{}", headers={
        "Authorization": f"Bearer {ann_token}", "Content-Type": "application/json"}).status_code == 403
    assert httpx.post(f"{url}/v1/traces", content=b"x", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "text/plain"}).status_code == 415
    ok = httpx.post(f"{url}/v1/traces", content=b"", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"})
    assert ok.status_code == 200 and ExportTraceServiceResponse.FromString(ok.content).partial_success.rejected_spans == 0
