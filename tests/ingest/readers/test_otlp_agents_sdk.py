"""The OpenAI Agents SDK through OTLP: spans shaped as OpenInference's openai-agents
instrumentation writes them (made with the real opentelemetry-sdk) give the same run as the
SDK's own trace export: agents, the hand-off as a delegation, tool calls linked to results."""
from __future__ import annotations

import json

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from app.ingest.readers.otlp import OtlpReader, read_body

from ..otlp_gen import to_otlp_json
from .loss import store_and_reload

SCOPE = "openinference.instrumentation.openai_agents"
T0 = 1_790_000_000_000_000_000
MS = 1_000_000


def _spans(extra_processor=None):
    exp = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "library-desk"}))
    if extra_processor is not None:
        tp.add_span_processor(extra_processor)
    tp.add_span_processor(SimpleSpanProcessor(exp))
    tr = tp.get_tracer(SCOPE, "0.1")

    def child(parent, name, start, end, attrs, error=None):
        s = tr.start_span(name, context=trace.set_span_in_context(parent), start_time=T0 + start * MS,
                          attributes={"llm.system": "openai", **attrs})
        if error:
            s.set_status(Status(StatusCode.ERROR, error))
        s.end(end_time=T0 + end * MS)
        return s

    root = tr.start_span("Library desk", start_time=T0, attributes={"openinference.span.kind": "AGENT"})
    front = tr.start_span("Front desk", context=trace.set_span_in_context(root), start_time=T0 + 1 * MS,
                          attributes={"openinference.span.kind": "AGENT", "llm.system": "openai"})
    child(front, "no_personal_data", 2, 3, {"openinference.span.kind": "CHAIN"})
    child(front, "response", 4, 10, {
        "openinference.span.kind": "LLM", "llm.model_name": "desk-mini",
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "You run the desk.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": "Renew 'Dune' please.",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "find_loan",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps({"title": "Dune"}),
        "llm.token_count.prompt": 30, "llm.token_count.completion": 9})
    child(front, "find_loan", 11, 12, {"openinference.span.kind": "TOOL", "tool.name": "find_loan",
                                       "input.value": json.dumps({"title": "Dune"}), "output.value": "loan L-17"})
    child(front, "handoff to Renewals", 13, 14, {"openinference.span.kind": "TOOL",
                                                 "a2annotate.test.remark": "handed over after lookup"})
    front.end(end_time=T0 + 15 * MS)
    ren = tr.start_span("Renewals", context=trace.set_span_in_context(root), start_time=T0 + 16 * MS,
                        attributes={"openinference.span.kind": "AGENT"})
    child(ren, "renew_loan", 17, 18, {"openinference.span.kind": "TOOL", "tool.name": "renew_loan",
                                      "input.value": json.dumps({"loan": "L-17"})}, error="hold queue")
    child(ren, "response", 19, 22, {
        "openinference.span.kind": "LLM", "llm.model_name": "desk-mini",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.contents.0.message_content.type": "text",
        "llm.output_messages.0.message.contents.0.message_content.text": "Sorry, it has a hold."})
    ren.end(end_time=T0 + 23 * MS)
    root.end(end_time=T0 + 24 * MS)
    return list(exp.get_finished_spans())


def _check(run):
    assert {a["id"] for a in run["agents"]} == {"Front desk", "Renewals"}  # not the workflow
    assert run["scenario"]["id"] == "Library desk"
    ev = run["events"]
    (ask,) = [e for e in ev if e["actor"] == "user"]
    assert ask["content"] == "Renew 'Dune' please." and ask["recipients"] == ["Front desk"]
    (handoff,) = [e for e in ev if e["kind"] == "delegation"]
    assert (handoff["actor"], handoff["recipients"]) == ("Front desk", ["Renewals"])
    calls = [e for e in ev if e["kind"] == "tool_call"]
    results = [e for e in ev if e["kind"] == "tool_result"]
    assert [c["content"] for c in calls] == ['find_loan({"title": "Dune"})', 'renew_loan({"loan": "L-17"})']
    assert [r["parent_seq"] for r in results] == [c["seq"] for c in calls]
    assert results[0]["content"] == "loan L-17" and results[1]["data"]["is_error"] is True
    (answer,) = [e for e in ev if e["kind"] == "message" and e["actor"] == "Renewals"]
    assert answer["content"] == "Sorry, it has a hold." and answer["recipients"] == ["user"]
    assert {a["id"]: a.get("private_state") for a in run["agents"]}["Front desk"] == {"instructions": "You run the desk."}
    assert not any(e["actor"] == "system" for e in ev)


def test_otlp_file_of_the_sdk_instrumentation_reads_as_the_sdk_export(tmp_path, engine):
    p = tmp_path / "agents-sdk.otlp.jsonl"
    p.write_text(json.dumps(to_otlp_json(_spans())) + "\n")
    reader = OtlpReader()
    assert reader.sniff(p)
    (item,) = [i for i in reader.read(p, p.name) if i.ok]
    _check(item.run)
    assert item.run["metadata"]["otlp_dialect"] == "openai-agents (openinference)"
    assert any("a2annotate.test.remark: carries text" in w["message"] for w in item.warnings)
    runs, warnings, summary = store_and_reload(engine, [item])
    assert summary.imported == 1
    _check(runs[0])


def test_the_otlp_endpoint_body_reads_the_same():
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans, problems = read_body(encode_spans(_spans()).SerializeToString(), "application/x-protobuf")
    assert not problems
    from app.ingest.readers.otlp import build_runs

    (run,) = build_runs(spans).values()
    from app.ingest.items import item_from_raw

    item = item_from_raw(run, "POST /v1/traces")
    assert item.ok, item.error
    _check(item.run)


def test_the_live_otlp_endpoint_builds_the_same_run(engine):
    """The real OTLP/HTTP exporter, one batch per ended span (children first), to POST /v1/traces."""
    import httpx
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from sqlmodel import Session

    from app.auth.service import create_token, create_user
    from tests.e2e.live import LiveServer

    with Session(engine) as s:
        token = create_token(s, create_user(s, "collector", "reviewer", "password123"))
        s.commit()
    with LiveServer(engine) as url:
        sender = SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces",
                                                      headers={"Authorization": f"Bearer {token}"}))
        spans = _spans(sender)
        run_id = format(spans[0].context.trace_id, "032x")
        r = httpx.get(f"{url}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    _check(r.json())
