"""OpenTelemetry traces (OTLP) -> canonical runs: one mapping for trace files and for POST /v1/traces.

Input shapes (pure parsing, no database):

* OTLP/JSON as the collector's ``file`` exporter writes it: one ``ExportTraceServiceRequest`` per
  line (``{"resourceSpans": [{"resource": {...}, "scopeSpans": [{"scope": {...}, "spans": [...]}]}]}``),
  or one such document pretty-printed, or a JSON array of them. Ids are hex (base64 accepted too),
  timestamps nanosecond integers written as strings, attribute values typed
  (``stringValue``, ``intValue``, ``doubleValue``, ``boolValue``, ``arrayValue``, ``kvlistValue``,
  ``bytesValue``), ``kind`` an integer (or its enum name), ``status.code`` 0/1/2 (or its name).
  The older ``instrumentationLibrarySpans`` spelling is read too.
* OTLP protobuf (``ExportTraceServiceRequest`` bytes, what the official exporters send by default):
  `spans_from_protobuf`.

Both turn into the same flat span dicts (`Span`), and `build_runs` maps spans onto runs:

* A run is a conversation: ``gen_ai.conversation.id`` (GenAI semantic conventions) or
  ``session.id`` (OpenInference) on any span of a trace puts the whole trace in that run; a trace
  with neither is a run of its own (run id = trace id). Spans of one run may come from many traces,
  files, batches and processes.
* Agents ("lanes") come from agent names: ``gen_ai.agent.name`` (else ``gen_ai.agent.id``),
  OpenInference ``agent.name`` (an ``AGENT`` span without one is named by ``graph.node.name`` or its
  span name); a span without its own agent is in its nearest ancestor's lane, else in the lane of
  its resource's ``service.name``.
* Spans become events in their agent's lane, ordered by time (seq = time order); a span's event
  has ``parent_seq`` = the event of its parent span:

  - ``invoke_agent`` / OpenInference ``AGENT``: when another agent calls it (``gen_ai.caller.name``
    / ``gen_ai.caller.id``, or the parent span is in another lane) a shared ``delegation`` event from
    the caller to the agent (content: the input), and, when it answers, a shared ``message`` back at
    the span's end (content: the output); called by nobody: a private ``log`` event (content: the
    input) and a private ``message`` with the output.
  - ``chat`` / ``text_completion`` / ``generate_content`` / OpenInference ``LLM``: a private
    ``message`` (content: the output text, data: model, input and output messages, usage).
  - ``execute_tool`` / OpenInference ``TOOL``: a private ``tool_call`` (data: tool name, id, type,
    arguments) and, at the span's end, a ``tool_result`` (data: the result) whose parent is the call.
    A tool span naming ``gen_ai.transfer.target.name`` is a hand-off: a shared ``delegation`` to the
    target (data: ``transfer_mode``); the target's own ``invoke_agent`` under it is then a private
    ``log`` in the target's lane.
  - A2A spans (any ``a2a.*`` attribute, e.g. ``a2a.method.name``, ``a2a.message.id``,
    ``a2a.task.id``, ``a2a.task.state``): a shared ``message`` between the caller and the remote
    agent (``gen_ai.agent.name`` of a CLIENT span, else ``server.address``); a span naming a task
    state is a ``state_update``.
  - anything else (``CHAIN`` and framework spans): a private ``log`` event (content: span name).

  Texts come from ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (else OpenInference
  ``input.value`` / ``output.value`` and ``llm.input_messages.N.message.*``, else the older flattened
  ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes or ``gen_ai.user.message`` /
  ``gen_ai.choice`` span events).

  Which attribute feeds which of these, per dialect (GenAI, OpenInference, OpenLLMetry's
  ``gen_ai.prompt.N`` / ``gen_ai.completion.N`` / ``traceloop.*``, Google ADK's ``gcp.vertex.agent.*``
  and its ``agent_run [NAME]`` / ``call_llm`` / ``execute_tool NAME`` spans), is the table in
  app.ingest.readers.otlp_dialects. For OpenLLMetry and ADK LLM spans, the user's turns and system
  instructions the model was given that no event shows yet become events (a shared message from the
  principal ``user``, a private log), and a final answer is a shared message to the user. An
  attribute that carries text but is in no row of the table is an import warning.

  Every event's ``data`` keeps what has no canonical place: ``otel`` (trace/span/parent ids, name,
  kind, status, start and end in nanoseconds, scope) and ``attributes`` (all of them, verbatim),
  plus span ``events`` and ``links`` when present. Nothing is dropped.
* A run's status is ``error`` when a root span failed, ``failed`` when an A2A task ended
  ``failed``/``rejected``, else ``completed``; scenario ``unknown`` unless a sidecar names it
  (app.ingest.sidecar).
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location, RunFormatError
from app.ingest.items import ImportItem, error_item, item_from_raw
from app.ingest.readers import otlp_dialects as dialects
from app.ingest.readers import peek
from app.ingest.readers.base import Reader, Sniff
from app.ingest.safety import safejson
from app.ingest.safety.limits import InputLimits, input_limits

SOURCE_FORMAT = "otlp"
NO_SCENARIO_NOTE = ("imported from OpenTelemetry traces: the scenario, the principals and the agents' "
                    "private state are unknown unless a sidecar names them")
SPAN_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
              "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
KIND_CLIENT = 3
STATUS_ERROR = 2
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
FAILED_STATES = frozenset({"failed", "rejected"})


class OtlpFormatError(ValueError):
    """A document that is not an OTLP trace export at all (the whole body is refused)."""


class OtlpTooLarge(OtlpFormatError):
    """A body over a limit as a whole (more spans than allowed, its CPU budget spent): refused (413)."""


# --------------------------------------------------------------------------- input limits per span

def _string_over(s: str, limit: int) -> int | None:
    """The UTF-8 size of `s` when it is over `limit` bytes, else None (cheap for short strings)."""
    n = len(s)
    if n * 4 <= limit:
        return None
    size = n if n > limit else len(s.encode("utf-8", "surrogatepass"))
    return size if size > limit else None


def value_problem(value: Any, path: str, lim: InputLimits, depth: int = 0) -> str | None:
    """The first part of an attribute value over the input limits (a string over MAX_STRING_BYTES,
    nesting deeper than MAX_JSON_DEPTH), named by its path; None when it fits."""
    if isinstance(value, str):
        size = _string_over(value, lim.max_string_bytes)
        if size is not None:
            return f"{path} is {size} bytes, more than MAX_STRING_BYTES ({lim.max_string_bytes})"
        return None
    if isinstance(value, (dict, list)):
        if depth >= lim.max_json_depth:
            return f"{path} is nested deeper than MAX_JSON_DEPTH ({lim.max_json_depth})"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(k, str) and (p := value_problem(k, f"{path} key", lim, depth + 1)) is not None:
                return p
            sub = f"{path}[{k!r}]" if isinstance(k, str) else f"{path}[{k}]"
            if (p := value_problem(v, sub, lim, depth + 1)) is not None:
                return p
    return None


def attributes_problem(attrs: dict[str, Any], what: str, lim: InputLimits) -> str | None:
    for key, v in attrs.items():
        name = key if _string_over(key, 200) is None else key[:200] + "..."
        if (p := value_problem(key, f"{what} key {name!r}", lim)) is not None:
            return p
        if (p := value_problem(v, f"{what} {name!r}", lim, 1)) is not None:
            return p
    return None


def span_problem(span: Span, lim: InputLimits) -> str | None:
    """The first value of `span` (its own fields: name, status, attributes, span events, links)
    over the input limits, named; None when it fits. Resource and scope are checked once per
    resource (`attributes_problem`)."""
    for what, v in (("name", span.name), ("status message", span.status.get("message"))):
        if isinstance(v, str) and (p := value_problem(v, what, lim)) is not None:
            return p
    if (p := attributes_problem(span.attributes, "attribute", lim)) is not None:
        return p
    for i, e in enumerate(span.events):
        if isinstance(e.get("name"), str) and (p := value_problem(e["name"], f"events[{i}].name", lim)) is not None:
            return p
        if (p := attributes_problem(e.get("attributes") or {}, f"events[{i}] attribute", lim)) is not None:
            return p
    for i, ln in enumerate(span.links):
        if (p := attributes_problem(ln.get("attributes") or {}, f"links[{i}] attribute", lim)) is not None:
            return p
    return None


def _span_label(path: str, span_id: str, name: str) -> str:
    short = name if len(name) <= 80 else name[:80] + "..."
    return f"{path} (span {span_id}{' ' + repr(short) if short else ''})"


class _Guard:
    """Counts spans against `max_spans` and calls `budget` every 256 spans."""

    def __init__(self, max_spans: int | None, budget: Callable[[], None] | None) -> None:
        self.max_spans, self.budget, self.n = max_spans, budget, 0

    def total(self, n: int) -> None:
        if self.max_spans is not None and n > self.max_spans:
            raise OtlpTooLarge(f"{n} spans in one request, more than OTLP_MAX_SPANS_PER_REQUEST "
                               f"({self.max_spans}): send smaller batches")

    def step(self) -> None:
        self.n += 1
        if self.budget is not None and self.n % 256 == 0:
            self.budget()


@dataclass
class Span:
    """One span, flattened from OTLP/JSON or protobuf (ids as lower-case hex)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_ns: int | None
    end_ns: int | None
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    where: str = ""

    @property
    def key(self) -> str:
        return f"{self.trace_id}:{self.span_id}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict that `Span.from_json` reads back (used to keep spans between batches)."""
        return {"trace_id": self.trace_id, "span_id": self.span_id, "parent_span_id": self.parent_span_id,
                "name": self.name, "kind": self.kind, "start_ns": _ns_text(self.start_ns),
                "end_ns": _ns_text(self.end_ns), "attributes": self.attributes, "resource": self.resource,
                "scope": self.scope, "status": self.status, "events": self.events, "links": self.links}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Span:
        return cls(trace_id=d["trace_id"], span_id=d["span_id"], parent_span_id=d.get("parent_span_id"),
                   name=d.get("name") or "", kind=int(d.get("kind") or 0), start_ns=_int_or_none(d.get("start_ns")),
                   end_ns=_int_or_none(d.get("end_ns")), attributes=d.get("attributes") or {},
                   resource=d.get("resource") or {}, scope=d.get("scope") or {}, status=d.get("status") or {},
                   events=d.get("events") or [], links=d.get("links") or [])


