"""A small builder for readers: collect a run's principals, agents, events, labels and warnings
as you read a log, then hand it over as an `ImportItem` (normalized by the canonical normaliser,
the same one every importer goes through, so a reader cannot produce a run the loader refuses
without saying why).

A reader module, in full::

    from app.ingest.canonical import Location
    from app.ingest.readers.base import NO, Reader, Sniff
    from app.ingest.readers.builder import RunBuilder, load_json, peek_keys

    class MyLogs(Reader):
        name = "mylogs"
        description = "MyFramework chat logs (one JSON object per run)"

        def sniff(self, path):
            keys = peek_keys(path)
            return Sniff(0.9, "has 'turns' and 'episode'") if {"turns", "episode"} <= keys else NO

        def read(self, path, shown):
            doc, err = load_json(path, shown)
            if err is not None:
                yield err
                return
            b = RunBuilder(f"mylogs/{doc['episode']}", scenario=doc.get("task", "unknown"), family="mylogs")
            b.principal("customer", name="The customer")
            for i, turn in enumerate(doc["turns"]):
                b.check_keys(turn, {"speaker", "text"}, f"turns[{i}]")   # text in other keys: warned
                b.message(turn["speaker"], turn["text"], to=["helpdesk"] if turn["speaker"] == "customer" else ["customer"])
            yield b.item(Location(shown))

Rules the builder applies, so readers need not:

* `seq` is the order in which events were added (pass ``order_by_time=True`` to `build` to
  order them by ``ts`` instead; `parent` links are kept right either way);
* an actor or recipient that is not yet an agent, a principal or ``"system"`` becomes an agent
  (of `default_principal` when one is set); nothing is attributed to ``"system"`` unless the
  reader says ``"system"``;
* visibility: ``shared`` when the event has recipients, else ``private`` (say it explicitly for
  anything else);
* `tool_call` remembers its ``call_id``; a `tool_result` naming that id gets ``parent_seq`` = the
  call (an unknown id is a warning, never a silent orphan);
* `warn` adds a warning (``metadata.import_warnings``, reported by the import and counted by
  ``--strict``); `check_keys` warns for every key of a record that the reader does not map and
  whose value carries text (zero silent loss: such text would otherwise sit only in ``data``);
* `item` returns the `ImportItem`: the run, or the error that rejects it (a run needs an id and
  at least one event).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from app.ingest.canonical import SYSTEM_ACTOR, Location, epoch_to_iso
from app.ingest.items import ImportItem, error_item, item_from_raw
from app.ingest.readers.canonical import BOM
from app.ingest.safety import safejson
from app.ingest.safety.limits import input_limits

__all__ = ["RunBuilder", "as_text", "text_leaves", "load_json", "peek_keys", "peek_text"]

#: keys of a content part that hold its text (OpenAI, Anthropic, Gemini, AutoGen parts)
_PART_TEXT_KEYS = ("text", "content", "output_text", "input_text", "refusal", "thinking", "value")


def as_text(value: Any) -> str | None:
    """The text of a message content in the shapes frameworks write: a string; a list of parts
    (``{"type": "text", "text": ...}``, plain strings, ...) joined by newlines; a dict with a
    text key; anything else (numbers, other dicts) as compact JSON. None and "" give None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value != "" else None
    if isinstance(value, list):
        parts = [as_text(p) for p in value]
        joined = "\n".join(p for p in parts if p)
        return joined or None
    if isinstance(value, dict):
        for k in _PART_TEXT_KEYS:
            if isinstance(value.get(k), (str, list)):
                text = as_text(value[k])
                if text:
                    return text
        if not value:
            return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def text_leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every non-blank string in `value` with its path (``a.b[2].c``): what "carries text" means."""
    if isinstance(value, str):
        if value.strip():
            yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from text_leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from text_leaves(v, f"{path}[{i}]")


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class RunBuilder:
    """Collects one run; see the module docstring. Every adder returns what it made (an id or a seq)."""

    def __init__(self, run_id: str, *, scenario: str | None = None, family: str = "unknown",
                 title: str | None = None, description: str | None = None, alignment: str | None = None,
                 status: str | None = None, default_principal: str | None = None,
                 source_format: str | None = None) -> None:
        self.run_id = str(run_id)[:300]
        self.scenario: dict[str, Any] = _clean({"id": str(scenario if scenario not in (None, "") else "unknown")[:300],
                                                "family": family, "title": title, "description": description,
                                                "alignment": alignment})
        self.status = status
        self.aggregate_score: float | None = None
        self.started_at: str | None = None
        self.ended_at: str | None = None
        self.default_principal = default_principal
        self.principals: dict[str, dict[str, Any]] = {}
        self.agents: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.audits: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.metadata: dict[str, Any] = {}
        self.warnings: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._calls: dict[str, int] = {}
        if source_format:
            self.metadata["source_format"] = source_format

    # ------------------------------------------------------------------ who

    def principal(self, pid: str, *, name: str | None = None, kind: str = "person", objective: str | None = None,
                  constraints: Iterable[str] | None = None, metadata: dict | None = None) -> str:
        """Add (or complete) a principal; returns its id. Later calls fill fields still unset."""
        pid = str(pid)[:200]
        p = self.principals.setdefault(pid, {"id": pid, "kind": kind})
        for k, v in (("name", name), ("objective", objective)):
            if v is not None and p.get(k) is None:
                p[k] = v
        if constraints is not None:
            p["constraints"] = [str(c) for c in constraints]
        if metadata:
            p.setdefault("metadata", {}).update(metadata)
        return pid

    def outcome(self, pid: str, *, success: bool | None = None, score: float | None = None,
                metrics: dict | None = None) -> None:
        """Set a principal's own outcome (the principal is added if it is new)."""
        p = self.principals.get(pid) or self.principals[self.principal(pid)]
        out = p.setdefault("outcome", {})
        if success is not None:
            out["success"] = bool(success)
        if score is not None:
            out["score"] = float(score)
        if metrics:
            out.setdefault("metrics", {}).update(metrics)

    def agent(self, aid: str, *, principal: str | None = None, role: str | None = None, model: str | None = None,
              harness: str | None = None, private_state: dict | None = None, metadata: dict | None = None) -> str:
        """Add (or complete) an agent; returns its id. Its principal is added when new."""
        aid = str(aid)[:200]
        if aid in self.principals or aid == SYSTEM_ACTOR:
            return aid
        principal = principal if principal is not None else self.default_principal
        if principal is not None:
            self.principal(principal)
        a = self.agents.setdefault(aid, {"id": aid})
        for k, v in (("principal", principal), ("role", role), ("model", model), ("harness", harness)):
            if v is not None and a.get(k) is None:
                a[k] = v
        if private_state:
            a.setdefault("private_state", {}).update(private_state)
        if metadata:
            a.setdefault("metadata", {}).update(metadata)
        return aid

    def actor(self, name: Any) -> str:
        """The id for `name` as an actor: an existing principal or agent, "system" only when the
        log says "system", else a new agent."""
        text = str(name).strip() if name is not None else ""
        if not text:
            self.warn("an event without an actor was attributed to 'system'")
            return SYSTEM_ACTOR
        text = text[:200]
        if text in self.principals or text in self.agents or text == SYSTEM_ACTOR:
            return text
        return self.agent(text)

    # ------------------------------------------------------------------ what

    def event(self, kind: str, actor: Any, content: Any = None, *, recipients: Iterable[Any] | None = None,
              visibility: str | None = None, data: dict | None = None, ts: Any = None, parent: int | None = None,
              hop: int | None = None, metadata: dict | None = None) -> int:
        """Add an event; returns its seq. `content` goes through `as_text`; `ts` may be an ISO
        string or epoch seconds."""
        who = self.actor(actor)
        to = [self.actor(r) for r in (recipients or ()) if r is not None]
        to = [r for r in dict.fromkeys(to) if r != who]
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            ts = epoch_to_iso(float(ts))
        seq = len(self.events)
        self.events.append(_clean({"seq": seq, "kind": kind, "actor": who, "recipients": to,
                                   "visibility": visibility or ("shared" if to else "private"),
                                   "content": as_text(content), "data": data or {}, "ts": ts,
                                   "parent_seq": parent, "hop": hop, "metadata": metadata}))
        return seq

    def message(self, actor: Any, content: Any, *, to: Iterable[Any] | None = None, **kw: Any) -> int:
        """A message; shared with `to` when given, else private to `actor`."""
        return self.event("message", actor, content, recipients=to, **kw)

    def broadcast(self, actor: Any, content: Any, members: Iterable[Any], **kw: Any) -> int:
        """A group-chat turn: shared, every other member a recipient."""
        return self.event("message", actor, content, recipients=members, visibility="shared", **kw)

    def thought(self, actor: Any, content: Any, **kw: Any) -> int:
        """An agent's inner step (reasoning, plan, memory): a private log event."""
        return self.event("log", actor, content, visibility="private", **kw)

    def tool_call(self, actor: Any, name: str | None, arguments: Any = None, *, call_id: str | None = None,
                  content: Any = None, data: dict | None = None, **kw: Any) -> int:
        """A tool call (private to `actor` unless `recipients` say otherwise); `content` defaults
        to ``name(arguments)``. The call id is remembered for `tool_result`."""
        d = _clean({"tool": name, "arguments": arguments, "call_id": call_id})
        d.update(data or {})
        if content is None:
            args = arguments if isinstance(arguments, str) else (
                json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str) if arguments is not None else "")
            content = f"{name or 'tool'}({args})"
        seq = self.event("tool_call", actor, content, data=d, **kw)
        if call_id:
            self._calls[str(call_id)] = seq
        return seq

    def tool_result(self, actor: Any, result: Any, *, call_id: str | None = None, parent: int | None = None,
                    name: str | None = None, is_error: bool | None = None, data: dict | None = None, **kw: Any) -> int:
        """A tool's result, linked to its call: `parent` given, or the call with `call_id`
        (a call id never seen is a warning)."""
        if parent is None and call_id is not None:
            parent = self._calls.get(str(call_id))
            if parent is None:
                self.warn(f"tool result for call id {call_id!r}, which no tool call of this run has; kept unlinked")
        d = _clean({"tool": name, "call_id": call_id, "is_error": is_error})
        if not isinstance(result, str) and result is not None:
            d["result"] = result
        d.update(data or {})
        return self.event("tool_result", actor, result, parent=parent, data=d, **kw)

    def call_seq(self, call_id: str | None) -> int | None:
        """The seq of the tool call with `call_id`, if one was added."""
        return self._calls.get(str(call_id)) if call_id is not None else None

    def handoff(self, actor: Any, target: Any, content: Any = None, *, data: dict | None = None, **kw: Any) -> int:
        """A hand-off (transfer of control) from `actor` to `target`: a shared delegation."""
        target_id = self.actor(target)
        d = {"target": target_id}
        d.update(data or {})
        kw.setdefault("visibility", "shared")
        return self.event("delegation", actor, content if content is not None else f"hand-off to {target_id}",
                          recipients=[target_id], data=d, **kw)

    # ------------------------------------------------------------------ labels

    def label(self, source: str, *, mode: str | None = None, agent: str | None = None,
              evidence: Iterable[int] = (), level: str | None = None, note: str | None = None,
              metadata: dict | None = None) -> None:
        """A label shipped with the log (an audit: a judge's verdict, or an attribution when
        `mode` is None, which needs `agent` and `evidence`)."""
        self.audits.append(_clean({"source": source, "level": level, "mode": mode, "agent": agent,
                                   "evidence": list(evidence), "note": note, "metadata": metadata}))

    def check(self, source: str, check_id: str, passed: bool | None, *, level: str | None = None,
              agent: str | None = None, evidence: Iterable[int] = (), detail: str | None = None,
              metadata: dict | None = None) -> None:
        """A deterministic pass/fail check that names no failure mode."""
        self.checks.append(_clean({"source": source, "level": level, "check_id": check_id, "passed": passed,
                                   "agent": agent, "evidence": list(evidence), "detail": detail,
                                   "metadata": metadata}))

    # ------------------------------------------------------------------ loss

    def warn(self, message: str, *, field: str | None = None) -> None:
        """A warning: something of the log that the run does not hold faithfully."""
        w = {"message": message}
        if field:
            w["field"] = field
        self.warnings.append(w)

    def note(self, message: str) -> None:
        """An informational notice (not a warning: ``--strict`` keeps the run): kept in
        ``metadata.import_notes`` and reported as one of the item's `notices`."""
        self.notes.append(message)

    def check_keys(self, record: Any, mapped: Iterable[str], where: str, *, into: dict | None = None,
                   kept: str = "data") -> dict[str, Any]:
        """The keys of `record` outside `mapped`, as a dict (copied into `into` when given, so
        nothing is lost); a warning for each of them whose value carries text. `where` names the
        record (``messages[3]``), `kept` says where the reader keeps them (for the message)."""
        if not isinstance(record, dict):
            return {}
        known = set(mapped)
        extra = {k: v for k, v in record.items() if k not in known}
        for k, v in extra.items():
            leaves = list(text_leaves(v))
            if leaves:
                example = leaves[0][1]
                example = example if len(example) <= 60 else example[:57] + "..."
                at = f"{where}.{k}" if where else k
                self.warn(f"{at}: carries text ({example!r}) but maps to no canonical field; kept in {kept}", field=at)
        if into is not None:
            into.update(extra)
        return extra

    # ------------------------------------------------------------------ out

    def build(self, *, order_by_time: bool = False) -> dict[str, Any]:
        """The raw canonical run (not yet normalized)."""
        events = [dict(e) for e in self.events]
        if order_by_time:
            from app.ingest.canonical import ts_order

            order = ts_order([e.get("ts") for e in events])
            new = {old: new for new, old in enumerate(order)}
            events = [events[i] for i in order]
            for e in events:
                e["seq"] = new[e["seq"]]
                if e.get("parent_seq") is not None:
                    e["parent_seq"] = new[e["parent_seq"]]
            for a in self.audits:
                a["evidence"] = [new[s] for s in a.get("evidence", [])]
            for c in self.checks:
                c["evidence"] = [new[s] for s in c.get("evidence", [])]
        metadata = dict(self.metadata)
        if self.warnings:
            metadata["import_warnings"] = list(metadata.get("import_warnings", [])) + self.warnings
        if self.notes:
            metadata["import_notes"] = list(metadata.get("import_notes", [])) + self.notes
        run = {"run_id": self.run_id, "scenario": self.scenario, "principals": list(self.principals.values()),
               "agents": list(self.agents.values()), "events": events, "audits": self.audits, "metadata": metadata}
        if self.checks:
            run["checks"] = self.checks
        for k in ("status", "aggregate_score", "started_at", "ended_at"):
            if getattr(self, k) is not None:
                run[k] = getattr(self, k)
        return run

    def item(self, location: Location | str, *, order_by_time: bool = False) -> ImportItem:
        """The run as an `ImportItem` (normalized), or the error that rejects it."""
        loc = location if isinstance(location, Location) else Location(str(location))
        if not self.events:
            return error_item(loc, "the run has no events (nothing to import)", run_id=self.run_id, field="events")
        item = item_from_raw(self.build(order_by_time=order_by_time), loc)
        if item.ok and self.notes:  # reported as notices, not warnings (--strict keeps the run)
            item.notices.extend({"location": str(loc), "message": n, "run_id": self.run_id} for n in self.notes)
        return item


