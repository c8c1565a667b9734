"""A2A protocol wire logs (JSON-RPC 2.0, protocol 1.0 and 0.3) -> canonical runs.

Accepted input, freely mixed in one file:

* JSON Lines of bare JSON-RPC bodies (requests and responses);
* JSON Lines of envelopes ``{"ts", "direction", "from_agent", "to_agent", "body": <JSON-RPC>}``
  (``to_agent`` a name or a list of names);
* raw Server-Sent Events (``data: {...}`` lines, events separated by blank lines; ``event:``,
  ``id:``, ``retry:`` and ``:`` comment lines are skipped); each data payload is a body or an
  envelope; a bare result object (a Task, Message or update event without the JSON-RPC wrapper)
  is accepted as a response;
* agent cards: ``{"type": "agent_card", "agent": NAME?, "card": {...}}``, a bare AgentCard
  (the content of ``.well-known/agent-card.json``), or an envelope whose body is a card;
* agent cards in files next to the log: ``<log>.agent-card.json`` or
  ``.well-known/agent-card.json`` in the log's directory (one card or an array);
* run-context sidecars: ``{"type": "run_context", "context_id": ID, "run": {...}}`` lines, or a
  file ``<log>.context.json`` (one such record, an array of them, or ``{"contexts": [...]}``) or
  ``<log>.context.jsonl`` next to the log.

Any other JSON object (no JSON-RPC ``method``, ``result`` or ``error``, not an envelope, card or
run_context) is reported as an error at its line, never turned into an empty run.

Records are grouped into runs by contextId (a response without one inherits it from its request,
paired by JSON-RPC id, or from its task id). Per context: every Message becomes a shared
``message`` event (a messageId seen before, e.g. again in a later Task's history, counts once);
a task's state change becomes a ``state_update`` event (content: the state in 0.3 spelling such as
``input-required``; data: task_id, state, final); artifacts (streamed chunks with ``append``
joined until ``lastChunk``) become ``artifact`` events; a JSON-RPC error becomes a ``log`` event.
Text parts give the content (joined by newlines), the data parts the event ``data`` (see
`app.ingest.a2a.parts_to_content`). Every wire event is ``visibility: shared``.

Who is who: envelope ``from_agent``/``to_agent``; else message roles: ``user`` is the client
(named ``user``), ``agent`` the server, named after the one agent card in the log (when there is
exactly one), else ``agent``.

The sidecar supplies what never crosses the wire (scenario, principals, agents, private events,
audits, ...). Its ``run`` is a canonical run whose ``events`` list the non-wire events in order
and may hold placeholders ``{"wire_message": MESSAGE_ID, <field>: <value>...}`` marking where a
wire message goes (the other keys override fields of the wire event, e.g. parent_seq or hop).
Wire events no placeholder names are merged in by timestamp (stable; on a tie, or when a
timestamp is missing, the sidecar's events as written come first). Seqs are assigned after the
merge. Wire actors that the sidecar does not know are added as agents. Without a sidecar the run
gets run_id = contextId, scenario id/family ``unknown`` with a note in its metadata, status from
the last task state, and one agent per name seen on the wire.

Reading takes two passes over the file: the first only remembers, for each record, its offset
and its context, so memory grows with the number of records, not with their size.
"""
from __future__ import annotations

import json
import math
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.a2a import (
    CARD_METHODS,
    SEND_METHODS,
    classify_result,
    context_of_body,
    contexts_of_list,
    from_proto_json,
    join_artifact_parts,
    looks_like_agent_card,
    parts_to_content,
    protocol_of_method,
    rest_method,
    role_name,
    state_name,
    task_ids_of_body,
)
from app.ingest.canonical import Location, RunFormatError, _carry_forward_keys, epoch_to_iso, ts_key
from app.ingest.items import ImportItem, error_item, item_from_raw
from app.ingest.readers import peek
from app.ingest.readers.base import Reader, Sniff
from app.ingest.safety import safejson

NO_SIDECAR_NOTE = ("imported from an A2A wire log without a run_context sidecar: the scenario, the "
                   "principals and the agents' private events are unknown")
NOT_WIRE_RECORD = ("not an A2A wire record: expected a JSON-RPC request or response (or a bare Task, Message or "
                   "update event), an envelope {ts, from_agent, to_agent, body}, an agent card or a run_context")
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


def _rid(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, sort_keys=True)


