"""Live capture under hostile or heavy input (issue 23, rows 1, 2, 5, 6), sizes scaled down:
every limit of file imports applies to OTLP spans while they are decoded (a span over a limit is
rejected by name, never stored), the body and the span count are bounded before anything is
built, a long trace costs linear time in all (not a rebuild per batch), a rejected trace stops
accumulating."""
from __future__ import annotations

import gzip
import json

import httpx
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from sqlmodel import Session, func, select

from app.auth.service import create_token, create_user
from app.capture.models import CaptureRecord, LiveRun
from app.capture.service import finalize_idle, ingest_spans
from app.core.config import get_settings
from app.ingest.readers import otlp
from app.ingest.readers.otlp import build_run, read_body, spans_from_protobuf
from app.runs.models import Run
from app.runs.service import get_run, to_canonical
from tests.e2e.live import LiveServer

from . import sdk_spans


@pytest.fixture
def settings_env(monkeypatch):
    def set_(**kv):
        for k, v in kv.items():
            monkeypatch.setenv(k, str(v))
        get_settings.cache_clear()

    yield set_
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def built(monkeypatch):
    """Counts the spans the run builder is given (the cost of rebuilding runs)."""
    counter = {"spans": 0, "builds": 0}
    orig = otlp._RunBuilder.__init__

    def init(self, run_id, spans):
        counter["spans"] += len(spans)
        counter["builds"] += 1
        orig(self, run_id, spans)

    monkeypatch.setattr(otlp._RunBuilder, "__init__", init)
    return counter


def _decoded(spans):
    got, problems = spans_from_protobuf(sdk_spans.protobuf(spans))
    assert problems == []
    return got


def _ingest(engine, spans):
    with Session(engine) as s:
        res = ingest_spans(s, spans)
        s.commit()
    return res


@pytest.fixture
def live(engine):
    with Session(engine) as s:
        token = create_token(s, create_user(s, "collector", "reviewer", "password123"))
        s.commit()
    with LiveServer(engine) as url:
        yield url, token


def _post(url, token, body, ctype="application/x-protobuf", **headers):
    return httpx.post(f"{url}/v1/traces", content=body, timeout=60,
                      headers={"Authorization": f"Bearer {token}", "Content-Type": ctype, **headers})


# --------------------------------------------------------------------------- rows 1, 2: strings


