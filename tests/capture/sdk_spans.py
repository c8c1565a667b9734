"""Spans made with the real opentelemetry-sdk for the capture hardening tests and bench: one long
trace (a root agent span, `n` chat spans under it), ended in time order and exported as the
exporters do (children first, the root last), encoded by the exporter's own encoder."""
from __future__ import annotations

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

T0 = 1_790_000_000_000_000_000  # ns


def long_trace(n: int, *, service: str = "agent-svc", attrs: dict | None = None,
               big: dict[int, dict] | None = None) -> list[ReadableSpan]:
    """`n` chat spans (1 ms apart) under one invoke_agent root, finished children first.
    `big`: extra attributes for the span at that index."""
    exp = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    tp.add_span_processor(SimpleSpanProcessor(exp))
    tracer = tp.get_tracer("hardening", "1.0")
    root = tracer.start_span("invoke_agent planner", start_time=T0,
                             attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})
    ctx = trace.set_span_in_context(root)
    for i in range(n):
        a = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1", **(attrs or {}),
             **((big or {}).get(i) or {})}
        sp = tracer.start_span(f"chat {i}", context=ctx, start_time=T0 + (i + 1) * 1_000_000, attributes=a)
        sp.end(end_time=T0 + (i + 1) * 1_000_000 + 500_000)
    root.end(end_time=T0 + (n + 2) * 1_000_000)
    spans = list(exp.get_finished_spans())
    tp.shutdown()
    return spans


def protobuf(spans: list[ReadableSpan]) -> bytes:
    """The body OTLPSpanExporter sends for `spans`."""
    return encode_spans(spans).SerializeToString()


def batches(spans: list[ReadableSpan], size: int) -> list[list[ReadableSpan]]:
    return [spans[i:i + size] for i in range(0, len(spans), size)]