def _ts(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return epoch_to_iso(float(value))
    return None


def is_envelope(obj: dict) -> bool:
    """True for ``{ts, direction, from_agent, to_agent, body}`` records."""
    return (isinstance(obj.get("body"), dict) or isinstance(obj.get("http"), dict)) and "jsonrpc" not in obj


def _headers(obj: dict) -> dict:
    http = obj.get("http") if isinstance(obj.get("http"), dict) else {}
    h = http.get("headers") if isinstance(http.get("headers"), dict) else {}
    return {str(k).lower(): v for k, v in h.items()}


_V03_NAMES = {"SendMessage": "message/send", "SendStreamingMessage": "message/stream", "GetTask": "tasks/get",
              "CancelTask": "tasks/cancel", "SubscribeToTask": "tasks/resubscribe", "ListTasks": "tasks/list",
              "GetExtendedAgentCard": "agent/getAuthenticatedExtendedCard"}


def unwrap_rest(obj: dict) -> dict | None:
    """An envelope of the HTTP+JSON (REST) binding as the JSON-RPC envelope it stands for.

    The envelope names the call in ``http: {method, path, status, headers}`` and pairs request and
    response by ``exchange``; its body is the bare request/response (or one SSE event). Returns the
    envelope unchanged when its body is JSON-RPC already (or it has no ``http``), None for an HTTP
    exchange that is no A2A call (e.g. a health check) or for a REST request without a body to keep."""
    http = obj.get("http")
    body = obj.get("body")
    if not isinstance(http, dict) or (isinstance(body, dict) and ("jsonrpc" in body or looks_like_agent_card(body))):
        return obj if isinstance(body, dict) else None
    method, params = rest_method(str(http.get("method") or ""), str(http.get("path") or ""))
    rid = obj.get("exchange")
    if method is None:
        return None
    if str(http.get("path") or "").startswith("/v1/"):  # the 0.3 REST binding: name the call as 0.3 does
        method = _V03_NAMES.get(method, method)
        body = from_proto_json(body)
    out = {k: v for k, v in obj.items() if k != "body"}
    if obj.get("direction") == "response":
        status = http.get("status")
        if isinstance(status, int) and status >= 400:
            err = body.get("error", body) if isinstance(body, dict) else {"message": str(body)}
            out["body"] = {"jsonrpc": "2.0", "id": rid, "error": err}
        elif method in CARD_METHODS:
            out["body"] = body if isinstance(body, dict) else {}
        else:
            out["body"] = {"jsonrpc": "2.0", "id": rid, "result": body}
        return out
    p = dict(body) if isinstance(body, dict) else {}
    p.update({k: v for k, v in params.items() if k not in p})
    out["body"] = {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}
    return out


def as_body(obj: dict) -> dict:
    """A JSON-RPC body; a bare result object (Task, Message, update event) is wrapped as a response."""
    if isinstance(obj.get("method"), str) or "result" in obj or "error" in obj:
        return obj
    kind, _ = classify_result(obj)
    return {"jsonrpc": "2.0", "id": None, "result": obj} if kind != "other" else obj


def envelope_context(env: dict, task_ctx: dict[str, str]) -> str | None:
    """The contextId one envelope belongs to, as the file reader would group it, from the envelope
    alone plus `task_ctx` (task id -> context, updated here); None when it names none (an error, a
    card, a ListTasks result spanning contexts). Used by the recording proxy to tag what it records."""
    conv = unwrap_rest(env) if is_envelope(env) else env
    if conv is None or not isinstance(conv.get("body"), dict):
        return None
    body = as_body(conv["body"])
    if looks_like_agent_card(body) or contexts_of_list(body):
        return None
    ctx = context_of_body(body)
    tids = task_ids_of_body(body)
    if ctx is None:
        ctx = next((task_ctx[t] for t in tids if t in task_ctx), None)
    if ctx is not None:
        for t in tids:
            task_ctx.setdefault(t, ctx)
    return ctx


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def merge_by_ts(first: list, second: list) -> list:
    """Merge two ordered event lists by timestamp; on ties `first` wins (stable)."""
    ka = _carry_forward_keys([_ts(e.get("ts")) if isinstance(e, dict) else None for e in first])
    kb = _carry_forward_keys([_ts(e.get("ts")) if isinstance(e, dict) else None for e in second])
    out: list = []
    i = j = 0
    while i < len(first) and j < len(second):
        if kb[j] < ka[i]:
            out.append(second[j])
            j += 1
        else:
            out.append(first[i])
            i += 1
    out.extend(first[i:])
    out.extend(second[j:])
    return out


class ContextBuilder:
    """Collects the wire records of one context and turns them into a raw canonical run."""

    def __init__(self, context_id: str, default_server: str = "agent", default_client: str = "user",
                 cards: dict[str, dict] | None = None) -> None:
        self.ctx = context_id
        self.default_server = default_server
        self.default_client = default_client
        self.cards = cards or {}
        self.events: list[dict] = []
        self.mids: dict[str, int] = {}
        self.task_state: dict[Any, str] = {}
        self.open_artifacts: dict[tuple, dict] = {}
        self.done_artifacts: set[tuple] = set()
        self.requests: dict[Any, tuple[str, list[str]]] = {}
        self.sidecar: dict | None = None
        self.sidecar_loc: Location | None = None
        self.protocols: set[str] = set()
        self.names: dict[str, None] = {}  # every actor/recipient on the wire, in order of appearance
        self.party: dict[str, str] = {}  # name -> "client" | "server"
        self.last_state: str | None = None
        self.declared_versions: set[str] = set()  # A2A-Version headers seen
        self.tenants: set[str] = set()
        self.task_meta: dict[str, Any] = {}
        self.extended_cards: dict[str, dict] = {}

    # -- records
    def add(self, obj: Any, loc: Location) -> None:
        """Add one parsed wire record (envelope, JSON-RPC body or run_context)."""
        if not isinstance(obj, dict):
            raise RunFormatError(loc, "a wire record must be a JSON object")
        if obj.get("type") == "run_context":
            self.set_sidecar(obj.get("run"), loc)
            return
        env = is_envelope(obj)
        if env:
            conv = unwrap_rest(obj)
            if conv is None:
                return
            obj = conv
            version = _headers(obj).get("a2a-version")
            if isinstance(version, str) and version:
                self.declared_versions.add(version)
        body = as_body(obj["body"] if env else obj)
        ts = _ts(obj.get("ts", obj.get("timestamp"))) if env else None
        frm = obj.get("from_agent") if env and isinstance(obj.get("from_agent"), str) else None
        to = _as_list(obj.get("to_agent")) if env else []
        if isinstance(body.get("method"), str):
            self.request(body, ts, frm, to, env)
        elif "result" in body or "error" in body:
            self.response(body, ts, frm, to)

    def set_sidecar(self, run: Any, loc: Location) -> None:
        if self.sidecar is not None:
            raise RunFormatError(loc, f"a second run_context for context {self.ctx!r}", run_id=self.ctx)
        if not isinstance(run, dict):
            raise RunFormatError(loc, "run_context needs a 'run' object", run_id=self.ctx, field="run")
        self.sidecar, self.sidecar_loc = run, loc

    def request(self, body: dict, ts: str | None, frm: str | None, to: list[str], env: bool) -> None:
        method = body["method"]
        self.protocols.add(protocol_of_method(method))
        if isinstance(body.get("params"), dict) and isinstance(body["params"].get("tenant"), str):
            self.tenants.add(body["params"]["tenant"])
        client = frm or self.default_client
        servers = to if env else [self.default_server]
        self.requests[_rid(body.get("id"))] = (client, servers)
        self.party.setdefault(client, "client")
        for s in servers:
            self.party.setdefault(s, "server")
        params = body.get("params")
        if method in SEND_METHODS and isinstance(params, dict) and isinstance(params.get("message"), dict):
            msg = params["message"]
            if frm is None and role_name(msg.get("role")) == "agent":
                self.message(msg, ts, servers[0] if servers else self.default_server, [client])
            else:
                self.message(msg, ts, client, servers)

    def response(self, body: dict, ts: str | None, frm: str | None, to: list[str]) -> None:
        req = self.requests.get(_rid(body.get("id")))
        server = frm or (req[1][0] if req and req[1] else self.default_server)
        clients = to or ([req[0]] if req else [self.default_client])
        if body.get("error") is not None:
            err = body["error"]
            text = err.get("message") if isinstance(err, dict) else str(err)
            self.emit("log", ts, server, clients, text if isinstance(text, str) else None, {"error": err}, {})
            return
        result = body.get("result")
        kind, obj = classify_result(result)
        if kind == "other":
            return
        if kind == "tasks":  # ListTasks: the tasks (and their histories) of this context
            for t in obj["tasks"]:
                if isinstance(t, dict) and t.get("contextId") == self.ctx:
                    self.protocols.add("0.3" if "kind" in t else "1.0")
                    self.task(t, ts, server, clients)
            return
        self.protocols.add("0.3" if isinstance(result, dict) and "kind" in result else "1.0")
        if kind == "message":
            self.message(obj, ts, server, clients)
        elif kind == "task":
            self.task(obj, ts, server, clients)
        elif kind == "status":
            self.status(obj, ts, server, clients)
        else:
            self.artifact(obj, ts, server, clients)

    # -- protocol objects
    def nested_message(self, msg: Any, ts: str | None, server: str, clients: list[str]) -> None:
        if not isinstance(msg, dict):
            return
        if role_name(msg.get("role")) == "agent":
            self.message(msg, ts, server, clients)
        else:
            self.message(msg, ts, clients[0] if clients else self.default_client, [server])

    def message(self, msg: dict, ts: str | None, actor: str, recipients: list[str]) -> None:
        mid = msg.get("messageId")
        if isinstance(mid, str) and mid in self.mids:
            return
        content, data = parts_to_content(msg.get("parts"))
        meta = dict(msg["metadata"]) if isinstance(msg.get("metadata"), dict) else {}
        if msg.get("extensions"):
            meta.setdefault("a2a_extensions", msg["extensions"])
        if isinstance(msg.get("taskId"), str):
            meta.setdefault("a2a_task_id", msg["taskId"])
        if msg.get("referenceTaskIds"):
            meta.setdefault("a2a_reference_task_ids", msg["referenceTaskIds"])
        self.emit("message", ts, actor, recipients, content, data, meta)
        if isinstance(mid, str):
            self.mids[mid] = len(self.events) - 1

    def task(self, task: dict, ts: str | None, server: str, clients: list[str]) -> None:
        tid = task.get("id")
        if isinstance(task.get("metadata"), dict) and task["metadata"]:
            self.task_meta[str(tid)] = task["metadata"]
        status = task.get("status") if isinstance(task.get("status"), dict) else {}
        for m in task.get("history") or []:
            self.nested_message(m, None, server, clients)
        self.nested_message(status.get("message"), ts, server, clients)
        state = state_name(status.get("state"))
        if state is not None and self.task_state.get(_rid(tid)) != state:
            self.state_event(tid, state, None, ts or _ts(status.get("timestamp")), server, clients, {})
        for art in task.get("artifacts") or []:
            if not isinstance(art, dict):
                continue
            key = (_rid(tid), _rid(art.get("artifactId")))
            if key in self.done_artifacts or key in self.open_artifacts:
                continue
            self.done_artifacts.add(key)
            self.emit("artifact", ts, server, clients, *self.artifact_fields(tid, art, art.get("parts") or []))

    def status(self, ev: dict, ts: str | None, server: str, clients: list[str]) -> None:
        status = ev.get("status") if isinstance(ev.get("status"), dict) else {}
        self.nested_message(status.get("message"), ts, server, clients)
        state = state_name(status.get("state"))
        tid = ev.get("taskId")
        if state is not None and self.task_state.get(_rid(tid)) != state:
            meta = dict(ev["metadata"]) if isinstance(ev.get("metadata"), dict) else {}
            self.state_event(tid, state, ev.get("final"), ts or _ts(status.get("timestamp")), server, clients, meta)

    def state_event(self, tid: Any, state: str, final: Any, ts: str | None, server: str, clients: list[str],
                    meta: dict) -> None:
        self.task_state[_rid(tid)] = state
        self.last_state = state
        data: dict[str, Any] = {"task_id": tid, "state": state}
        if final is not None:
            data["final"] = final
        self.emit("state_update", ts, server, clients, state, data, meta)

    def artifact_fields(self, tid: Any, art: dict, parts: list) -> tuple[str | None, dict, dict]:
        content, inner = parts_to_content(parts)
        data: dict[str, Any] = {"task_id": tid, "artifact_id": art.get("artifactId")}
        for key in ("name", "description"):
            if art.get(key) is not None:
                data[key] = art[key]
        if inner != {}:
            data["data"] = inner
        meta = dict(art["metadata"]) if isinstance(art.get("metadata"), dict) else {}
        return content, data, meta

    def artifact(self, ev: dict, ts: str | None, server: str, clients: list[str]) -> None:
        tid = ev.get("taskId")
        art = ev.get("artifact") if isinstance(ev.get("artifact"), dict) else {}
        key = (_rid(tid), _rid(art.get("artifactId")))
        cur = self.open_artifacts.get(key)
        new_parts = art.get("parts") if isinstance(art.get("parts"), list) else []
        if ev.get("append") and cur is not None:
            cur["parts"] = join_artifact_parts(cur["parts"], new_parts)
            for k in ("name", "description", "metadata"):
                if k in art:
                    cur["art"][k] = art[k]
        else:
            cur = {"art": dict(art), "parts": list(new_parts), "index": len(self.events)}
            self.open_artifacts[key] = cur
            self.emit("artifact", ts, server, clients, None, {}, {})
        event = self.events[cur["index"]]
        event["content"], event["data"], event["metadata"] = self.artifact_fields(tid, cur["art"], cur["parts"])
        if ev.get("lastChunk"):
            del self.open_artifacts[key]
            self.done_artifacts.add(key)

    def emit(self, kind: str, ts: str | None, actor: str, recipients: list[str], content: str | None, data: Any,
             metadata: dict) -> None:
        self.names.setdefault(actor)
        for r in recipients:
            self.names.setdefault(r)
        self.events.append({"ts": ts, "kind": kind, "actor": actor, "recipients": list(recipients),
                            "visibility": "shared", "content": content, "data": data, "parent_seq": None,
                            "hop": None, "metadata": metadata})

    # -- the run
    def finish(self) -> dict[str, Any]:
        """The raw canonical run (not yet normalized); raises RunFormatError on a bad sidecar."""
        if self.sidecar is not None:
            run = dict(self.sidecar)
            run.setdefault("run_id", self.ctx)
            events = self.merge_sidecar(run)
            if self.declared_versions or self.tenants or self.task_meta:
                run["metadata"] = dict(run["metadata"]) if isinstance(run.get("metadata"), dict) else {}
                self.protocol_metadata(run["metadata"])
        else:
            run = self.default_run()
            events = [dict(e) for e in self.events]
        for seq, e in enumerate(events):
            if isinstance(e, dict):
                e["seq"] = seq
        run["events"] = events
        self.add_wire_agents(run)
        return run

    def merge_sidecar(self, run: dict) -> list:
        ctx_events = run.get("events")
        if ctx_events is None:
            ctx_events = []
        if not isinstance(ctx_events, list):
            raise RunFormatError(self.sidecar_loc, "must be an array", run_id=str(run.get("run_id")),
                                 field="run.events")
        merged: list = []
        used: set[int] = set()
        for i, e in enumerate(ctx_events):
            if isinstance(e, dict) and "wire_message" in e:
                idx = self.mids.get(e["wire_message"]) if isinstance(e["wire_message"], str) else None
                if idx is None or idx in used:
                    why = "is named twice" if idx in used else "is not in the wire log"
                    raise RunFormatError(self.sidecar_loc, f"wire message {e['wire_message']!r} {why}",
                                         run_id=str(run.get("run_id")), field=f"run.events[{i}].wire_message")
                used.add(idx)
                w = dict(self.events[idx])
                w.update({k: v for k, v in e.items() if k != "wire_message"})
                merged.append(w)
            else:
                merged.append({k: v for k, v in e.items() if k != "seq"} if isinstance(e, dict) else e)
        rest = [dict(w) for i, w in enumerate(self.events) if i not in used]
        return merge_by_ts(merged, rest)

    def default_run(self) -> dict[str, Any]:
        stamps = [e["ts"] for e in self.events if ts_key(e["ts"]) is not None]
        state = self.last_state
        status = {"failed": "failed", "rejected": "failed", "canceled": "error", "cancelled": "error"}.get(
            state or "", "completed")
        meta: dict[str, Any] = {"source_format": "a2a-wire", "context_id": self.ctx,
                                "a2a_protocols": sorted(self.protocols)}
        if state is not None:
            meta["a2a_last_task_state"] = state
        self.protocol_metadata(meta)
        return {"run_id": self.ctx,
                "scenario": {"id": "unknown", "family": "unknown", "metadata": {"note": NO_SIDECAR_NOTE}},
                "status": status,
                "started_at": min(stamps, key=ts_key) if stamps else None,
                "ended_at": max(stamps, key=ts_key) if stamps else None,
                "metadata": meta}

    def protocol_metadata(self, meta: dict) -> None:
        """What the traffic says about itself: A2A-Version headers, tenants, task metadata."""
        if self.declared_versions:
            meta["a2a_versions_declared"] = sorted(self.declared_versions)
            if len(self.declared_versions) == 1:
                meta["a2a_protocol_version"] = next(iter(self.declared_versions))
        elif len(self.protocols) == 1:
            meta["a2a_protocol_version"] = next(iter(self.protocols))
        if self.tenants:
            meta["a2a_tenants"] = sorted(self.tenants)
        if self.task_meta:
            meta["a2a_task_metadata"] = self.task_meta

    def error_only(self) -> bool:
        """True when this context holds nothing but error replies (no message, task or artifact)."""
        return bool(self.events) and all(e["kind"] == "log" and isinstance(e.get("data"), dict)
                                         and "error" in e["data"] for e in self.events)

    def add_wire_agents(self, run: dict) -> None:
        agents = run.get("agents")
        if agents is None:
            agents = run["agents"] = []
        if not isinstance(agents, list):
            return
        principals = run.get("principals") if isinstance(run.get("principals"), list) else []
        known = {"system"}
        known.update(a.get("id") for a in agents if isinstance(a, dict))
        known.update(p.get("id") for p in principals if isinstance(p, dict))
        for name in self.names:
            if name in known:
                continue
            meta: dict[str, Any] = {"source": "a2a-wire"}
            if name in self.cards:
                meta["agent_card"] = self.cards[name]
            if name in self.extended_cards:
                meta["extended_agent_card"] = self.extended_cards[name]
            role = self.party.get(name) or ("server" if name in self.cards or name == self.default_server else
                                            "client" if name == self.default_client else None)
            agents.append({"id": name, "role": role, "metadata": meta})
            known.add(name)


# --------------------------------------------------------------------------- scanning files

def _scan(path: str | os.PathLike) -> Iterator[tuple[int, int, int, bytes]]:
    """Yield (offset, length, first line number, JSON payload) for each record of a log."""
    offset = 0
    start = line0 = -1
    data: list[bytes] = []
    end = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(safejson.bounded_lines(f), 1):
            begin = offset
            if isinstance(raw, safejson.LineTooLong):  # never held: reported by _index
                offset += raw.size
                if start >= 0 and data:
                    yield start, end - start, line0, b"\n".join(data)
                start, data = -1, []
                yield begin, raw.size, lineno, raw
                continue
            offset += len(raw)
            s = raw.strip()
            if lineno == 1 and s.startswith(b"\xef\xbb\xbf"):
                s = s[3:].strip()
            if s.startswith(_SSE_FIELDS) and not s.startswith((b"{", b"[")):
                if start < 0:
                    start, line0 = begin, lineno
                if s.startswith(b"data:"):
                    v = s[5:]
                    data.append(v[1:] if v.startswith(b" ") else v)
                end = offset
                continue
            if start >= 0:
                if data:
                    yield start, end - start, line0, b"\n".join(data)
                start, data = -1, []
            if s:
                yield begin, offset - begin, lineno, s
        if start >= 0 and data:
            yield start, end - start, line0, b"\n".join(data)


def _payload(chunk: bytes) -> bytes:
    lines = [ln.strip() for ln in chunk.split(b"\n")]
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:].strip()
    if any(ln.startswith(b"data:") for ln in lines):
        out = []
        for ln in lines:
            if ln.startswith(b"data:"):
                v = ln[5:]
                out.append(v[1:] if v.startswith(b" ") else v)
        return b"\n".join(out)
    return chunk.strip()


