"""LangSmith run exports, LangGraph's included: one trace (a run tree) is one canonical run.

Shapes read (from langchain-ai/langsmith-sdk ``python/langsmith/schemas.py`` ``Run`` / ``RunBase``
and the SDK's batch ingest payloads; LangGraph writes its node metadata into ``extra.metadata``):

* a run with its ``child_runs`` nested (``client.read_run(id, load_child_runs=True)`` dumped);
* flat runs, a JSON array or JSON Lines (``client.list_runs(...)`` dumped), grouped by
  ``trace_id`` and put in tree order by ``parent_run_id`` / ``dotted_order``;
* the SDK's batch payload ``{"post": [runs], "patch": [runs]}`` (a patch completes the run
  posted with its id);
* a run's keys: ``id``, ``name``, ``run_type`` (chain / llm / tool / retriever / prompt / parser /
  embedding), ``inputs``, ``outputs``, ``error``, ``start_time``, ``end_time``, ``parent_run_id``,
  ``trace_id``, ``dotted_order``, ``extra.metadata`` (``langgraph_node``, ``langgraph_step``,
  ``ls_model_name``, ...), ``tags``, ``events``, ``status``, ``feedback_stats``, ``serialized``.

Messages in inputs and outputs in the shapes LangChain writes: ``{"type": "human" | "ai" | "tool" |
"system", "content", "tool_calls": [{"name", "args", "id"}], "tool_call_id", "name"}``, the
serialized ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``, OpenAI
style ``{"role", "content", "tool_calls": [{"id", "function": {"name", "arguments"}}]}``; chat model
runs' ``inputs.messages`` (a list, or a list of lists) and ``outputs.generations[][].message`` or
``outputs.choices[].message``.

Mapping: the agents are the graph's nodes: a run belongs to the outermost LangGraph node above it
(``extra.metadata.langgraph_node``), a node that only runs tools (a ``ToolNode``) to the agent
whose tool calls it answers; without LangGraph metadata the root run is the one agent. The
principal is the user: the human messages of the root run's inputs are shared messages from
``user`` to the first agent. A chat model's answer without tool calls is a shared message to the
agent that runs next (the user when none does); a turn with tool calls is the agent's private log
plus a private tool call per call (``transfer_to_X`` / ``transfer_back_to_X`` calls are shared
hand-offs to X); a tool run's output is the tool result linked to its call (by ``tool_call_id``,
else by tool name); system prompts and other context the model was given that the log did not
already show are the agent's private log events; a node's output keys besides ``messages`` that
carry text are state updates. A run's ``error`` is a log event and, on the root, the status
``error``; ``feedback_stats`` are the user's outcome metrics. Text in keys that map to nothing
(``serialized``, unknown input or output keys) is reported as a warning.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item
from app.ingest.readers.base import NO, Reader, Sniff
from app.ingest.readers.builder import RunBuilder, as_text, load_json_or_lines, peek_keys, text_leaves

USER = "user"
RUN_KEYS = {"id", "name", "run_type", "inputs", "outputs", "start_time", "end_time", "parent_run_id", "trace_id",
            "dotted_order", "child_runs", "child_run_ids", "extra", "error", "events", "tags", "status", "session_id",
            "session_name", "feedback_stats", "reference_example_id", "attachments", "app_path", "manifest_id",
            "prompt_tokens", "completion_tokens", "total_tokens", "prompt_token_details", "completion_token_details",
            "first_token_time", "total_cost", "prompt_cost", "completion_cost", "prompt_cost_details",
            "completion_cost_details", "parent_run_ids", "in_dataset", "serialized", "run_id", "execution_order",
            "child_execution_order", "trace_tier", "share_token", "last_queued_at", "manifest_s3_id",
            "input_attachments", "output_attachments", "ls_project"}
#: run keys read into events (the rest are ids, times, numbers, or kept in data)
TEXT_READ = {"inputs", "outputs", "error", "child_runs", "name", "events", "extra", "tags"}
ROLE_OF_TYPE = {"human": "human", "user": "human", "ai": "ai", "assistant": "ai", "tool": "tool", "function": "tool",
                "system": "system", "developer": "system", "chat": "human",
                "HumanMessage": "human", "AIMessage": "ai", "ToolMessage": "tool", "SystemMessage": "system",
                "FunctionMessage": "tool", "HumanMessageChunk": "human", "AIMessageChunk": "ai",
                "ToolMessageChunk": "tool", "SystemMessageChunk": "system", "ChatMessage": "human"}
HANDOFF = re.compile(r"^transfer_(?:back_)?to_(.+)$")


def _message(m: Any) -> dict[str, Any] | None:
    """A LangChain / OpenAI message in any of its dumps -> {role, text, tool_calls, tool_call_id, name}."""
    if not isinstance(m, dict):
        return None
    if m.get("lc") == 1 and isinstance(m.get("kwargs"), dict):
        cls = m["id"][-1] if isinstance(m.get("id"), list) and m["id"] else ""
        kw = m["kwargs"]
        role = ROLE_OF_TYPE.get(cls) or ROLE_OF_TYPE.get(str(kw.get("type")), "human")
        m = {**kw, "type": role}
    role = ROLE_OF_TYPE.get(str(m.get("type") or m.get("role") or ""))
    if role is None:
        return None
    calls = []
    for tc in m.get("tool_calls") or (m.get("additional_kwargs") or {}).get("tool_calls") or []:
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else None
        args = tc.get("args") if fn is None else fn.get("arguments")
        if isinstance(args, str) and args[:1] in ("{", "["):
            try:
                args = json.loads(args)
            except ValueError:
                pass
        calls.append({"name": tc.get("name") if fn is None else fn.get("name"), "args": args, "id": tc.get("id")})
    text = as_text(m.get("content"))
    if text and isinstance(m.get("content"), list):  # tool_use parts are calls, not text
        text = as_text([p for p in m["content"] if not (isinstance(p, dict) and p.get("type") in ("tool_use",
                                                                                                  "function_call"))])
    return {"role": role, "text": text, "tool_calls": calls, "tool_call_id": m.get("tool_call_id"),
            "name": m.get("name"), "raw": m}


def _messages(value: Any) -> list[dict[str, Any]]:
    """The messages in a run's inputs / outputs (lists, lists of lists, generations, choices)."""
    out: list[dict[str, Any]] = []
    if isinstance(value, list):
        for v in value:
            if isinstance(v, list):
                out.extend(_messages(v))
            else:
                msg = _message(v)
                if msg is not None:
                    out.append(msg)
    elif isinstance(value, dict):
        msg = _message(value)
        if msg is not None:
            out.append(msg)
    return out