def test_a_string_attribute_over_max_string_bytes_is_rejected_by_name_and_never_stored(live, engine, settings_env):
    settings_env(MAX_STRING_BYTES=64 * 1024)
    url, token = live
    long_text = "x" * (100 * 1024)
    spans = sdk_spans.long_trace(3, big={1: {"gen_ai.input.messages": long_text}})
    big_id = format(spans[1].context.span_id, "016x")
    r = _post(url, token, sdk_spans.protobuf(spans))
    assert r.status_code == 200
    ps = ExportTraceServiceResponse.FromString(r.content).partial_success
    assert ps.rejected_spans == 1
    assert big_id in ps.error_message and "'gen_ai.input.messages'" in ps.error_message
    assert "MAX_STRING_BYTES" in ps.error_message and "chat 1" in ps.error_message
    # the same in OTLP/JSON (gzip)
    doc = json.loads(json.dumps(_json_doc(sdk_spans.long_trace(2, big={0: {"note": long_text}}))))
    r = _post(url, token, gzip.compress(json.dumps(doc).encode()), "application/json", **{"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert r.json()["partialSuccess"]["rejectedSpans"] == "1" and "'note'" in r.json()["partialSuccess"]["errorMessage"]
    with Session(engine) as s:
        payloads = [json.dumps(p) for p in s.exec(select(CaptureRecord.payload)).all()]
        assert len(payloads) == 3 + 2 and all(len(p) < 10_000 for p in payloads)  # the other spans are kept
        runs = s.exec(select(Run)).all()
        assert len(runs) == 2
        for run in runs:
            assert long_text not in json.dumps(to_canonical(s, get_run(s, run.run_id)))


def test_the_corpus_export_writes_big_runs_a_line_at_a_time():
    from app.exports.schema import table_spec as get_spec
    from app.exports.service import _jsonl_stream

    rows = [{"run_id": f"r{i}", "events": [{"content": "y" * (2 << 20)}]} for i in range(3)]
    counted = []
    parts = list(_jsonl_stream(get_spec("runs_canonical"), ["run_id"], iter([rows]), counted.append))
    assert counted == [3] and len(parts) == 3  # never the whole chunk's text at once
    assert all(len(p) < (2 << 20) + 1000 for p in parts)
    assert [json.loads(p)["run_id"] for p in parts] == ["r0", "r1", "r2"]
    small = [{"run_id": f"s{i}"} for i in range(1000)]
    parts = list(_jsonl_stream(get_spec("runs_canonical"), ["run_id"], iter([small]), counted.append))
    assert len(parts) == 1 and parts[0].count(b"\n") == 1000


def _json_doc(spans):
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return MessageToDict(encode_spans(spans))


def test_limits_apply_while_decoding_both_encodings():
    from dataclasses import replace

    from app.ingest.safety.limits import InputLimits

    lim = InputLimits(max_string_bytes=1000, max_json_depth=8)
    deep: dict = {"stringValue": "v"}
    for _ in range(10):
        deep = {"kvlistValue": {"values": [{"key": "k", "value": deep}]}}
    spans = sdk_spans.long_trace(2)
    doc = _json_doc(spans)
    sp = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    sp[0]["attributes"].append({"key": "deep", "value": deep})
    sp[1]["name"] = "n" * 2000
    # protobuf: each span checked as it is converted
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    body = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    got, problems = read_body(body, "application/x-protobuf", limits=lim)
    assert len(got) == 1 and len(problems) == 2
    assert "'deep'" in problems[0] and "MAX_JSON_DEPTH" in problems[0] and "span rejected" in problems[0]
    assert "name is 2000 bytes" in problems[1]
    # OTLP/JSON: the long name is that span's problem; nesting is bounded for the whole document
    got, problems = read_body(json.dumps(doc).encode(), "application/json", limits=replace(lim, max_json_depth=64))
    assert len(got) == 2 and len(problems) == 1 and "name is 2000 bytes" in problems[0]
    with pytest.raises(otlp.OtlpFormatError, match=r"spans\[0\]\.attributes.*MAX_JSON_DEPTH"):
        read_body(json.dumps(doc).encode(), "application/json", limits=lim)
    # a resource attribute over the limit rejects every span of that resource
    got, problems = read_body(sdk_spans.protobuf(sdk_spans.long_trace(2, service="s" * 5000)),
                              "application/x-protobuf", limits=lim)
    assert got == [] and len(problems) == 3 and "resource attribute 'service.name'" in problems[0]


# --------------------------------------------------------------------------- rows 1, 6: size, count, CPU


def test_body_span_count_and_cpu_are_bounded_before_anything_is_built(live, engine, settings_env):
    settings_env(OTLP_MAX_BODY_BYTES=256 * 1024, OTLP_MAX_SPANS_PER_REQUEST=500)
    url, token = live
    # bigger than OTLP_MAX_BODY_BYTES: declared, and chunked without a length
    r = _post(url, token, b"\0" * (300 * 1024))
    assert r.status_code == 413 and "OTLP_MAX_BODY_BYTES" in r.text
    r = httpx.post(f"{url}/v1/traces", content=iter([b"\0" * 65536] * 5), timeout=30,
                   headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"})
    assert r.status_code == 413 and "OTLP_MAX_BODY_BYTES" in Status.FromString(r.content).message
    # a gzip body unpacking beyond it, refused while unpacking
    r = _post(url, token, gzip.compress(b"\0" * (8 << 20)), **{"Content-Encoding": "gzip"})
    assert r.status_code == 413 and "unpacks to more than" in Status.FromString(r.content).message
    # more spans than allowed: refused before one is converted
    many = sdk_spans.protobuf(sdk_spans.long_trace(800))
    assert len(many) < 256 * 1024
    r = _post(url, token, many)
    assert r.status_code == 413 and "OTLP_MAX_SPANS_PER_REQUEST" in Status.FromString(r.content).message
    # the CPU budget
    settings_env(OTLP_MAX_SPANS_PER_REQUEST=20_000, OTLP_CPU_SECONDS="0.001")
    r = _post(url, token, many)
    assert r.status_code == 413 and "OTLP_CPU_SECONDS" in Status.FromString(r.content).message
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(CaptureRecord)).one() == 0


# --------------------------------------------------------------------------- row 5: incremental, rejected


def test_a_long_trace_costs_linear_time_and_ends_as_one_full_build(engine, settings_env, built):
    settings_env(CAPTURE_SYNC_REBUILD_RECORDS=100, CAPTURE_REBUILD_GROWTH="0.25")
    spans = sdk_spans.long_trace(1000)
    rid = format(spans[0].context.trace_id, "032x")
    for i, batch in enumerate(sdk_spans.batches(spans, 25)):
        res = _ingest(engine, _decoded(batch))
        assert res.accepted == len(batch)
        if i == 0:
            assert res.runs == {rid: "imported"}  # visible at once
    n = len(spans)
    # a rebuild of everything per batch is 25 + 50 + ... + 1001 spans (about 20,500); linear is a few n
    assert built["spans"] <= 6 * n, built
    with Session(engine) as s:
        live = s.exec(select(LiveRun).where(LiveRun.run_id == rid)).one()
        assert 0 < live.n_records < n  # the stored run lags behind by at most 25 %
        assert live.n_records >= n / 1.25 - 25
    with Session(engine) as s:
        from datetime import UTC, datetime, timedelta

        assert finalize_idle(s, idle_seconds=1, now=datetime.now(UTC) + timedelta(seconds=5)) == 1
        s.commit()
        live = s.exec(select(LiveRun).where(LiveRun.run_id == rid)).one()
        assert (live.state, live.n_records) == ("final", n)
        stored = to_canonical(s, get_run(s, rid))
    whole = build_run(rid, _decoded(spans))
    assert len(stored["events"]) == len(whole["events"]) >= n
    assert [e["content"] for e in stored["events"]] == [e["content"] for e in whole["events"]]


def test_a_rejected_trace_stops_accumulating_and_keeps_no_records(live, engine, settings_env, built):
    settings_env(MAX_EVENTS_PER_RUN=50)
    url, token = live
    spans = sdk_spans.long_trace(90)
    rid = format(spans[0].context.trace_id, "032x")
    parts = sdk_spans.batches(spans, 30)
    r = _post(url, token, sdk_spans.protobuf(parts[0]))
    assert ExportTraceServiceResponse.FromString(r.content).partial_success.rejected_spans == 0
    r = _post(url, token, sdk_spans.protobuf(parts[1]))  # 60 spans: more than 50 events, rejected
    ps = ExportTraceServiceResponse.FromString(r.content).partial_success
    assert ps.rejected_spans == 30 and "MAX_EVENTS_PER_RUN" in ps.error_message and rid in ps.error_message
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(CaptureRecord).where(CaptureRecord.source == "otlp")).one() == 0
        assert s.exec(select(Run).where(Run.run_id == rid)).first() is None  # the partial run is gone
        assert s.exec(select(LiveRun.state).where(LiveRun.run_id == rid)).one() == "rejected"
    for part in (parts[2], parts[0]):  # later spans, and a re-sent first batch: refused
        r = _post(url, token, sdk_spans.protobuf(part))
        ps = ExportTraceServiceResponse.FromString(r.content).partial_success
        assert ps.rejected_spans == len(part) and "was rejected" in ps.error_message, ps
    # (the server stores in worker processes; here the same service, counted): nothing is built
    res = _ingest(engine, _decoded(parts[2]))
    assert (res.accepted, res.rejected, built["spans"]) == (0, 30, 0)
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(CaptureRecord).where(CaptureRecord.source == "otlp")).one() == 0