# ---------------------------------------------------------------------- file helpers

def load_json(path: str | os.PathLike, shown: str) -> tuple[Any, ImportItem | None]:
    """Parse a JSON file through the safety layer (input limits, BOM, UTF-8); returns
    ``(document, None)`` or ``(None, error item naming the file and line)``."""
    try:
        size = os.path.getsize(path)
        most = input_limits().max_record_bytes
        if size > most * 16:
            return None, error_item(Location(shown), f"input limit: {size} bytes, more than {most * 16} "
                                                     "(16 x MAX_RECORD_BYTES)")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        return None, error_item(Location(shown), f"cannot read: {exc.strerror or exc}")
    if data.startswith(BOM):
        data = data[3:]
    try:
        return safejson.loads(data), None
    except UnicodeDecodeError as exc:
        return None, error_item(Location(shown), f"not UTF-8 text: {exc.reason}")
    except ValueError as exc:
        return None, error_item(Location(shown, getattr(exc, "lineno", None)),
                                f"not valid JSON: {getattr(exc, 'msg', exc)}")


def load_json_or_lines(path: str | os.PathLike, shown: str) -> Iterator[tuple[Any, Location] | ImportItem]:
    """The records of a JSON document (one object, or each element of an array) or of JSON
    Lines, each with its location; a line that is not JSON is an error item for that line."""
    doc, err = load_json(path, shown)
    if err is None:
        if isinstance(doc, list):
            for i, rec in enumerate(doc):
                yield rec, Location(shown, pointer=f"[{i}]")
        else:
            yield doc, Location(shown)
        return
    try:
        with open(path, "rb") as f:
            lines = list(safejson.bounded_lines(f))
    except OSError:
        yield err
        return
    if sum(1 for ln in lines if isinstance(ln, bytes) and ln.strip()) < 2:
        yield err
        return
    for n, raw in enumerate(lines, 1):
        if isinstance(raw, safejson.LineTooLong):
            yield error_item(Location(shown, n), f"input limit: the line is {raw.size} bytes long")
            continue
        raw = raw[3:] if n == 1 and raw.startswith(BOM) else raw
        if not raw.strip():
            continue
        try:
            yield safejson.loads(raw), Location(shown, n)
        except (UnicodeDecodeError, ValueError) as exc:
            yield error_item(Location(shown, n), f"not valid JSON: {getattr(exc, 'msg', exc)}")


def peek_text(path: str | os.PathLike, max_bytes: int = 1 << 16) -> str:
    """The first `max_bytes` of a file as text ("" when it cannot be read): for sniffing."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes)
    except OSError:
        return ""
    if data.startswith(BOM):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def peek_keys(path: str | os.PathLike, *, first_record: bool = True, limit: int = 64) -> set[str]:
    """The top-level keys of a JSON file's object (or of its first record: the first element of
    a top-level array, or the first JSON line), read from the start of the file only."""
    try:
        with open(path, "rb") as f:
            return safejson.top_level_keys(f, limit, max_bytes=1 << 20, stop=(), first_record=first_record)
    except (ValueError, OSError):
        return set()
