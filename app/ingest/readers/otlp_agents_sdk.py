"""The OpenAI Agents SDK over OTLP: spans written by OpenInference's instrumentation
(``openinference-instrumentation-openai-agents``, instrumentation scope
``openinference.instrumentation.openai_agents``), read as the SDK's own trace export.

That instrumentation turns each SDK trace into a root span of kind ``AGENT`` named after the
workflow and each SDK span into a child span: an ``agent`` span is ``AGENT`` named after the agent
(no ``agent.name`` attribute), a ``function`` span is ``TOOL`` with ``tool.name``,
``input.value``, ``output.value``, a ``handoff`` span is ``TOOL`` named ``handoff to <agent>``
(nothing else), ``generation`` and ``response`` spans are ``LLM`` with ``llm.input_messages.*``
/ ``llm.output_messages.*``, ``llm.model_name`` and ``llm.token_count.*``, and guardrail and custom
spans are ``CHAIN`` spans named after them. Read with the generic OpenInference mapping, the
workflow would become an agent calling every agent and each hand-off a tool call named
"handoff to ..."; so `build_run` (called by `app.ingest.readers.otlp.build_runs` for every run)
turns the spans of a run from that scope back into SDK span items (`MAP` below says how) and
builds the run with the OpenAI Agents reader (`app.ingest.readers.openai_agents`): the same run
the exporter's JSON gives, run id and span ids from OTLP. Every attribute is kept verbatim in its
event's ``data.span_metadata.otel_attributes``; one that carries text and is in no mapping is a
warning. Runs with spans of other scopes are left to the generic mapping (None is returned).
"""
from __future__ import annotations

import json
from typing import Any

from app.ingest.readers.builder import as_text

SCOPES = frozenset({"openinference.instrumentation.openai_agents"})
HANDOFF_PREFIX = "handoff to "

#: OpenInference span kind -> the SDK span type it stands for (TOOL: a function span, unless
#: its name says hand-off)
MAP = {"AGENT": "agent", "TOOL": "function", "LLM": "generation", "CHAIN": "custom"}
#: attributes the mapping reads (prefixes end with a dot); the rest carrying text are warned
CONSUMED = ("openinference.span.kind", "llm.system", "llm.provider", "llm.model_name", "llm.invocation_parameters",
            "input.value", "input.mime_type", "output.value", "output.mime_type", "tool.name", "tool.description",
            "tool.parameters", "llm.input_messages.", "llm.output_messages.", "llm.token_count.", "llm.tools.",
            "session.id", "user.id", "metadata")


def _consumed(key: str) -> bool:
    return any(key == c or (c.endswith(".") and key.startswith(c)) for c in CONSUMED)


def _messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    from app.ingest.readers.otlp import unflatten

    out = []
    raw = unflatten(attrs, prefix)
    for m in raw if isinstance(raw, list) else []:
        m = m.get("message") if isinstance(m, dict) and isinstance(m.get("message"), dict) else m
        if not isinstance(m, dict):
            continue
        text = m.get("content")
        if not isinstance(text, str):
            parts = [(c.get("message_content") or c) for c in m.get("contents") or [] if isinstance(c, dict)]
            text = "\n".join(p.get("text") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)) or None
        msg: dict[str, Any] = {"role": m.get("role"), "content": text}
        calls = []
        for tc in m.get("tool_calls") or []:
            tc = tc.get("tool_call") if isinstance(tc, dict) and isinstance(tc.get("tool_call"), dict) else tc
            if isinstance(tc, dict):
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                calls.append({"id": tc.get("id"), "type": "function",
                              "function": {"name": fn.get("name"), "arguments": fn.get("arguments") or "{}"}})
        if calls:
            msg["tool_calls"] = calls
        if m.get("tool_call_id"):
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return out


def _iso(ns: int | None) -> str | None:
    from app.ingest.readers.otlp import iso_ns

    return iso_ns(ns)


def _usage(attrs: dict[str, Any]) -> dict[str, Any] | None:
    u = {k[len("llm.token_count."):]: v for k, v in attrs.items() if k.startswith("llm.token_count.")}
    return u or None


def span_items(spans: list) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(trace item, span items) in the SDK's export shape for the OTLP spans of one SDK trace."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if (not s.parent_span_id or s.parent_span_id not in ids)
             and str(s.attributes.get("openinference.span.kind", "")).upper() == "AGENT"]
    root = roots[0] if len(roots) == 1 else None
    head = {"object": "trace", "id": spans[0].trace_id, "workflow_name": root.name if root else None,
            "group_id": spans[0].attributes.get("session.id"), "metadata": None}
    items = []
    for s in spans:
        if s is root:
            continue
        a = s.attributes
        kind = MAP.get(str(a.get("openinference.span.kind", "")).upper(), "custom")
        if kind == "function" and not a.get("tool.name") and (s.name or "").startswith(HANDOFF_PREFIX):
            data: dict[str, Any] = {"type": "handoff", "from_agent": None, "to_agent": s.name[len(HANDOFF_PREFIX):]}
        elif kind == "agent":
            data = {"type": "agent", "name": s.name}
        elif kind == "function":
            data = {"type": "function", "name": a.get("tool.name") or s.name, "input": a.get("input.value"),
                    "output": a.get("output.value"), "mcp_data": None}
        elif kind == "generation":
            params = a.get("llm.invocation_parameters")
            try:
                params = json.loads(params) if isinstance(params, str) else params
            except ValueError:
                pass
            data = {"type": "generation", "input": _messages(a, "llm.input_messages"),
                    "output": _messages(a, "llm.output_messages"), "model": a.get("llm.model_name"),
                    "model_config": params, "usage": _usage(a)}
            if not data["output"] and a.get("output.value") is not None:
                data["output"] = [{"role": "assistant", "content": as_text(a.get("output.value"))}]
        else:
            data = {"type": "custom", "name": s.name, "data": {k: a[k] for k in ("input.value", "output.value") if k in a}}
        for k, v in a.items():  # attributes with text that no mapping reads: the reader warns for them
            if not _consumed(k) and isinstance(v, str) and v.strip():
                data[k] = v
        err = None
        if (s.status or {}).get("code") == 2:
            err = {"message": (s.status or {}).get("message") or "error", "data": None}
        items.append({"object": "trace.span", "id": s.span_id, "trace_id": s.trace_id,
                      "parent_id": None if root is not None and s.parent_span_id == root.span_id else s.parent_span_id,
                      "started_at": _iso(s.start_ns), "ended_at": _iso(s.end_ns), "span_data": data, "error": err,
                      "metadata": {"otel_attributes": dict(a), "otel_name": s.name, "scope": s.scope}})
    return head, items


def build_run(run_id: str, spans: list) -> dict[str, Any] | None:
    """The raw run of OTLP spans that all come from the SDK's OpenInference instrumentation, built
    like the SDK's own export; None for any other spans (left to the generic mapping)."""
    if not spans or any((s.scope or {}).get("name") not in SCOPES for s in spans):
        return None
    if len({s.trace_id for s in spans}) != 1:
        return None  # a conversation of several traces: the generic mapping groups those
    from app.ingest.readers.openai_agents import _Trace, trace_to_builder

    head, items = span_items(spans)
    tr = _Trace(spans[0].trace_id)
    tr.head = head
    tr.spans = [(i, None) for i in items]
    b = trace_to_builder(tr, run_id=run_id)
    b.metadata["source_format"] = "otlp"
    b.metadata["otlp_dialect"] = "openai-agents (openinference)"
    return b.build(order_by_time=True)
