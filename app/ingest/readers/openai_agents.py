"""OpenAI Agents SDK traces (openai/openai-agents-python, ``agents.tracing``), as its exporter writes them.

The backend exporter posts ``{"data": [item, ...]}``; an item is a trace, ``{"object": "trace",
"id", "workflow_name", "group_id", "metadata"}``, or a span, ``{"object": "trace.span", "id",
"trace_id", "parent_id", "started_at", "ended_at", "span_data": {...}, "error": {"message",
"data"} | null}``. This reader takes that payload, a JSON array of items, or JSON Lines of items or
of payloads (what a file-writing `TracingExporter` keeps), in any order and mixed across traces.

One run per conversation: the traces sharing a ``group_id`` (the SDK's conversation or thread id)
are one run, id ``openai-agents/group/<group_id>``; a trace without one is a run of its own, id
``openai-agents/<trace id>``. The scenario is the (first) workflow name; trace ids, group id and
trace ``metadata`` are kept in the run's metadata. Spans form a forest under their trace; each span belongs to the agent of its nearest ``agent`` span (itself
included). By ``span_data.type``:

* ``agent`` (``name``, ``tools``, ``handoffs``, ``output_type``): the agent, acting for the
  principal ``user`` (the human whose input the generations show); a private log event.
* ``generation`` (``input`` and ``output`` chat messages, ``model``, ``usage``): input messages of
  role ``user`` not seen before in the run are shared messages from the user to the agent; the
  output's assistant text is a message of the agent: shared with the user when the output calls
  no tool (an answer), else private (a step); model and usage in ``data``.
* ``function`` (``name``, ``input``, ``output``, ``mcp_data``): a private tool call at the span's
  start and its tool result (linked) at its end; an error is the result, marked ``is_error``.
* ``handoff`` (``from_agent``, ``to_agent``): a shared delegation between the two agents.
* ``guardrail`` (``name``, ``triggered``): a check (``passed`` = not triggered) and a private log.
* ``response`` (``response_id``, ``usage``): a private log; the SDK exports no text for it (the
  Responses API keeps it server-side), which the run's notes say.
* ``custom`` (``name``, ``data``; the SDK's task/turn spans too), ``mcp_tools``, ``transcription``,
  ``speech``, ``speech_group``: log events (texts as content).

Events are ordered by time. A span error is kept in the event's ``data.error`` and makes the run
``error`` when it is on an agent span. Every span_data key carrying text that none of this maps
is a warning.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item
from app.ingest.readers.base import NO, Reader, Sniff
from app.ingest.readers.builder import RunBuilder, as_text, load_json_or_lines, peek_text

USER = "user"
_KNOWN = {
    "agent": {"type", "name", "handoffs", "tools", "output_type"},
    "generation": {"type", "input", "output", "model", "model_config", "usage"},
    "function": {"type", "name", "input", "output", "mcp_data"},
    "handoff": {"type", "from_agent", "to_agent"},
    "guardrail": {"type", "name", "triggered"},
    "response": {"type", "response_id", "usage"},
    "custom": {"type", "name", "data"},
    "mcp_tools": {"type", "server", "result"},
    "transcription": {"type", "input", "output", "model", "model_config"},
    "speech": {"type", "input", "output", "model", "model_config", "first_content_at"},
    "speech_group": {"type", "input"},
}
_SPAN_KEYS = {"object", "id", "trace_id", "parent_id", "started_at", "ended_at", "span_data", "error", "metadata"}
_TRACE_KEYS = {"object", "id", "workflow_name", "group_id", "metadata"}


def _items(doc: Any) -> Iterator[Any]:
    if isinstance(doc, dict) and isinstance(doc.get("data"), list) and "object" not in doc:
        yield from doc["data"]
    elif isinstance(doc, list):
        for d in doc:
            yield from _items(d)
    else:
        yield doc


def _is_span(item: Any) -> bool:
    return isinstance(item, dict) and (item.get("object") == "trace.span" or isinstance(item.get("span_data"), dict))


def _error_text(err: dict) -> str:
    text = as_text(err.get("message")) or "error"
    data = err.get("data")
    if data:
        text = f"{text}: {as_text(data.get('error') if isinstance(data, dict) and isinstance(data.get('error'), str) else data)}"
    return text


def _msg_text(m: Any) -> str | None:
    return as_text(m.get("content")) if isinstance(m, dict) else as_text(m)


class _Trace:
    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.head: dict[str, Any] | None = None
        self.spans: list[tuple[dict, Location]] = []
        self.where: Location | None = None


def _span_agent(span: dict, by_id: dict[str, dict], cache: dict[str, str | None]) -> str | None:
    sid = span.get("id")
    if sid in cache:
        return cache[sid]
    seen, cur, found = set(), span, None
    while cur is not None and cur.get("id") not in seen:
        seen.add(cur.get("id"))
        sd = cur.get("span_data") or {}
        if sd.get("type") == "agent" and isinstance(sd.get("name"), str):
            found = sd["name"]
            break
        cur = by_id.get(cur.get("parent_id"))
    cache[sid] = found
    return found


def trace_to_item(tr: _Trace) -> ImportItem:
    """The run of one trace as an ImportItem."""
    return trace_to_builder(tr).item(tr.where or Location(), order_by_time=True)


def trace_to_builder(tr: _Trace, run_id: str | None = None) -> RunBuilder:
    """The run of one trace, as a `RunBuilder` (`app.ingest.readers.otlp_agents_sdk` builds the
    SDK's spans received over OTLP through this too)."""
    head = tr.head or {}
    spans = sorted(tr.spans, key=lambda s: (s[0].get("started_at") or "", s[0].get("ended_at") or ""))
    by_id = {s.get("id"): s for s, _ in spans if isinstance(s.get("id"), str)}
    workflow = head.get("workflow_name") if isinstance(head.get("workflow_name"), str) else None
    b = RunBuilder(run_id or f"openai-agents/{tr.trace_id}", scenario=workflow or "unknown", family="openai-agents",
                   title=workflow, default_principal=USER, source_format="openai-agents")
    b.principal(USER, name="user")
    trace_extra = b.check_keys(head, _TRACE_KEYS, "trace", kept="metadata.openai_agents")
    b.metadata["openai_agents"] = {k: v for k, v in {"trace_id": tr.trace_id, "group_id": head.get("group_id"),
                                                      "metadata": head.get("metadata"), "extra": trace_extra or None,
                                                      "workflow_name": workflow}.items() if v is not None}
    if tr.head is None:
        b.note("no trace item for this trace id: the workflow name is unknown")
    cache: dict[str, str | None] = {}
    first_agent = next((s["span_data"]["name"] for s, _ in spans if (s.get("span_data") or {}).get("type") == "agent"
                        and isinstance(s["span_data"].get("name"), str)), None)
    seen_user: set[str] = set()
    span_seq: dict[str, int] = {}
    responses = 0
    for span, _where in spans:
        sd = span.get("span_data") if isinstance(span.get("span_data"), dict) else {}
        kind = sd.get("type")
        sid = span.get("id")
        at = f"span {sid}"
        agent = _span_agent(span, by_id, cache) or first_agent or "agent"
        start, end = span.get("started_at"), span.get("ended_at")
        err = span.get("error") if isinstance(span.get("error"), dict) else None
        base = {"span_id": sid, "parent_id": span.get("parent_id"), "started_at": start, "ended_at": end}
        if err:
            base["error"] = err
        if span.get("metadata"):
            base["span_metadata"] = span["metadata"]
        b.check_keys(span, _SPAN_KEYS, at, kept="data")
        known = _KNOWN.get(kind)
        extra = b.check_keys(sd, known, f"{at}.span_data", kept="data.extra") if known else {}
        if extra:
            base["extra"] = extra
        parent = span_seq.get(span.get("parent_id"))
        if kind == "agent":
            b.agent(agent, role="agent", metadata={k: sd.get(k) for k in ("tools", "handoffs", "output_type")
                                                   if sd.get(k) is not None})
            span_seq[sid] = b.thought(agent, f"agent {agent} runs", ts=start, parent=parent, data={**base, "span": "agent"})
            if err:
                b.status = "error"
        elif kind == "generation":
            for m in sd.get("input") or []:
                if isinstance(m, dict) and m.get("role") in ("system", "developer") and _msg_text(m):
                    state = b.agents.get(b.agent(agent), {}).setdefault("private_state", {})
                    if _msg_text(m) not in state.values():
                        state[f"instructions_{len(state)}" if state else "instructions"] = _msg_text(m)
                if isinstance(m, dict) and m.get("role") == "user":
                    text = _msg_text(m)
                    if text and text not in seen_user:
                        seen_user.add(text)
                        b.message(USER, m.get("content"), to=[agent], ts=start, data={"span_id": sid, "from": "input"})
            out = [m for m in sd.get("output") or [] if isinstance(m, dict)]
            text = "\n".join(t for t in (_msg_text(m) for m in out) if t) or None
            calls = [c for m in out for c in (m.get("tool_calls") or [])]
            data = {**base, "span": "generation", "model": sd.get("model"), "usage": sd.get("usage"),
                    "model_config": sd.get("model_config"), "input": sd.get("input"), "output": sd.get("output")}
            if text and not calls:
                span_seq[sid] = b.message(agent, text, to=[USER], ts=end, parent=parent, data=data)
            else:
                names = ", ".join(str((c.get("function") or {}).get("name") or c.get("name")) for c in calls
                                  if isinstance(c, dict))
                span_seq[sid] = b.thought(agent, text or (f"calls {names}" if names else "generation"), ts=end,
                                          parent=parent, data=data)
        elif kind == "function":
            name = sd.get("name")
            call = b.tool_call(agent, name, sd.get("input"), ts=start, parent=parent,
                               data={**base, "span": "function", "mcp_data": sd.get("mcp_data")})
            span_seq[sid] = call
            result = sd.get("output")
            if result is None and err:
                result = _error_text(err)
            b.tool_result(agent, result, parent=call, name=name, is_error=bool(err) or None, ts=end, data=base)
        elif kind == "handoff":
            src = sd.get("from_agent") if isinstance(sd.get("from_agent"), str) else agent
            dst = sd.get("to_agent") if isinstance(sd.get("to_agent"), str) else None
            if dst is None:
                b.warn(f"{at}: a hand-off without to_agent; kept as a log event")
                span_seq[sid] = b.thought(src, f"hand-off from {src}", ts=start, parent=parent, data=base)
            else:
                span_seq[sid] = b.handoff(src, dst, f"hand-off from {src} to {dst}", ts=start, parent=parent,
                                          data={**base, "span": "handoff"})
        elif kind == "guardrail":
            name = sd.get("name")
            triggered = bool(sd.get("triggered"))
            span_seq[sid] = b.thought(agent, f"guardrail {name}: {'triggered' if triggered else 'passed'}", ts=start,
                                      parent=parent, data={**base, "span": "guardrail", "triggered": triggered})
            b.check("openai-agents-guardrail", str(name), not triggered, level="L1", agent=agent,
                    evidence=[span_seq[sid]])
        elif kind == "response":
            responses += 1
            span_seq[sid] = b.thought(agent, f"model response {sd.get('response_id') or ''}".strip(), ts=end,
                                      parent=parent, data={**base, "span": "response", "response_id": sd.get("response_id"),
                                                           "usage": sd.get("usage")})
        elif kind in ("transcription", "speech", "speech_group"):
            inp, out = sd.get("input"), sd.get("output")
            text = as_text(out.get("data") if isinstance(out, dict) else out) if kind == "transcription" else \
                as_text(inp)
            span_seq[sid] = b.thought(agent, text or kind, ts=start, parent=parent,
                                      data={**base, "span": kind, "model": sd.get("model")})
        elif kind in ("custom", "mcp_tools"):
            label = sd.get("name") or sd.get("server") or kind
            payload = sd.get("data") if kind == "custom" else sd.get("result")
            text = f"{kind} {label}"
            if payload not in (None, {}, []):
                text = f"{text}: {as_text(payload)}"
            span_seq[sid] = b.thought(agent, text, ts=start, parent=parent,
                                      data={**base, "span": kind, "payload": payload})
        else:
            b.warn(f"{at}: unknown span type {kind!r}; kept as a log event")
            span_seq[sid] = b.thought(agent, json.dumps(sd, ensure_ascii=False, sort_keys=True, default=str)[:2000],
                                      ts=start, parent=parent, data={**base, "span_data": sd})
        if err and kind not in ("function",):
            b.event("log", agent, f"error: {_error_text(err)}", ts=end, parent=span_seq.get(sid),
                    data={"span_id": sid, "error": err})
    if responses:
        b.note(f"{responses} response span(s): the SDK exports no model text for them (Responses API)")
    return b


def iter_items(path: Path, shown: str) -> Iterator[ImportItem]:
    traces: dict[str, _Trace] = {}
    for rec in load_json_or_lines(path, shown):
        if isinstance(rec, ImportItem):
            yield rec
            continue
        doc, loc = rec
        for item in _items(doc):
            if not isinstance(item, dict):
                yield error_item(loc, f"an exported trace item must be an object, got {type(item).__name__}")
                continue
            tid = item.get("trace_id") if _is_span(item) else item.get("id") if item.get("object") == "trace" else None
            if not isinstance(tid, str) or not tid:
                yield error_item(loc, "an item that is neither a trace (object: trace, id) nor a span with a trace_id",
                                 field="trace_id")
                continue
            tr = traces.setdefault(tid, _Trace(tid))
            tr.where = tr.where or loc
            if _is_span(item):
                tr.spans.append((item, loc))
            else:
                tr.head = item
    groups: dict[str, list[_Trace]] = {}
    for tr in traces.values():
        gid = (tr.head or {}).get("group_id")
        if tr.spans and isinstance(gid, str) and gid:
            groups.setdefault(gid, []).append(tr)
    for tr in traces.values():  # in the order the file names them; a conversation where it starts
        if not tr.spans:
            yield error_item(tr.where or Location(shown), "a trace without spans (nothing to import)",
                             run_id=f"openai-agents/{tr.trace_id}", field="data")
            continue
        gid = (tr.head or {}).get("group_id")
        if not (isinstance(gid, str) and gid):
            yield trace_to_item(tr)
        elif groups[gid][0] is tr:
            yield _conversation_item(gid, groups[gid], shown)


def _conversation_item(gid: str, trs: list[_Trace], shown: str) -> ImportItem:
    """One run of the traces that share the group id `gid` (ordered by their first span)."""
    trs = sorted(trs, key=lambda t: min((s.get("started_at") or "") for s, _ in t.spans))
    merged = _Trace(trs[0].trace_id)
    merged.head = dict(trs[0].head or {})
    merged.spans = [sp for t in trs for sp in t.spans]
    merged.where = trs[0].where
    b = trace_to_builder(merged, run_id=f"openai-agents/group/{gid}")
    meta = b.metadata["openai_agents"]
    if len(trs) > 1:
        meta["trace_ids"] = [t.trace_id for t in trs]
        workflows = [w for w in dict.fromkeys((t.head or {}).get("workflow_name") for t in trs) if w]
        if len(workflows) > 1:
            meta["workflow_names"] = workflows
        for t in trs[1:]:
            if (t.head or {}).get("metadata"):
                meta.setdefault("trace_metadata", {})[t.trace_id] = t.head["metadata"]
    return b.item(merged.where or Location(shown), order_by_time=True)


class OpenAIAgentsReader(Reader):
    name = "openai-agents"
    description = "OpenAI Agents SDK trace exports ({data: [trace, trace.span ...]}, arrays or JSON Lines of items)"

    def sniff(self, path: Path) -> Sniff:
        if not path.is_file():
            return NO
        head = peek_text(path)
        if '"trace.span"' in head and '"span_data"' in head:
            return Sniff(0.95, "items with object trace.span and span_data (OpenAI Agents SDK export)")
        if '"span_data"' in head and '"trace_id"' in head:
            return Sniff(0.7, "spans with span_data and trace_id (OpenAI Agents SDK-like)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        yield from iter_items(path, shown)