def _ns_text(v: int | None) -> str | None:
    return None if v is None else str(v)


def _int_or_none(v: Any) -> int | None:
    if v is None or v == "":
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- OTLP/JSON decoding

def any_value(v: Any) -> Any:
    """The Python value of an OTLP/JSON AnyValue (``{"stringValue": ...}`` etc.)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        d = v["doubleValue"]
        if isinstance(d, str):  # "NaN", "Infinity" as proto3 JSON writes them
            try:
                d = float(d)
            except ValueError:
                return d
        return d if not isinstance(d, float) or math.isfinite(d) else str(d)
    if "arrayValue" in v:
        vals = (v["arrayValue"] or {}).get("values") or []
        return [any_value(x) for x in vals]
    if "kvlistValue" in v:
        return attributes_dict((v["kvlistValue"] or {}).get("values") or [])
    if "bytesValue" in v:
        return {"bytes_base64": v["bytesValue"]}
    return None


def attributes_dict(kvs: Any) -> dict[str, Any]:
    """OTLP/JSON ``[{"key": k, "value": AnyValue}]`` -> ``{k: value}`` (later keys win)."""
    out: dict[str, Any] = {}
    if isinstance(kvs, dict):  # already a plain mapping (some tools write that)
        return dict(kvs)
    for kv in kvs or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


_HEX = re.compile(r"^[0-9a-fA-F]+$")


def norm_id(value: Any) -> str | None:
    """A trace/span id as lower-case hex: hex kept, base64 (protobuf JSON mapping) decoded, empty -> None."""
    if not isinstance(value, str) or not value:
        return None
    if _HEX.match(value) and len(value) in (16, 32):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.lower() if _HEX.match(value) else value
    if len(raw) in (8, 16):
        return raw.hex()
    return value


def _ns(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value or None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip()) or None
    return None


def _enum(value: Any, names: dict[str, int]) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        return names.get(value.upper(), 0)
    return 0


def _json_scopes(rs: dict) -> list:
    scopes = rs.get("scopeSpans", rs.get("scope_spans", rs.get("instrumentationLibrarySpans"))) or []
    return scopes if isinstance(scopes, list) else []


def _json_span_count(resource_spans: list) -> int:
    return sum(len(ss.get("spans") or []) if isinstance(ss, dict) and isinstance(ss.get("spans"), list) else 0
               for rs in resource_spans if isinstance(rs, dict) for ss in _json_scopes(rs))


def spans_from_json(doc: Any, where: str = "", *, limits: InputLimits | None = None, max_spans: int | None = None,
                    budget: Callable[[], None] | None = None) -> tuple[list[Span], list[str]]:
    """Spans of one OTLP/JSON ``ExportTraceServiceRequest``; returns (spans, problems).

    A span holding a value over the input limits (`span_problem`) is rejected, named in `problems`.
    Raises OtlpFormatError when `doc` is not a trace export (no ``resourceSpans``), OtlpTooLarge
    beyond `max_spans` spans; `budget` is called every 256 spans (it raises to stop)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans", doc.get("resource_spans")), list):
        raise OtlpFormatError("not an OTLP trace export: expected an object with a 'resourceSpans' array")
    lim = limits or input_limits()
    guard = _Guard(max_spans, budget)
    all_rs = doc.get("resourceSpans", doc.get("resource_spans")) or []
    guard.total(_json_span_count(all_rs))
    spans: list[Span] = []
    problems: list[str] = []
    for i, rs in enumerate(all_rs):
        if not isinstance(rs, dict):
            problems.append(f"{where}resourceSpans[{i}]: not an object")
            continue
        resource = attributes_dict((rs.get("resource") or {}).get("attributes"))
        shared = attributes_problem(resource, "resource attribute", lim)
        for j, ss in enumerate(_json_scopes(rs)):
            if not isinstance(ss, dict):
                problems.append(f"{where}resourceSpans[{i}].scopeSpans[{j}]: not an object")
                continue
            sc = ss.get("scope", ss.get("instrumentationLibrary")) or {}
            scope = {k: sc[k] for k in ("name", "version") if isinstance(sc, dict) and sc.get(k)}
            if isinstance(sc, dict) and sc.get("attributes"):
                scope["attributes"] = attributes_dict(sc["attributes"])
            bad_scope = shared or value_problem(scope, "scope", lim)
            for k, sp in enumerate(ss.get("spans") or []):
                guard.step()
                path = f"{where}resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                if not isinstance(sp, dict):
                    problems.append(f"{path}: not an object")
                    continue
                if bad_scope is not None:
                    problems.append(f"{path}: {bad_scope}; span rejected")
                    continue
                tid = norm_id(sp.get("traceId", sp.get("trace_id")))
                sid = norm_id(sp.get("spanId", sp.get("span_id")))
                if tid is None or sid is None:
                    problems.append(f"{path}: span without {'traceId' if tid is None else 'spanId'} skipped")
                    continue
                status = sp.get("status") if isinstance(sp.get("status"), dict) else {}
                spans.append(Span(
                    trace_id=tid, span_id=sid,
                    parent_span_id=norm_id(sp.get("parentSpanId", sp.get("parent_span_id"))),
                    name=sp.get("name") if isinstance(sp.get("name"), str) else "",
                    kind=_enum(sp.get("kind"), SPAN_KINDS),
                    start_ns=_ns(sp.get("startTimeUnixNano", sp.get("start_time_unix_nano"))),
                    end_ns=_ns(sp.get("endTimeUnixNano", sp.get("end_time_unix_nano"))),
                    attributes=attributes_dict(sp.get("attributes")),
                    resource=resource, scope=scope,
                    status={"code": _enum(status.get("code"), STATUS_CODES),
                            **({"message": status["message"]} if status.get("message") else {})},
                    events=[{"name": e.get("name"), "time_ns": _ns_text(_ns(e.get("timeUnixNano"))),
                             "attributes": attributes_dict(e.get("attributes"))}
                            for e in sp.get("events") or [] if isinstance(e, dict)],
                    links=[{"trace_id": norm_id(ln.get("traceId")), "span_id": norm_id(ln.get("spanId")),
                            "attributes": attributes_dict(ln.get("attributes"))}
                           for ln in sp.get("links") or [] if isinstance(ln, dict)],
                    where=path,
                ))
                bad = span_problem(spans[-1], lim)
                if bad is not None:
                    spans.pop()
                    problems.append(f"{_span_label(path, sid, sp.get('name') if isinstance(sp.get('name'), str) else '')}"
                                    f": {bad}; span rejected")
    return spans, problems