class _Index:
    def __init__(self) -> None:
        self.offsets = array("q")
        self.lengths = array("q")
        self.lines = array("q")
        self.groups: dict[Any, array] = {}
        self.errors: list[ImportItem] = []
        self.cards: list[tuple[str | None, dict]] = []
        self.extended_cards: list[dict] = []

    def add(self, idx: int, ctx: Any) -> None:
        group = self.groups.get(ctx)
        if group is None:
            group = self.groups[ctx] = array("q")
        group.append(idx)


def _index(path: str | os.PathLike, name: str) -> _Index:
    """First pass: where each record is, and which context it belongs to."""
    ix = _Index()
    rpc_ctx: dict[Any, str] = {}
    task_ctx: dict[Any, str] = {}
    pending: dict[Any, list[int]] = {}
    unknown = array("q")
    for off, length, line, payload in _scan(path):
        if isinstance(payload, safejson.LineTooLong):
            ix.errors.append(error_item(Location(name, line), f"input limit: a line of {payload.size} bytes, longer "
                                                              "than MAX_RECORD_BYTES allows"))
            continue
        try:
            obj = safejson.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            ix.errors.append(error_item(Location(name, line), f"not valid JSON: {exc}"))
            continue
        if not isinstance(obj, dict):
            ix.errors.append(error_item(Location(name, line), "a wire record must be a JSON object"))
            continue
        idx = len(ix.offsets)
        ix.offsets.append(off)
        ix.lengths.append(length)
        ix.lines.append(line)
        ctx = None
        if obj.get("type") == "run_context":
            ctx = obj.get("context_id")
            if not isinstance(ctx, str) or not ctx:
                ix.errors.append(error_item(Location(name, line), "run_context needs a context_id string",
                                            field="context_id"))
                continue
        elif obj.get("type") == "agent_card" or looks_like_agent_card(obj):
            card = obj.get("card") if obj.get("type") == "agent_card" else obj
            agent = obj.get("agent") if obj.get("type") == "agent_card" else None
            if isinstance(card, dict):
                ix.cards.append((agent if isinstance(agent, str) else None, card))
            continue
        else:
            env = is_envelope(obj)
            if env:
                conv = unwrap_rest(obj)
                if conv is None:
                    continue  # an HTTP exchange that is no A2A call
                obj = conv
            body = obj["body"] if env else obj
            if env and looks_like_agent_card(body):
                frm = obj.get("from_agent")
                ix.cards.append((frm if isinstance(frm, str) else None, body))
                if (obj.get("http") or {}).get("path", "").rstrip("/").endswith(("extendedAgentCard", "/card")):
                    ix.extended_cards.append(body)
                continue
            if looks_like_agent_card(body.get("result")):  # GetExtendedAgentCard over JSON-RPC
                ix.extended_cards.append(body["result"])
                ix.cards.append((obj.get("from_agent") if env and isinstance(obj.get("from_agent"), str) else None,
                                 body["result"]))
                continue
            if body.get("method") in CARD_METHODS:
                continue  # its answer is the card
            body = as_body(body)
            if not isinstance(body.get("method"), str) and "result" not in body and "error" not in body:
                ix.errors.append(error_item(Location(name, line), NOT_WIRE_RECORD))
                continue
            ctx = context_of_body(body)
            listed = contexts_of_list(body)
            if listed:  # a ListTasks result spans contexts: the record goes to each
                for c in listed:
                    ix.add(idx, c)
                continue
            tids = task_ids_of_body(body)
            if ctx is None:
                ctx = next((task_ctx[_rid(t)] for t in tids if _rid(t) in task_ctx), None)
            rid = _rid(body.get("id"))
            is_req = isinstance(body.get("method"), str)
            if ctx is None and not is_req and rid is not None:
                ctx = rpc_ctx.get(rid)
            if ctx is not None:
                for t in tids:
                    task_ctx.setdefault(_rid(t), ctx)
                if rid is not None and (is_req or rid not in rpc_ctx):
                    rpc_ctx[rid] = ctx
                for j in pending.pop(rid, ()) if rid is not None else ():
                    ix.add(j, ctx)
            elif is_req and rid is not None:
                pending.setdefault(rid, []).append(idx)
                continue
        if ctx is None:
            unknown.append(idx)
        else:
            ix.add(idx, ctx)
    for rest in pending.values():
        unknown.extend(rest)
    if len(unknown):
        ix.groups[None] = unknown
    for ctx, group in ix.groups.items():
        ix.groups[ctx] = array("q", sorted(group))
    return ix