# --------------------------------------------------------------------------- row 16: the proxy recorder


def test_recorder_batches_do_not_reread_every_card(engine, monkeypatch):
    """40 batches, each a client connecting (the card fetched again) and one exchange in a new
    context: every batch reads back a constant number of records, not all the cards so far."""
    from pathlib import Path

    from app.capture.service import ingest_envelopes
    from app.ingest.readers import wire

    path = Path(__file__).parents[1] / "ingest" / "data" / "wire" / "rest_binding.jsonl"
    card, request, response = [json.loads(x) for x in path.read_text().splitlines()[:3]]
    read: list[int] = []
    orig = wire.iter_wire_file

    def counting(p, display=None):
        with open(p, encoding="utf-8") as f:
            read.append(sum(1 for _ in f))
        return orig(p, display=display)

    monkeypatch.setattr(wire, "iter_wire_file", counting)
    for i in range(40):
        ctx = f"ctx-{i}"
        batch = [dict(card, id=f"c{i}")]
        for j, env in enumerate((request, response)):
            env = json.loads(json.dumps(env).replace("ctx-rest", ctx).replace('"t1"', f'"t{i}"'))
            batch.append(dict(env, id=f"e{i}-{j}", context=ctx, exchange=f"x{i}"))
        with Session(engine) as s:
            res = ingest_envelopes(s, "many-clients", batch)
            s.commit()
        assert res.accepted == 3 and ctx in res.runs
    assert read[0] == read[-1] == 3, read  # one card, the exchange's two envelopes
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(CaptureRecord)).one() == 120  # every record is kept
        run = to_canonical(s, get_run(s, "ctx-39"))
    assert "Two lamps please" in [e["content"] for e in run["events"]]