# --------------------------------------------------------------------------- protobuf decoding

def _pb_value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _pb_attrs(v.kvlist_value.values)
    if which == "bytes_value":
        return {"bytes_base64": base64.b64encode(v.bytes_value).decode("ascii")}
    val = getattr(v, which)
    if isinstance(val, float) and not math.isfinite(val):
        return str(val)
    return val


def _pb_attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in kvs}


def spans_from_protobuf(data: bytes, *, limits: InputLimits | None = None, max_spans: int | None = None,
                        budget: Callable[[], None] | None = None) -> tuple[list[Span], list[str]]:
    """Spans of a protobuf ``ExportTraceServiceRequest``; raises OtlpFormatError if it does not parse.

    Limits as `spans_from_json`: the spans are counted before any is converted, and each span is
    checked (`span_problem`) as it is converted; one over the limits is rejected, named in the
    problems, and dropped."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    lim = limits or input_limits()
    guard = _Guard(max_spans, budget)
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(data)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise OtlpFormatError(f"not a protobuf ExportTraceServiceRequest: {exc}") from None
    guard.total(sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans))
    spans: list[Span] = []
    problems: list[str] = []
    for i, rs in enumerate(req.resource_spans):
        resource = _pb_attrs(rs.resource.attributes)
        shared = attributes_problem(resource, "resource attribute", lim)
        for j, ss in enumerate(rs.scope_spans):
            scope = {k: getattr(ss.scope, k) for k in ("name", "version") if getattr(ss.scope, k)}
            if len(ss.scope.attributes):
                scope["attributes"] = _pb_attrs(ss.scope.attributes)
            bad_scope = shared or value_problem(scope, "scope", lim)
            for k, sp in enumerate(ss.spans):
                guard.step()
                path = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                if not sp.trace_id or not sp.span_id:
                    problems.append(f"{path}: span without {'traceId' if not sp.trace_id else 'spanId'} skipped")
                    continue
                if bad_scope is not None:
                    problems.append(f"{path}: {bad_scope}; span rejected")
                    continue
                spans.append(Span(
                    trace_id=sp.trace_id.hex(), span_id=sp.span_id.hex(),
                    parent_span_id=sp.parent_span_id.hex() or None, name=sp.name, kind=int(sp.kind),
                    start_ns=sp.start_time_unix_nano or None, end_ns=sp.end_time_unix_nano or None,
                    attributes=_pb_attrs(sp.attributes), resource=resource, scope=scope,
                    status={"code": int(sp.status.code), **({"message": sp.status.message} if sp.status.message else {})},
                    events=[{"name": e.name, "time_ns": _ns_text(e.time_unix_nano or None),
                             "attributes": _pb_attrs(e.attributes)} for e in sp.events],
                    links=[{"trace_id": ln.trace_id.hex(), "span_id": ln.span_id.hex(),
                            "attributes": _pb_attrs(ln.attributes)} for ln in sp.links],
                    where=path,
                ))
                bad = span_problem(spans[-1], lim)
                if bad is not None:
                    spans.pop()
                    problems.append(f"{_span_label(path, sp.span_id.hex(), sp.name)}: {bad}; span rejected")
    return spans, problems


# --------------------------------------------------------------------------- attribute helpers

def _str(attrs: dict, *keys: str) -> str | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, str) and v.strip():
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
    return None


def _maybe_json(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in ("{", "["):
        try:
            return safejson.loads(v)
        except ValueError:
            return v
    return v


def unflatten(attrs: dict[str, Any], prefix: str) -> Any:
    """OpenInference's flattened lists: ``prefix.0.message.role`` ... -> ``[{"message": {"role": ...}}]``."""
    root: dict = {}
    pre = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(pre):
            continue
        node = root
        parts = key[len(pre):].split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                break
        else:
            node[parts[-1]] = value
    return _listify(root)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = {k: _listify(v) for k, v in node.items()}
    if out and all(k.isdigit() for k in out):
        return [out[k] for k in sorted(out, key=int)]
    return out