def _sidecar_records(path: str, name: str) -> tuple[dict[str, tuple[dict, Location]], list[ImportItem]]:
    """run_context records from ``<log>.context.json`` / ``<log>.context.jsonl``, by context id."""
    out: dict[str, tuple[dict, Location]] = {}
    errors: list[ImportItem] = []
    records: list[tuple[Any, Location]] = []
    jpath, lpath = f"{path}.context.json", f"{path}.context.jsonl"
    if os.path.isfile(jpath):
        shown = f"{name}.context.json"
        try:
            with open(jpath, "rb") as f:
                doc = safejson.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            errors.append(error_item(Location(shown), f"not valid JSON: {exc}"))
            doc = []
        if isinstance(doc, dict):
            doc = doc.get("contexts") if isinstance(doc.get("contexts"), list) else [doc]
        if isinstance(doc, list):
            records.extend((r, Location(shown, pointer=f"[{i}]")) for i, r in enumerate(doc))
    if os.path.isfile(lpath):
        shown = f"{name}.context.jsonl"
        with open(lpath, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    records.append((safejson.loads(raw), Location(shown, lineno)))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    errors.append(error_item(Location(shown, lineno), f"not valid JSON: {exc}"))
    for rec, loc in records:
        ctx = rec.get("context_id") if isinstance(rec, dict) else None
        if not isinstance(rec, dict) or rec.get("type", "run_context") != "run_context" or not isinstance(ctx, str):
            errors.append(error_item(loc, "expected {\"type\": \"run_context\", \"context_id\": ..., \"run\": {...}}"))
        elif ctx in out:
            errors.append(error_item(loc, f"a second run_context for context {ctx!r}"))
        else:
            out[ctx] = (rec.get("run"), loc)
    return out, errors


def _card_names(cards: list[tuple[str | None, dict]]) -> tuple[dict[str, dict], str]:
    named: dict[str, dict] = {}
    anonymous: list[dict] = []
    for agent, card in cards:
        if agent:
            named.setdefault(agent, card)
        else:
            anonymous.append(card)
    server = "agent"
    if len(anonymous) == 1 and isinstance(anonymous[0].get("name"), str) and anonymous[0]["name"]:
        server = anonymous[0]["name"]
        named.setdefault(server, anonymous[0])
    return named, server


def _card_files(path: str) -> list[tuple[str | None, dict]]:
    cards: list[tuple[str | None, dict]] = []
    for candidate in (f"{path}.agent-card.json", os.path.join(os.path.dirname(path), ".well-known", "agent-card.json")):
        if not os.path.isfile(candidate):
            continue
        try:
            with open(candidate, "rb") as f:
                doc = safejson.load(f)
        except (OSError, ValueError):
            continue
        for card in doc if isinstance(doc, list) else [doc]:
            if looks_like_agent_card(card):
                cards.append((None, card))
    return cards


def iter_wire_file(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one ImportItem per context (run) of an A2A wire log, then one per sidecar-only context.

    A log that holds no run at all (e.g. only agent cards) comes back as an item listing the file
    in `unused_files`.
    """
    name = display if display is not None else os.fspath(path)
    ix = _index(path, name)
    yield from ix.errors
    sidecars, side_errors = _sidecar_records(os.fspath(path), name)
    yield from side_errors
    if not ix.groups and not sidecars:
        if not ix.errors and not side_errors:
            yield ImportItem(source=name, unused_files=[name])
        return
    cards, default_server = _card_names(ix.cards + _card_files(os.fspath(path)))
    extended = {c["name"]: c for c in ix.extended_cards if isinstance(c.get("name"), str)}
    base = os.path.basename(name)

    def build(ctx: Any, records: Iterator[tuple[Any, Location]]) -> ImportItem:
        label = ctx if ctx is not None else f"{base}#no-context"
        b = ContextBuilder(label, default_server=default_server, cards=cards)
        b.extended_cards = extended
        loc = Location(name, pointer=f"context {label}")
        locs: list[Location] = []
        try:
            for obj, rloc in records:
                b.add(obj, rloc)
                locs.append(rloc)
            if ctx is None and ctx not in sidecars and b.error_only():
                texts = "; ".join(str(e.get("content") or e["data"]["error"])[:200] for e in b.events[:5])
                return error_item(locs[0] if locs else loc,
                                  f"{len(b.events)} error repl{'y' if len(b.events) == 1 else 'ies'} with no known "
                                  f"context, not made into a run: {texts}")
            if ctx in sidecars:
                run, sloc = sidecars.pop(ctx)
                b.set_sidecar(run, sloc)
            raw = b.finish()
        except RunFormatError as exc:
            return ImportItem(error=exc, source=str(loc))
        return item_from_raw(raw, loc)

    with open(path, "rb") as f:
        def records(group: array) -> Iterator[tuple[Any, Location]]:
            for idx in group:
                f.seek(ix.offsets[idx])
                chunk = f.read(ix.lengths[idx])
                yield safejson.loads(_payload(chunk)), Location(name, ix.lines[idx])

        for ctx in list(ix.groups):
            yield build(ctx, records(ix.groups.pop(ctx)))
    for ctx in list(sidecars):
        if ctx in sidecars:
            yield build(ctx, iter(()))


def wire_object(obj: Any) -> str | None:
    """Why `obj` (one JSON object) is an A2A wire record, or None when it is not one."""
    if not isinstance(obj, dict):
        return None
    if "jsonrpc" in obj:
        return "a JSON-RPC body"
    if obj.get("type") in ("run_context", "agent_card"):
        return f"a {obj['type']} record"
    if isinstance(obj.get("body"), dict):
        return "an envelope with a body"
    if looks_like_agent_card(obj):
        return "an agent card"
    return None


class WireReader(Reader):
    """A2A wire logs: JSON-RPC bodies or envelopes as JSON Lines, or a Server-Sent Events stream."""

    name = "wire"
    description = "A2A protocol wire logs (JSON-RPC 2.0, protocol 1.0 and 0.3): JSON Lines, envelopes or SSE"

    def sniff(self, path: Path) -> Sniff:
        line = peek.head(path)
        if line.startswith(_SSE_FIELDS):
            return Sniff(0.9, "a Server-Sent Events stream (data:/event: lines)")
        if not line.startswith(b"{"):
            return Sniff(0.0, "neither JSON objects nor an SSE stream")
        obj = peek.first_object(path)
        if obj is None:  # a pretty-printed object
            keys = peek.top_keys(path)
            if keys & {"jsonrpc", "body"}:
                return Sniff(0.85, "a JSON object with " + ", ".join(sorted(keys & {"jsonrpc", "body"})))
            if keys & {"type", "name"} and "resourceSpans" not in keys:
                try:
                    with open(path, "rb") as f:
                        obj = safejson.load(f)
                except (ValueError, OSError):
                    obj = None
        why = wire_object(obj)
        if why:
            return Sniff(0.92, why)
        return Sniff(0.0, "JSON, but no JSON-RPC body, envelope, agent card or run_context")

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        return iter_wire_file(path, shown)