def _llm_outputs(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    gens = outputs.get("generations")
    out: list[dict[str, Any]] = []
    if isinstance(gens, list):
        for g in gens:
            for gen in g if isinstance(g, list) else [g]:
                if not isinstance(gen, dict):
                    continue
                msg = _message(gen.get("message")) if gen.get("message") else None
                if msg is None and isinstance(gen.get("text"), str):
                    msg = {"role": "ai", "text": gen["text"] or None, "tool_calls": [], "tool_call_id": None,
                           "name": None, "raw": gen}
                if msg is not None:
                    out.append(msg)
    for c in outputs.get("choices") or []:
        if isinstance(c, dict) and isinstance(c.get("message"), dict):
            msg = _message({"role": "assistant", **c["message"]})
            if msg is not None:
                out.append(msg)
    if not out:
        out = _messages(outputs.get("messages")) or _messages(outputs.get("output"))
    return out


def _ts(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        from app.ingest.canonical import epoch_to_iso

        return epoch_to_iso(value / 1000 if value > 1e11 else float(value))  # the JS SDK writes epoch ms
    if not isinstance(value, str) or not value:
        return None
    v = value.replace(" ", "T")
    if re.search(r"(Z|[+-]\d\d:?\d\d)$", v) is None:
        v += "Z"
    return v


class LangSmithReader(Reader):
    name = "langsmith"
    description = ("LangSmith run exports, LangGraph's included: a run tree with child_runs, flat runs "
                   "(JSON array / JSON Lines, grouped by trace_id) or the SDK's {post, patch} batch")

    def sniff(self, path: Path) -> Sniff:
        top = peek_keys(path, first_record=False)
        if {"post", "patch"} & top and top <= {"post", "patch", "runs"}:
            return Sniff(0.8, "a LangSmith batch ingest payload ('post' / 'patch' runs)")
        keys = peek_keys(path, first_record=True)
        if "run_type" in keys and keys & {"inputs", "outputs", "child_runs", "trace_id", "dotted_order"}:
            return Sniff(0.9, "LangSmith runs: 'run_type' beside inputs / outputs / trace_id")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        runs: list[tuple[dict[str, Any], Location]] = []
        for rec in load_json_or_lines(path, shown):
            if isinstance(rec, ImportItem):
                yield rec
                continue
            doc, loc = rec
            if isinstance(doc, dict) and ("post" in doc or "patch" in doc) and "run_type" not in doc:
                runs.extend((r, loc) for r in _merge_batch(doc))
            elif isinstance(doc, dict):
                runs.extend((r, loc) for r in _flatten(doc))
            else:
                yield error_item(loc, f"a LangSmith run must be a JSON object, got {type(doc).__name__}")
        traces: dict[str, list[dict[str, Any]]] = {}
        where: dict[str, Location] = {}
        by_id = {str(r.get("id")): r for r, _ in runs if r.get("id")}
        for r, loc in runs:
            tid = str(r.get("trace_id") or _root_id(r, by_id) or r.get("id") or "")
            if not tid:
                yield error_item(loc, "a LangSmith run without 'id' or 'trace_id'", field="id")
                continue
            traces.setdefault(tid, []).append(r)
            where.setdefault(tid, loc)
        for tid, group in traces.items():
            yield _Trace(tid, group).item(where[tid] if len(traces) == 1 else Location(
                where[tid].file, where[tid].line, pointer=where[tid].pointer or f"trace {tid}"))


def _merge_batch(doc: dict[str, Any]) -> list[dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    by_dotted: dict[str, str] = {}
    for part in ("post", "patch"):
        for r in doc.get(part) or []:
            if not isinstance(r, dict):
                continue
            rid = str(r.get("id") or by_dotted.get(str(r.get("dotted_order"))) or r.get("dotted_order"))
            if r.get("dotted_order"):
                by_dotted.setdefault(str(r["dotted_order"]), rid)
            if rid not in runs:
                runs[rid] = {}
                order.append(rid)
            runs[rid].update({k: v for k, v in r.items() if v not in (None, {}) or k not in runs[rid]})
    return [runs[i] for i in order]


def _flatten(run: dict[str, Any], parent: str | None = None, trace: str | None = None) -> Iterator[dict[str, Any]]:
    flat = {k: v for k, v in run.items() if k != "child_runs"}
    if parent is not None and not flat.get("parent_run_id"):
        flat["parent_run_id"] = parent
    if trace is not None and not flat.get("trace_id"):
        flat["trace_id"] = trace
    yield flat
    tid = flat.get("trace_id") or (flat.get("id") if parent is None else trace)
    for child in run.get("child_runs") or []:
        if isinstance(child, dict):
            yield from _flatten(child, str(flat.get("id")), tid)


def _root_id(r: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str | None:
    seen = 0
    while r.get("parent_run_id") and str(r["parent_run_id"]) in by_id and seen < 10_000:
        r = by_id[str(r["parent_run_id"])]
        seen += 1
    return str(r.get("id")) if r.get("id") else None


class _Trace:
    def __init__(self, trace_id: str, runs: list[dict[str, Any]]) -> None:
        self.trace_id = trace_id
        self.by_id = {str(r.get("id")): r for r in runs}
        self.children: dict[str | None, list[dict[str, Any]]] = {}
        for r in runs:
            p = str(r["parent_run_id"]) if r.get("parent_run_id") and str(r["parent_run_id"]) in self.by_id else None
            self.children.setdefault(p, []).append(r)
        for kids in self.children.values():
            kids.sort(key=lambda r: (str(r.get("dotted_order") or ""), str(r.get("start_time") or "")))
        roots = self.children.get(None) or []
        self.root = roots[0] if roots else runs[0]
        self.order: list[dict[str, Any]] = []
        self.steps: list[tuple[dict[str, Any], bool]] = []  # (run, at its end) in tree order
        self._walk(None, 0)
        self.seen_text: set[str] = set()
        self.unmapped: dict[str, list[str]] = {}

    def _walk(self, parent: str | None, depth: int) -> None:
        for r in self.children.get(parent, []):
            self.order.append(r)
            self.steps.append((r, False))
            if depth < 500:
                self._walk(str(r.get("id")), depth + 1)
            self.steps.append((r, True))

    def parent(self, r: dict[str, Any]) -> dict[str, Any] | None:
        p = r.get("parent_run_id")
        return self.by_id.get(str(p)) if p else None

    def node_of(self, r: dict[str, Any]) -> dict[str, Any] | None:
        """The outermost LangGraph node run at or above `r` (the root excluded)."""
        node = None
        cur: dict[str, Any] | None = r
        depth = 0
        while cur is not None and cur is not self.root and depth < 10_000:
            meta = ((cur.get("extra") or {}).get("metadata") or {}) if isinstance(cur.get("extra"), dict) else {}
            if meta.get("langgraph_node") and cur.get("run_type") in ("chain", None) and (
                    cur.get("name") == meta.get("langgraph_node")):
                node = cur
            cur = self.parent(cur)
            depth += 1
        return node

    def item(self, loc: Location) -> ImportItem:
        root = self.root
        b = RunBuilder(f"langsmith/{self.trace_id}", scenario=f"langsmith/{root.get('name') or 'run'}",
                       family="langsmith", title=root.get("name"), default_principal=USER, source_format="langsmith")
        self.b = b
        b.principal(USER, name="The user")
        b.started_at = _ts(root.get("start_time"))
        b.ended_at = _ts(root.get("end_time"))
        b.status = "error" if root.get("error") or root.get("status") == "error" else "completed"
        b.metadata["langsmith"] = {k: root.get(k) for k in ("id", "name", "session_name", "session_id", "tags",
                                                             "reference_example_id") if root.get(k)}
        # lanes: node runs -> agent names; ToolNode nodes inherit the lane that called their tools
        lanes = self.lanes()
        self.lane_of = lanes
        first_agent = next((lanes[str(r.get("id"))] for r in self.order
                            if r.get("run_type") == "llm" and str(r.get("id")) in lanes), None) or self.root_agent()
        self.calls: dict[str, int] = {}  # tool call id -> seq
        self.pending: dict[str, list[int]] = {}  # tool name -> call seqs not yet answered
        self.handoffs: dict[int, str] = {}
        # the user's messages
        for m in _messages((root.get("inputs") or {}).get("messages")) or _messages(root.get("inputs")):
            if m["role"] == "human" and m["text"]:
                self.emit_text("message", USER, m["text"], [first_agent], root, {"role": "human"})
        if not (root.get("inputs") or {}).get("messages") and root.get("inputs"):
            text = _plain_inputs(root.get("inputs"))
            if text:
                self.emit_text("message", USER, text, [first_agent], root, {"inputs": root.get("inputs")})
        index = {id(r): i for i, r in enumerate(self.order)}
        for r, at_end in self.steps:
            lane = lanes.get(str(r.get("id"))) or self.root_agent()
            rt = r.get("run_type")
            if at_end:
                if r is not root and self.node_of(r) is r:
                    self.node_outputs(r, lane, index[id(r)])
                continue
            self.check_run(r)
            if rt == "llm":
                self.llm(r, lane, index[id(r)])
            elif rt in ("tool", "retriever"):
                self.tool(r, lane)
            if r.get("error"):
                b.event("log", lane, r["error"], ts=_ts(r.get("end_time")), data={"run": self.ref(r), "error": True})
        if root.get("outputs"):
            self.root_outputs(root)
        fb = root.get("feedback_stats")
        if isinstance(fb, dict) and fb:
            metrics = {k: (v.get("avg") if isinstance(v, dict) else v) for k, v in fb.items()}
            b.outcome(USER, metrics=metrics)
        for what, runs in self.unmapped.items():
            b.warn(f"{what}: carries text in {len(runs)} run{'s' if len(runs) != 1 else ''} (e.g. {runs[0]!r}) "
                   "but maps to no canonical field; kept in data", field=what)
        if not b.events:
            b.event("log", self.root_agent(), root.get("name") or "run", data={"run": self.ref(root)})
        return b.item(loc)

    def root_agent(self) -> str:
        return str(self.root.get("name") or "agent")

    def lanes(self) -> dict[str, str]:
        out: dict[str, str] = {}
        last_caller: str | None = None
        tool_only: dict[str, bool] = {}
        for r in self.order:
            node = self.node_of(r)
            if node is not None:
                nid = str(node.get("id"))
                if nid not in tool_only:
                    tool_only[nid] = not any(d.get("run_type") == "llm" for d in self.descendants(node))
        for r in self.order:
            node = self.node_of(r)
            if node is None:
                lane = self.root_agent()
            elif tool_only.get(str(node.get("id"))) and last_caller is not None:
                lane = last_caller
            else:
                lane = str(node.get("name"))
            out[str(r.get("id"))] = lane
            if r.get("run_type") == "llm":
                last_caller = lane
        return out

    def is_under(self, d: dict[str, Any], r: dict[str, Any]) -> bool:
        cur = self.parent(d)
        n = 0
        while cur is not None and n < 10_000:
            if cur is r:
                return True
            cur = self.parent(cur)
            n += 1
        return False

    def descendants(self, r: dict[str, Any]) -> Iterator[dict[str, Any]]:
        stack = list(self.children.get(str(r.get("id")), []))
        n = 0
        while stack and n < 100_000:
            d = stack.pop()
            n += 1
            yield d
            stack.extend(self.children.get(str(d.get("id")), []))

    def next_lane(self, i: int, lane: str) -> str:
        for r in self.order[i + 1:]:
            other = self.lane_of.get(str(r.get("id")))
            if r.get("run_type") == "llm" and other and other != lane:
                return other
        return USER

    def ref(self, r: dict[str, Any]) -> dict[str, Any]:
        meta = ((r.get("extra") or {}).get("metadata") or {}) if isinstance(r.get("extra"), dict) else {}
        return {k: v for k, v in (("id", r.get("id")), ("name", r.get("name")), ("run_type", r.get("run_type")),
                                  ("langgraph_node", meta.get("langgraph_node")),
                                  ("langgraph_step", meta.get("langgraph_step"))) if v is not None}

    def emit_text(self, kind: str, actor: str, text: str, to: list[str], r: dict[str, Any], data: dict,
                  **kw: Any) -> int | None:
        self.seen_text.add(text.strip())
        return self.b.event(kind, actor, text, recipients=[t for t in to if t], ts=_ts(r.get("start_time")),
                            data={"run": self.ref(r), **data}, **kw)

    def llm(self, r: dict[str, Any], lane: str, i: int) -> None:
        b = self.b
        inputs = r.get("inputs") or {}
        meta = ((r.get("extra") or {}).get("metadata") or {}) if isinstance(r.get("extra"), dict) else {}
        model = meta.get("ls_model_name") or (inputs.get("model") if isinstance(inputs, dict) else None)
        if model:
            b.agent(lane, model=str(model))
        # context the model was given that the log has not shown yet (system prompts, injected turns)
        for m in _messages(inputs.get("messages") if isinstance(inputs, dict) else None) or _messages(
                inputs.get("prompts") if isinstance(inputs, dict) else None):
            if m["text"] and m["text"].strip() not in self.seen_text:
                self.emit_text("log", lane, m["text"], [], r, {"role": m["role"], "context": True})
        if isinstance(inputs, dict) and isinstance(inputs.get("prompts"), list):
            for p in inputs["prompts"]:
                if isinstance(p, str) and p.strip() and p.strip() not in self.seen_text:
                    self.emit_text("log", lane, p, [], r, {"role": "prompt", "context": True})
        outputs = r.get("outputs") or {}
        for m in _llm_outputs(outputs if isinstance(outputs, dict) else {}):
            if m["tool_calls"]:
                if m["text"]:
                    self.emit_text("log", lane, m["text"], [], r, {"role": "ai"})
                for tc in m["tool_calls"]:
                    self.call(lane, tc, r)
            elif m["text"]:
                self.emit_text("message", lane, m["text"], [self.next_lane(i, lane)], r, {"role": "ai"})

    def call(self, lane: str, tc: dict[str, Any], r: dict[str, Any]) -> int:
        b = self.b
        name = str(tc.get("name") or "tool")
        hand = HANDOFF.match(name)
        if hand:
            seq = b.handoff(lane, hand.group(1), f"{name}({json.dumps(tc.get('args'), ensure_ascii=False)})",
                            data={"tool": name, "arguments": tc.get("args"), "call_id": tc.get("id"),
                                  "run": self.ref(r)}, ts=_ts(r.get("end_time")))
        else:
            seq = b.tool_call(lane, name, tc.get("args"), call_id=tc.get("id"), ts=_ts(r.get("end_time")),
                              data={"run": self.ref(r)})
        if tc.get("id"):
            self.calls[str(tc["id"])] = seq
        self.pending.setdefault(name, []).append(seq)
        return seq

    def tool(self, r: dict[str, Any], lane: str) -> None:
        b = self.b
        name = str(r.get("name") or "tool")
        outputs = r.get("outputs") or {}
        out = outputs.get("output", outputs) if isinstance(outputs, dict) else outputs
        msg = _message(out) if isinstance(out, dict) else None
        call_id = (msg or {}).get("tool_call_id") or (out.get("tool_call_id") if isinstance(out, dict) else None)
        parent = self.calls.get(str(call_id)) if call_id else None
        pend = self.pending.get(name) or []
        if parent is None and pend:
            parent = pend[0]
        if parent is not None and parent in pend:
            pend.remove(parent)
        if parent is None:  # a tool run no model call asked for: its call first
            inputs = r.get("inputs") or {}
            args = inputs.get("input", inputs) if isinstance(inputs, dict) and len(inputs) == 1 else inputs
            parent = b.tool_call(lane, name, args, ts=_ts(r.get("start_time")), data={"run": self.ref(r)})
        if msg is not None:
            result: Any = msg["text"]
            data = {"run": self.ref(r), "tool_call_id": call_id, "status": msg["raw"].get("status")}
        elif isinstance(out, dict) and isinstance(out.get("documents"), list):
            result = as_text([d.get("page_content") for d in out["documents"] if isinstance(d, dict)])
            data = {"run": self.ref(r), "result": out}
        else:
            result = out if isinstance(out, str) else (json.dumps(out, ensure_ascii=False, sort_keys=True)
                                                       if out not in (None, {}) else None)
            data = {"run": self.ref(r), "result": out}
        if result is None and r.get("error"):
            result = r["error"]
        if isinstance(result, str):
            self.seen_text.add(result.strip())
        b.tool_result(lane, result, parent=parent, name=name, is_error=bool(r.get("error")) or None,
                      ts=_ts(r.get("end_time")), data=data)

    def node_outputs(self, r: dict[str, Any], lane: str, i: int) -> None:
        """A node's output at its end: messages the node wrote without a model call (hand-offs
        back, canned replies), and state keys that carry text."""
        outputs = r.get("outputs")
        if not isinstance(outputs, dict):
            return
        last = max((i2 for i2, d in enumerate(self.order) if d is r or self.is_under(d, r)), default=i)
        for m in _messages(outputs.get("messages")):
            if m["role"] == "ai" and m["tool_calls"] and not any(str(tc.get("id")) in self.calls
                                                                 for tc in m["tool_calls"]):
                if m["text"] and m["text"].strip() not in self.seen_text:
                    self.emit_text("log", lane, m["text"], [], r, {"role": "ai", "from_node_output": True})
                for tc in m["tool_calls"]:
                    self.call(lane, tc, r)
            elif m["role"] == "tool" and m["text"] and m["text"].strip() not in self.seen_text:
                parent = self.calls.get(str(m.get("tool_call_id")))
                self.seen_text.add(m["text"].strip())
                self.b.tool_result(lane, m["text"], parent=parent, name=m.get("name"), ts=_ts(r.get("end_time")),
                                   data={"run": self.ref(r), "tool_call_id": m.get("tool_call_id"),
                                         "from_node_output": True})
            elif m["text"] and m["text"].strip() not in self.seen_text:
                self.emit_text("message" if m["role"] == "ai" else "log", lane, m["text"],
                               [self.next_lane(last, lane)] if m["role"] == "ai" else [], r,
                               {"role": m["role"], "from_node_output": True})
        for k, v in outputs.items():
            if k == "messages":
                continue
            text = as_text(v)
            if text and any(True for _ in text_leaves(v)) and text.strip() not in self.seen_text:
                self.emit_text("state_update", lane, f"{k}: {text}", [], r, {"state_key": k, "value": v})
                self.seen_text.add(text.strip())

    def root_outputs(self, root: dict[str, Any]) -> None:
        outputs = root.get("outputs") or {}
        if not isinstance(outputs, dict):
            return
        lane = self.root_agent() if not self.b.agents else list(self.b.agents)[-1]
        for m in _messages(outputs.get("messages")) + (_llm_outputs(outputs) if root.get("run_type") == "llm" else []):
            if m["text"] and m["text"].strip() not in self.seen_text:
                self.emit_text("message", lane, m["text"], [USER], root, {"role": m["role"], "from_outputs": True})
        for k, v in outputs.items():
            if k in ("messages", "generations", "choices", "llm_output", "usage", "id", "object", "created", "model",
                     "system_fingerprint", "service_tier", "usage_metadata"):
                continue
            text = as_text(v)
            if text and any(True for _ in text_leaves(v)) and text.strip() not in self.seen_text:
                self.emit_text("message", lane, text if k == "output" else f"{k}: {text}", [USER], root,
                               {"output_key": k})

    def check_run(self, r: dict[str, Any]) -> None:
        name = str(r.get("name") or r.get("id"))
        for k, v in r.items():
            if k in TEXT_READ or k in ("id", "trace_id", "parent_run_id", "dotted_order", "run_type", "start_time",
                                       "end_time", "status", "session_name", "session_id", "child_run_ids",
                                       "reference_example_id", "app_path", "manifest_id", "parent_run_ids",
                                       "first_token_time", "feedback_stats", "attachments", "run_id", "trace_tier",
                                       "ls_project"):
                continue
            if any(_prose(t) for _, t in text_leaves(v)):
                self.unmapped.setdefault(f"runs[].{k}", []).append(name)


def _prose(t: str) -> bool:
    return bool(re.search(r"\s", t.strip())) and bool(re.search(r"[^\W\d_]", t))


def _plain_inputs(inputs: Any) -> str | None:
    if not isinstance(inputs, dict):
        return as_text(inputs)
    for k in ("input", "question", "query", "prompt", "task", "messages"):
        if k in inputs:
            return as_text(inputs[k])
    return as_text(inputs) if inputs else None