def message_text(messages: Any) -> str | None:
    """The text of GenAI/OpenInference chat messages (text parts joined by newlines)."""
    messages = _maybe_json(messages)
    if isinstance(messages, str):
        return messages
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return None
    texts: list[str] = []
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("message"), dict):  # OpenInference
            m = m["message"]
        if not isinstance(m, dict):
            if isinstance(m, str):
                texts.append(m)
            continue
        content = m.get("content")
        if isinstance(content, str) and content:
            texts.append(content)
        for part in m.get("parts") or m.get("contents") or []:
            if isinstance(part, dict) and part.get("type", "text") == "text":
                t = part.get("content", part.get("text", part.get("message_content.text")))
                if isinstance(t, str) and t:
                    texts.append(t)
        if isinstance(m.get("content"), list):
            for part in m["content"]:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    return "\n".join(texts) if texts else None


def tool_calls_text(messages: Any) -> str | None:
    """``name(arguments)`` for each tool call requested in GenAI/OpenInference output messages."""
    messages = _maybe_json(messages)
    if not isinstance(messages, list):
        return None
    out: list[str] = []
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("message"), dict):
            m = m["message"]
        if not isinstance(m, dict):
            continue
        for part in m.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                args = part.get("arguments")
                out.append(f"{part.get('name')}({args if isinstance(args, str) else json.dumps(args)})")
        for tc in m.get("tool_calls") or []:
            fn = (tc.get("tool_call") or tc).get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) and isinstance(tc, dict) and tc.get("name"):
                fn = tc  # OpenLLMetry: gen_ai.completion.N.tool_calls.M.{id, name, arguments}
            if isinstance(fn, dict):
                out.append(f"{fn.get('name')}({fn.get('arguments') or ''})")
    return "\n".join(out) if out else None


def _value_text(v: Any) -> str | None:
    if v is None:
        return None
    v2 = _maybe_json(v)
    if isinstance(v2, (list, dict)):
        t = message_text(v2)
        if t:
            return t
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _event_text(span: Span, names: tuple[str, ...]) -> str | None:
    """Text of the older GenAI conventions' span events (``gen_ai.user.message``, ``gen_ai.choice``...)."""
    texts = []
    for e in span.events:
        if e.get("name") not in names:
            continue
        attrs = e.get("attributes") or {}
        for key in ("content", "gen_ai.prompt", "gen_ai.completion", "message"):
            t = _value_text(attrs.get(key))
            if t:
                texts.append(t)
                break
    return "\n".join(texts) if texts else None


