"""OTLP fixtures made with the real opentelemetry-sdk: a two-process GenAI multi-agent conversation
and an OpenInference-instrumented session, exported as the collector's file exporter writes them
(one ExportTraceServiceRequest per line, hex ids, integer kinds, nanosecond string timestamps)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

CONV = "conv-trip-42"
SESSION = "sess-research-7"
T0 = 1_780_000_000_000_000_000  # ns


def _provider(service: str) -> tuple[TracerProvider, InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": service, "service.version": "1.2"}))
    tp.add_span_processor(SimpleSpanProcessor(exp))
    return tp, exp


def _msgs(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def genai_spans(tracers: dict[str, trace.Tracer] | None = None):
    """Emit the GenAI conversation with two tracer providers ("planner-svc", "booker-svc").

    Returns {service: exporter} when `tracers` is None (in-memory), else emits through `tracers`."""
    exporters = {}
    if tracers is None:
        tracers = {}
        for svc in ("planner-svc", "booker-svc"):
            tp, exp = _provider(svc)
            tracers[svc] = tp.get_tracer("agent-framework", "0.9")
            exporters[svc] = exp
    p, b = tracers["planner-svc"], tracers["booker-svc"]
    t = T0
    ms = 1_000_000

    root = p.start_span("invoke_agent planner", kind=SpanKind.INTERNAL, start_time=t, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "gen_ai.agent.id": "agt-planner",
        "gen_ai.conversation.id": CONV, "gen_ai.input.messages": _msgs("user", "Book me a trip to Lisbon"),
        "gen_ai.output.messages": _msgs("assistant", "Your trip is booked."), "custom.flag": True})
    ctx = trace.set_span_in_context(root)
    chat = p.start_span("chat model-a", context=ctx, kind=SpanKind.CLIENT, start_time=t + 10 * ms, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "model-a", "gen_ai.response.model": "model-a-0613",
        "gen_ai.conversation.id": CONV, "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30,
        "gen_ai.input.messages": _msgs("user", "Book me a trip to Lisbon"),
        "gen_ai.output.messages": _msgs("assistant", "I will search flights first.")})
    chat.end(end_time=t + 40 * ms)
    tool = p.start_span("execute_tool search_flights", context=ctx, start_time=t + 50 * ms, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_flights",
        "gen_ai.tool.call.id": "call_1", "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": json.dumps({"to": "LIS", "date": "2026-06-01"}),
        "gen_ai.tool.call.result": json.dumps({"flights": [{"id": "TP123", "usd": 310}]})})
    tool.end(end_time=t + 70 * ms)
    handoff = p.start_span("execute_tool transfer_to_booker booker", context=ctx, start_time=t + 80 * ms, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_booker",
        "gen_ai.agent.name": "planner", "gen_ai.transfer.target.name": "booker",
        "gen_ai.transfer.target.type": "agent", "gen_ai.transfer.mode": "return_to_caller",
        "gen_ai.tool.call.arguments": json.dumps({"flight": "TP123"})})
    # the booker runs in another process: its invoke_agent span is a child of the hand-off span
    hctx = trace.set_span_in_context(handoff)
    booker = b.start_span("invoke_agent booker", context=hctx, kind=SpanKind.SERVER, start_time=t + 90 * ms,
                          attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booker",
                                      "gen_ai.conversation.id": CONV, "gen_ai.caller.name": "planner",
                                      "gen_ai.input.messages": _msgs("user", "Book flight TP123"),
                                      "gen_ai.output.messages": _msgs("assistant", "Booked TP123, ref ABC9")})
    bctx = trace.set_span_in_context(booker)
    pay = b.start_span("execute_tool charge_card", context=bctx, start_time=t + 100 * ms, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card", "gen_ai.tool.call.id": "call_2",
        "gen_ai.tool.call.arguments": json.dumps({"usd": 310})})
    pay.set_status(Status(StatusCode.ERROR, "card declined"))
    pay.end(end_time=t + 120 * ms)
    a2a = b.start_span("a2a SendMessage", context=bctx, kind=SpanKind.CLIENT, start_time=t + 130 * ms, attributes={
        "a2a.method.name": "SendMessage", "a2a.message.id": "m-77", "a2a.task.id": "task-9",
        "a2a.task.state": "TASK_STATE_COMPLETED", "gen_ai.agent.name": "payments-agent",
        "server.address": "payments.example"})
    a2a.add_event("retry", {"attempt": 1})
    a2a.end(end_time=t + 150 * ms)
    booker.end(end_time=t + 160 * ms)
    handoff.set_attribute("gen_ai.tool.call.result", "Booked TP123, ref ABC9")
    handoff.end(end_time=t + 170 * ms)
    root.end(end_time=t + 200 * ms)
    return exporters


def openinference_spans():
    tp, exp = _provider("research-app")
    tr = tp.get_tracer("openinference.instrumentation.test", "0.1")
    t = T0 + 5_000_000_000
    ms = 1_000_000
    agent = tr.start_span("researcher", start_time=t, attributes={
        "openinference.span.kind": "AGENT", "agent.name": "researcher", "graph.node.id": "node-r",
        "session.id": SESSION, "input.value": "What is the tallest tower?", "input.mime_type": "text/plain",
        "output.value": "The Burj Khalifa."})
    ctx = trace.set_span_in_context(agent)
    chain = tr.start_span("plan", context=ctx, start_time=t + 5 * ms, attributes={
        "openinference.span.kind": "CHAIN", "session.id": SESSION, "input.value": json.dumps({"q": "tower"})})
    chain.end(end_time=t + 8 * ms)
    llm = tr.start_span("ChatCompletion", context=ctx, start_time=t + 10 * ms, attributes={
        "openinference.span.kind": "LLM", "llm.model_name": "model-b", "session.id": SESSION,
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "What is the tallest tower?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "web_search",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps({"q": "tallest"}),
        "llm.token_count.prompt": 20, "llm.token_count.completion": 5})
    llm.end(end_time=t + 20 * ms)
    tool = tr.start_span("web_search", context=ctx, start_time=t + 21 * ms, attributes={
        "openinference.span.kind": "TOOL", "tool.name": "web_search", "session.id": SESSION,
        "input.value": json.dumps({"q": "tallest"}), "output.value": "Burj Khalifa, 828 m"})
    tool.end(end_time=t + 30 * ms)
    sub = tr.start_span("summarizer", context=ctx, start_time=t + 31 * ms, attributes={
        "openinference.span.kind": "AGENT", "agent.name": "summarizer", "graph.node.id": "node-s",
        "graph.node.parent_id": "node-r", "session.id": SESSION, "input.value": "Burj Khalifa, 828 m",
        "output.value": "The Burj Khalifa."})
    sub.end(end_time=t + 40 * ms)
    agent.end(end_time=t + 50 * ms)
    return {"research-app": exp}


def to_otlp_json(spans) -> dict:
    """OTLP/JSON as the collector writes it: camelCase, hex ids, integer enums, int64 as strings."""
    doc = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(k):
                        sp[k] = base64.b64decode(sp[k]).hex()
    return doc


def write_file(path: Path, exporters: dict, per_span_lines: bool = False) -> Path:
    """One line per process (or per span, in reverse order, to test out-of-order arrival)."""
    lines = []
    for exp in exporters.values():
        spans = list(exp.get_finished_spans())
        if per_span_lines:
            lines.extend(json.dumps(to_otlp_json([s])) for s in reversed(spans))
        else:
            lines.append(json.dumps(to_otlp_json(spans)))
    path.write_text("\n".join(lines) + "\n")
    return path