def iso_ns(ns: int | None) -> str | None:
    """Nanoseconds since the epoch -> ISO 8601 UTC (microseconds; the exact value stays in data.otel)."""
    if ns is None:
        return None
    try:
        dt = datetime.fromtimestamp(ns // 1000 / 1e6, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return dt.isoformat(timespec="microseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------- classification

def operation(span: Span) -> str:
    """invoke_agent | llm | tool | a2a | other."""
    a = span.attributes
    op = _str(a, "gen_ai.operation.name")
    oi = (_str(a, "openinference.span.kind") or "").upper()
    if op == "invoke_agent" or oi == "AGENT":
        return "invoke_agent"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    if op in LLM_OPERATIONS or oi == "LLM":
        return "llm"
    for (key, value), named in dialects.OPERATIONS.items():
        if (_str(a, key) or "").lower() == value:
            return named
    if any(k.startswith("a2a.") for k in a):
        return "a2a"
    name = span.name.split(" ")[0] if span.name else ""
    if name == "invoke_agent":
        return "invoke_agent"
    if name == "execute_tool":
        return "tool"
    if name in LLM_OPERATIONS:
        return "llm"
    for pattern, named in dialects.SPAN_NAME_OPERATIONS:
        if span.name and pattern.match(span.name):
            return named
    return "other"


def own_agent(span: Span) -> str | None:
    """The agent a span names for itself, if any."""
    a = span.attributes
    name = _str(a, "gen_ai.agent.name", "agent.name", "gen_ai.agent.id")
    if name:
        return name
    if (_str(a, "openinference.span.kind") or "").upper() == "AGENT":
        return _str(a, "graph.node.name") or (span.name or None)
    if (_str(a, "traceloop.span.kind") or "").lower() == "agent":
        return _str(a, "traceloop.entity.name") or (span.name or None)
    for pattern in dialects.AGENT_SPAN_NAMES:
        m = pattern.match(span.name or "")
        if m and m.group(1).strip():
            return m.group(1).strip()
    return None


def conversation_of(span: Span) -> str | None:
    return _str(span.attributes, *(r.key for r in dialects.ATTRS if r.role == dialects.CONVERSATION))


def caller_of(span: Span) -> str | None:
    return _str(span.attributes, "gen_ai.caller.name", "gen_ai.caller.agent.name", "gen_ai.caller.id")


def transfer_target(span: Span) -> str | None:
    named = _str(span.attributes, *(r.key for r in dialects.ATTRS if r.role == dialects.TRANSFER_TARGET))
    if named:
        return named
    tool = _str(span.attributes, "gen_ai.tool.name", "tool.name") or (span.name or "").removeprefix("execute_tool ")
    arg = dialects.TRANSFER_TOOLS.get(tool.strip())
    if arg is not None:
        args = role_value(span.attributes, dialects.TOOL_ARGS)
        if isinstance(args, dict) and isinstance(args.get(arg), str) and args[arg].strip():
            return args[arg].strip()
    return None


def _decode_text(row: dialects.Attr, attrs: dict[str, Any]) -> str | None:
    v = attrs.get(row.key)
    if row.decode.startswith("flat:"):
        prefix = row.decode[5:]
        flat = unflatten(attrs, prefix)
        return (message_text(flat) or tool_calls_text(flat) or _refusal_text(flat)) if flat else None
    if v is None:
        return None
    if row.decode == "messages":
        return _value_text(v)
    if row.decode == "adk_request":
        return dialects.adk_request_text(v)
    if row.decode == "adk_response":
        return dialects.adk_response_text(v)
    if row.decode == "adk_contents":
        return dialects.adk_contents_text(v)
    if row.decode == "entity":
        return dialects.entity_text(v)
    return _value_text(v)


def _refusal_text(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    texts = [m["refusal"] for m in messages if isinstance(m, dict) and isinstance(m.get("refusal"), str)]
    return "\n".join(texts) if texts else None


def role_text(attrs: dict[str, Any], role: str, dialect: str | None = None) -> str | None:
    """The text of the first table row of `role` (app.ingest.otlp_dialects) that `attrs` holds."""
    for row in dialects.ATTRS:
        if row.role != role or (dialect is not None and row.dialect != dialect):
            continue
        present = row.key in attrs if "*" not in row.key else any(
            k.startswith(row.decode[5:] + ".") for k in attrs) if row.decode.startswith("flat:") else False
        if present:
            text = _decode_text(row, attrs)
            if text:
                return text
    return None


def role_value(attrs: dict[str, Any], role: str) -> Any:
    """The (JSON-decoded) value of the first table row of `role` that `attrs` holds."""
    for row in dialects.ATTRS:
        if row.role == role and "*" not in row.key and row.key in attrs:
            return _maybe_json(attrs[row.key])
    return None


# --------------------------------------------------------------------------- runs

def group_runs(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """Spans by run id: the trace's conversation id (else session id, else the trace id).

    A trace whose spans name several conversations is split by conversation; its spans without
    one go to the conversation named first (by time)."""
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    runs: dict[str, list[Span]] = {}
    for tid, group in by_trace.items():
        group.sort(key=_span_order)
        convs = [c for c in (conversation_of(s) for s in group) if c]
        default = convs[0] if convs else tid
        for s in group:
            runs.setdefault(conversation_of(s) or default, []).append(s)
    return runs


def run_keys_of(spans: Iterable[Span]) -> dict[str, set[str]]:
    """For each trace id: the run ids its spans belong to (see `group_runs`)."""
    out: dict[str, set[str]] = {}
    for rid, group in group_runs(spans).items():
        for s in group:
            out.setdefault(s.trace_id, set()).add(rid)
    return out


def _span_order(s: Span) -> tuple:
    return (s.start_ns if s.start_ns is not None else math.inf, s.end_ns or 0, s.trace_id, s.span_id)


class _RunBuilder:
    def __init__(self, run_id: str, spans: list[Span]) -> None:
        self.run_id = run_id
        self.spans = sorted(spans, key=_span_order)
        self.by_id: dict[tuple[str, str], Span] = {}
        for s in self.spans:
            self.by_id.setdefault((s.trace_id, s.span_id), s)
        self.lanes: dict[tuple[str, str], str] = {}
        self.agents: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[tuple, int, dict]] = []  # (sort key, order, event)
        self.primary: dict[tuple[str, str], int] = {}  # span -> index into self.events
        self.warnings: list[str] = []
        self.transfers: dict[tuple[str, str], str] = {}  # tool span -> target agent
        self.handoffs: set[tuple[str, str]] = set()  # (from lane, target) of hand-offs seen
        self.unmapped: dict[str, list[str]] = {}  # "span attribute 'k'" -> names of the spans holding it
        self.seen: set[str] = set()  # the texts events already show
        self.service_lanes: set[str] = set()  # lanes named only by a resource's service.name
        self.principals: dict[str, dict[str, Any]] = {}
        self.status = "completed"

    def parent(self, s: Span) -> Span | None:
        if not s.parent_span_id:
            return None
        return self.by_id.get((s.trace_id, s.parent_span_id))

    def lane(self, s: Span, depth: int = 0) -> str:
        key = (s.trace_id, s.span_id)
        if key in self.lanes:
            return self.lanes[key]
        name = own_agent(s)
        if name is not None and s.kind == KIND_CLIENT and operation(s) == "a2a":
            name = None  # a CLIENT A2A span names the remote agent; it runs in its caller's lane
        if name is None:
            p = self.parent(s) if depth < 500 else None
            if p is not None:
                name = self.lane(p, depth + 1)
            else:
                name = _str(s.resource, "service.name") or "agent"
                self.service_lanes.add(name)
        self.lanes[key] = name
        return name

    def agent(self, name: str, s: Span | None = None, role: str | None = None) -> str:
        a = self.agents.get(name)
        if a is None:
            a = self.agents[name] = {"id": name, "role": role, "metadata": {"source": SOURCE_FORMAT}}
        if s is not None and own_agent(s) == name:
            meta = a["metadata"]
            for key, attr in (("agent_id", "gen_ai.agent.id"), ("description", "gen_ai.agent.description"),
                              ("graph_node_id", "graph.node.id"), ("graph_node_parent_id", "graph.node.parent_id"),
                              ("service_name", "service.name")):
                v = _str(s.attributes, attr) or (_str(s.resource, attr) if attr == "service.name" else None)
                if v and key not in meta:
                    meta[key] = v
        if s is not None and a.get("model") is None and self.lane(s) == name:
            model = _str(s.attributes, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
            if model and operation(s) == "llm":
                a["model"] = model
        return name

    def who(self, name: str) -> str:
        """A principal's id as it is, any other actor as an agent."""
        return name if name in self.principals else self.agent(name)

    def context(self, s: Span, lane: str, parent_idx: int | None) -> None:
        """What an LLM span of a dialect without agent input spans (ADK, OpenLLMetry) was given
        that no event of the run shows yet: the user's turns (a shared message from the principal
        ``user`` to the agent), system instructions and other turns (the agent's private log)."""
        a = s.attributes
        turns: list[tuple[str, str]] = []
        req = _maybe_json(a.get("gcp.vertex.agent.llm_request"))
        if isinstance(req, dict):
            cfg = req.get("config") if isinstance(req.get("config"), dict) else {}
            sys_text = cfg.get("system_instruction", cfg.get("systemInstruction"))
            sys_text = dialects.content_text(sys_text) if isinstance(sys_text, dict) else sys_text
            if isinstance(sys_text, str) and sys_text.strip():
                turns.append(("system", sys_text))
            for c in dialects.adk_request_contents(req) or []:
                t = dialects.content_text(c)
                if t:
                    turns.append((str(c.get("role") or "user"), t))
        elif any(k.startswith("gen_ai.prompt.") for k in a):
            for m in unflatten(a, "gen_ai.prompt") or []:
                if isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].strip():
                    turns.append((str(m.get("role") or "user"), m["content"]))
        for role, text in turns:
            if text.strip() in self.seen:
                continue
            d = {"otel": {"span_id": s.span_id, "trace_id": s.trace_id, "part": "input"}, "role": role}
            if role == "user":
                self.principals.setdefault("user", {"id": "user", "kind": "person",
                                                    "name": "The user (role 'user' of the model input)"})
                self.emit(s, False, "message", "user", [lane], text, d, parent_idx)
            else:
                self.emit(s, False, "log", lane, [], text, d, parent_idx)

    def emit(self, s: Span, at_end: bool, kind: str, actor: str, recipients: list[str], content: str | None,
             data: dict, parent_idx: int | None) -> int:
        t = s.end_ns if at_end and s.end_ns is not None else s.start_ns
        if isinstance(content, str) and content.strip():
            self.seen.add(content.strip())
        ev = {"ts": iso_ns(t), "kind": kind, "actor": self.who(actor), "recipients": [self.who(r) for r in recipients],
              "visibility": "shared" if recipients else "private", "content": content, "data": data,
              "_parent_idx": parent_idx, "_ns": t}
        idx = len(self.events)
        # start events before end events at the same instant; then in span order
        self.events.append(((t if t is not None else math.inf, 1 if at_end else 0, idx), idx, ev))
        return idx

    def otel(self, s: Span) -> dict[str, Any]:
        d: dict[str, Any] = {"trace_id": s.trace_id, "span_id": s.span_id, "name": s.name, "kind": s.kind}
        if s.parent_span_id:
            d["parent_span_id"] = s.parent_span_id
        if s.status.get("code"):
            d["status"] = s.status
        d["start_ns"] = _ns_text(s.start_ns)
        d["end_ns"] = _ns_text(s.end_ns)
        if s.scope:
            d["scope"] = s.scope
        if s.resource.get("service.name"):
            d["service_name"] = s.resource["service.name"]
        return d

    def base_data(self, s: Span) -> dict[str, Any]:
        data: dict[str, Any] = {"otel": self.otel(s), "attributes": s.attributes}
        if s.events:
            data["span_events"] = s.events
        if s.links:
            data["links"] = s.links
        return data

    def parent_event(self, s: Span) -> int | None:
        p = self.parent(s)
        while p is not None:
            idx = self.primary.get((p.trace_id, p.span_id))
            if idx is not None:
                return idx
            p = self.parent(p)
        return None

    def build(self) -> dict[str, Any]:
        # parents first (spans are in start order; a child starting at its parent's instant may come
        # first, so resolve parents lazily by visiting them before their children)
        done: set[tuple[str, str]] = set()

        def visit(s: Span, depth: int = 0) -> None:
            key = (s.trace_id, s.span_id)
            if key in done:
                return
            done.add(key)
            p = self.parent(s)
            if p is not None and depth < 500:
                visit(p, depth + 1)
            self.span_events(s)

        for s in self.spans:
            visit(s)
        return self.finish()

    def span_events(self, s: Span) -> None:
        a = s.attributes
        op = operation(s)
        lane = self.agent(self.lane(s), s)
        parent = self.parent(s)
        parent_idx = self.parent_event(s)
        data = self.base_data(s)
        key = (s.trace_id, s.span_id)
        if s.status.get("code") == STATUS_ERROR and parent is None:
            self.status = "error"
        self.check_unmapped(s)
        inp = role_text(a, dialects.INPUT) \
            or _event_text(s, ("gen_ai.user.message", "gen_ai.system.message", "gen_ai.content.prompt"))
        out = role_text(a, dialects.OUTPUT) \
            or _event_text(s, ("gen_ai.choice", "gen_ai.assistant.message", "gen_ai.content.completion"))
        if op == "invoke_agent":
            caller = caller_of(s)
            if caller is None and parent is not None:
                plane = self.lane(parent)
                caller = plane if plane != lane else None
                if caller in self.service_lanes and dialects.runner_agent_span(s.name, a, parent.name):
                    caller = None  # ADK's runner / OpenLLMetry's workflow span: nobody called the agent
            if caller is not None:
                self.agent(caller, role=_str(a, "gen_ai.caller.type"))
            handed = (parent is not None and self.transfers.get((parent.trace_id, parent.span_id)) == lane) or (
                caller is not None and (caller, lane) in self.handoffs)
            if caller is not None and caller != lane and not handed:
                self.primary[key] = self.emit(s, False, "delegation", caller, [lane], inp, data, parent_idx)
                if out is not None:
                    self.emit(s, True, "message", lane, [caller], out, {"otel": {"span_id": s.span_id,
                              "trace_id": s.trace_id, "part": "output"}}, self.primary[key])
            else:
                self.primary[key] = self.emit(s, False, "log", lane, [], inp or s.name, data, parent_idx)
                if out is not None:
                    self.emit(s, True, "message", lane, [], out, {"otel": {"span_id": s.span_id,
                              "trace_id": s.trace_id, "part": "output"}}, self.primary[key])
        elif op == "tool":
            entity = (_str(a, "traceloop.span.kind") or "").lower() == "tool"
            args = role_value(a, dialects.TOOL_ARGS)
            if args is None:
                args = _maybe_json(a.get("traceloop.entity.input") if entity else a.get("input.value"))
            tool = {k: v for k, v in (
                ("name", _str(a, *(r.key for r in dialects.ATTRS if r.role == dialects.TOOL_NAME))
                 or (_str(a, "traceloop.entity.name") if entity else None)
                 or (s.name.removeprefix("execute_tool ").strip() or None)),
                ("call_id", _str(a, "gen_ai.tool.call.id", "tool_call.id", "tool.id")),
                ("type", _str(a, "gen_ai.tool.type")),
                ("description", _str(a, *(r.key for r in dialects.ATTRS if r.role == dialects.TOOL_DESCRIPTION))),
                ("arguments", args),
            ) if v is not None}
            target = transfer_target(s)
            data = {**data, "tool": tool}
            args_text = tool.get("arguments")
            args_text = args_text if isinstance(args_text, str) or args_text is None else json.dumps(
                args_text, ensure_ascii=False)
            if target is not None:
                data["transfer_mode"] = _str(a, "gen_ai.transfer.mode")
                data["transfer_target_type"] = _str(a, "gen_ai.transfer.target.type")
                self.transfers[key] = target
                self.handoffs.add((lane, target))
                self.agent(target, role=_str(a, "gen_ai.transfer.target.type"))
                self.primary[key] = self.emit(s, False, "delegation", lane, [target], args_text or tool.get("name"),
                                              data, parent_idx)
            else:
                self.primary[key] = self.emit(s, False, "tool_call", lane, [],
                                              f"{tool.get('name') or 'tool'}({args_text or ''})", data, parent_idx)
            result = role_value(a, dialects.TOOL_RESULT)
            if result is None:
                result = _maybe_json(a.get("traceloop.entity.output") if entity else a.get("output.value"))
            if result == {"result": None}:  # ADK's way of saying the tool returned nothing
                result = None
            if result is not None or s.status.get("code") == STATUS_ERROR:
                rdata: dict[str, Any] = {"otel": {"span_id": s.span_id, "trace_id": s.trace_id, "part": "result"},
                                         "tool": {k: tool[k] for k in ("name", "call_id") if k in tool},
                                         "result": _maybe_json(result)}
                if s.status.get("code") == STATUS_ERROR:
                    rdata["error"] = s.status.get("message") or _str(a, "error.type") or "error"
                text = result if isinstance(result, str) else (
                    (dialects.entity_text(result) if entity else json.dumps(result, ensure_ascii=False))
                    if result is not None else rdata.get("error"))
                if target is not None:
                    self.emit(s, True, "message", target, [lane], text, rdata, self.primary[key])
                else:
                    self.emit(s, True, "tool_result", lane, [], text, rdata, self.primary[key])
        elif op == "llm":
            adk_out = _maybe_json(a.get("gcp.vertex.agent.llm_response"))
            data = {**data, "model": _str(a, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name"),
                    "input_messages": _maybe_json(a.get("gen_ai.input.messages")) or unflatten(a, "llm.input_messages")
                    or unflatten(a, "gen_ai.prompt") or dialects.adk_request_contents(a.get("gcp.vertex.agent.llm_request"))
                    or _maybe_json(a.get("gcp.vertex.agent.data")) or None,
                    "output_messages": _maybe_json(a.get("gen_ai.output.messages"))
                    or unflatten(a, "llm.output_messages") or unflatten(a, "gen_ai.completion")
                    or ([adk_out["content"]] if isinstance(adk_out, dict) and isinstance(adk_out.get("content"), dict)
                        else None) or None}
            calls = tool_calls_text(data["output_messages"])
            if "gcp.vertex.agent.llm_request" in a or any(k.startswith("gen_ai.prompt.") for k in a):
                self.context(s, lane, parent_idx)
            system = role_text(a, dialects.SYSTEM)
            if system and system.strip() not in self.seen:
                self.emit(s, False, "log", lane, [], system, {"otel": {"span_id": s.span_id, "trace_id": s.trace_id,
                          "part": "system_instructions"}, "role": "system"}, parent_idx)
            to_user = ["user"] if ("user" in self.principals and out and not calls
                                   and not dialects.adk_response_calls(a.get("gcp.vertex.agent.llm_response"))) else []
            self.primary[key] = self.emit(s, False, "message", lane, to_user, out or calls or inp, data, parent_idx)
        elif op == "a2a":
            remote = None
            if s.kind == KIND_CLIENT:
                remote = _str(a, "gen_ai.agent.name", "a2a.agent.name", "server.address", "peer.service")
                if remote == lane:
                    remote = _str(a, "server.address", "peer.service")
                actor, recipients = lane, [remote] if remote and remote != lane else []
            else:
                peer = caller_of(s) or _str(a, "client.address")
                actor, recipients = (peer, [lane]) if peer and peer != lane else (lane, [])
            state = _str(a, "a2a.task.state")
            text = inp or _str(a, "a2a.message.text") or _str(a, "a2a.method.name") or s.name
            kind = "message"
            if state is not None:
                norm = state.lower().removeprefix("task_state_").replace("_", "-")
                if norm in FAILED_STATES and self.status == "completed":
                    self.status = "failed"
                if inp is None:
                    kind, text = "state_update", norm
            self.primary[key] = self.emit(s, False, kind, actor, recipients, text, data, parent_idx)
            if out is not None and recipients:
                self.emit(s, True, "message", recipients[0], [actor], out,
                          {"otel": {"span_id": s.span_id, "trace_id": s.trace_id, "part": "output"}}, self.primary[key])
        else:
            self.primary[key] = self.emit(s, False, "log", lane, [], inp or s.name or op, data, parent_idx)
            if out is not None and out.strip() not in self.seen:
                self.emit(s, True, "log", lane, [], out, {"otel": {"span_id": s.span_id, "trace_id": s.trace_id,
                                                                   "part": "output"}}, self.primary[key])

    def check_unmapped(self, s: Span) -> None:
        """Count the attributes (and span event attributes) of `s` that carry text and map to nothing."""
        for k in dialects.unmapped_text(s.attributes):
            self.unmapped.setdefault(f"span attribute {k!r}", []).append(s.name or s.span_id)
        for e in s.events:
            if e.get("name") in dialects.MAPPED_EVENTS:
                continue
            for k in dialects.unmapped_text(e.get("attributes") or {}):
                self.unmapped.setdefault(f"span event {e.get('name')!r} attribute {k!r}", []).append(
                    s.name or s.span_id)

    def finish(self) -> dict[str, Any]:
        order = sorted(range(len(self.events)), key=lambda i: self.events[i][0])
        seq_of = {idx: seq for seq, idx in enumerate(order)}
        events: list[dict] = []
        for seq, idx in enumerate(order):
            ev = dict(self.events[idx][2])
            p = ev.pop("_parent_idx")
            ev.pop("_ns")
            ev["seq"] = seq
            ev["parent_seq"] = seq_of.get(p) if p is not None else None
            events.append(ev)
        stamps = [s for s in (self.events[i][2]["_ns"] for i in order) if s is not None]
        ends = [s.end_ns for s in self.spans if s.end_ns] + stamps
        traces = sorted({s.trace_id for s in self.spans})
        services = sorted({str(s.resource.get("service.name")) for s in self.spans if s.resource.get("service.name")})
        meta: dict[str, Any] = {"source_format": SOURCE_FORMAT, "trace_ids": traces, "services": services,
                                "n_spans": len(self.spans)}
        conv = next((c for c in (conversation_of(s) for s in self.spans) if c), None)
        if conv:
            meta["conversation_id"] = conv
        resources = []
        for s in self.spans:
            if s.resource and s.resource not in resources:
                resources.append(s.resource)
        if resources:
            meta["otel_resources"] = resources
        for what, where in self.unmapped.items():
            self.warnings.append(f"{what} carries text but maps to no event ({len(where)} span"
                                 f"{'s' if len(where) != 1 else ''}, e.g. {where[0]!r}); kept in data.attributes"
                                 if what.startswith("span attribute") else
                                 f"{what} carries text but maps to no event ({len(where)} span"
                                 f"{'s' if len(where) != 1 else ''}, e.g. {where[0]!r}); kept in data.span_events")
        if self.warnings:
            meta["import_warnings"] = self.warnings
        return {"run_id": self.run_id,
                "scenario": {"id": "unknown", "family": "unknown", "metadata": {"note": NO_SCENARIO_NOTE}},
                "status": self.status,
                "started_at": iso_ns(min(stamps)) if stamps else None,
                "ended_at": iso_ns(max(ends)) if ends else None,
                "principals": list(self.principals.values()), "agents": list(self.agents.values()), "events": events, "metadata": meta}


def build_run(run_id: str, spans: list[Span]) -> dict[str, Any]:
    """The raw canonical run (not normalized) for the spans of one run."""
    return _RunBuilder(run_id, spans).build()


def build_runs(spans: Iterable[Span]) -> dict[str, dict[str, Any]]:
    """Raw canonical runs by run id for any spans (see the module docstring). A run whose spans
    all come from the OpenAI Agents SDK's OpenInference instrumentation is built as the SDK's
    own export is (app.ingest.readers.otlp_agents_sdk)."""
    from app.ingest.readers import otlp_agents_sdk

    return {rid: otlp_agents_sdk.build_run(rid, group) or build_run(rid, group)
            for rid, group in group_runs(spans).items()}


def dedupe(spans: Iterable[Span]) -> list[Span]:
    """Drop repeated (trace id, span id) pairs, the first kept (a re-sent batch)."""
    seen: set[str] = set()
    out: list[Span] = []
    for s in spans:
        if s.key not in seen:
            seen.add(s.key)
            out.append(s)
    return out


# --------------------------------------------------------------------------- files

def looks_like_otlp(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def _docs(path: str | os.PathLike, name: str) -> Iterator[tuple[Any, Location] | ImportItem]:
    with open(path, "rb") as f:
        text = f.read()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    stripped = text.strip()
    whole = None
    if stripped.startswith(b"[") or (stripped.startswith(b"{") and b"\n" in stripped):
        try:
            whole = safejson.loads(stripped)
        except (UnicodeDecodeError, ValueError):
            whole = None
    if whole is not None:
        for i, d in enumerate(whole if isinstance(whole, list) else [whole]):
            yield d, Location(name, pointer=f"[{i}]" if isinstance(whole, list) else None)
        return
    for lineno, raw in enumerate(text.split(b"\n"), 1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            yield safejson.loads(raw), Location(name, lineno)
        except (UnicodeDecodeError, ValueError) as exc:
            yield error_item(Location(name, lineno), f"not valid JSON: {exc}")


def iter_otlp_file(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one ImportItem per run found in an OTLP/JSON trace file (file exporter output)."""
    name = display if display is not None else os.fspath(path)
    spans: list[Span] = []
    problems: list[str] = []
    any_doc = False
    for rec in _docs(path, name):
        if isinstance(rec, ImportItem):
            yield rec
            continue
        doc, loc = rec
        try:
            got, probs = spans_from_json(doc, where=f"{loc}: ")
        except OtlpFormatError as exc:
            yield ImportItem(error=RunFormatError(loc, str(exc), field="resourceSpans"), source=str(loc))
            continue
        any_doc = True
        spans.extend(got)
        problems.extend(probs)
    runs = build_runs(dedupe(spans))
    if not runs:
        if any_doc:
            yield error_item(Location(name), "no spans in this trace file" + (
                f" ({'; '.join(problems[:5])})" if problems else ""))
        return
    for rid, raw in runs.items():
        if problems:
            raw["metadata"].setdefault("import_warnings", []).extend(problems)
        yield item_from_raw(raw, Location(name, pointer=f"run {rid}"))


#: JSON levels around an attribute value in OTLP/JSON (resourceSpans[i].scopeSpans[j].spans[k].attributes[l].value)
_ENVELOPE_DEPTH = 9


def read_body(data: bytes, content_type: str, *, limits: InputLimits | None = None, max_spans: int | None = None,
              budget: Callable[[], None] | None = None) -> tuple[list[Span], list[str]]:
    """Spans of an OTLP/HTTP request body (already un-gzipped): protobuf unless the type says JSON.

    Within the input limits (depth and digits for the whole JSON document; strings per span, so
    that one span over MAX_STRING_BYTES is rejected by name while the others are kept)."""
    from dataclasses import replace

    lim = limits or input_limits()
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/json":
        # strings are bounded by the body here and checked per span below; the nesting of the
        # document may exceed MAX_JSON_DEPTH by the levels of the OTLP envelope around a value
        doc_lim = replace(lim, max_string_bytes=max(lim.max_string_bytes, len(data)),
                          max_json_depth=min(500, lim.max_json_depth + _ENVELOPE_DEPTH))
        try:
            doc = safejson.loads(data, doc_lim)
        except (UnicodeDecodeError, ValueError) as exc:
            raise OtlpFormatError(f"not valid JSON: {exc}") from None
        return spans_from_json(doc, limits=lim, max_spans=max_spans, budget=budget)
    return spans_from_protobuf(data, limits=lim, max_spans=max_spans, budget=budget)


class OtlpReader(Reader):
    """OpenTelemetry trace files (OTLP/JSON, the collector's file exporter) and OTLP request bodies."""

    name = "otlp"
    description = ("OpenTelemetry traces (OTLP/JSON files, OTLP protobuf bodies) with GenAI or OpenInference "
                   "attributes")
    #: the old `--format openinference` names this reader too
    aliases = ("openinference",)

    def sniff(self, path: Path) -> Sniff:
        if not peek.is_json_like(path):
            return Sniff(0.0, "not JSON")
        obj = peek.first_object(path)
        if obj is not None:
            return (Sniff(0.97, "an OTLP/JSON export (resourceSpans)") if looks_like_otlp(obj)
                    else Sniff(0.0, "JSON without resourceSpans"))
        if "resourceSpans" in peek.record_keys(path):
            return Sniff(0.95, "an OTLP/JSON export (resourceSpans)")
        return Sniff(0.0, "JSON without resourceSpans")

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        return iter_otlp_file(path, shown)


    # the OTLP endpoint's side (POST /v1/traces): spans already decoded, picked by `sniff_spans`
    def sniff_spans(self, spans: list[Span]) -> Sniff:
        return Sniff(0.5, "OTLP spans, read with the GenAI and OpenInference attribute names")

    def runs_from_spans(self, spans: Iterable[Span]) -> dict[str, dict[str, Any]]:
        return build_runs(spans)
