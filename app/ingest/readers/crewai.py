"""CrewAI: a crew's event log, its `CrewOutput`, or its ``output_log_file``.

Shapes read (from crewAIInc/crewAI ``lib/crewai/src/crewai``: ``events/types/*.py``,
``events/listeners/tracing/types.py`` ``TraceEvent`` and ``trace_listener.py``,
``crews/crew_output.py``, ``tasks/task_output.py``, ``utilities/file_handler.py``):

* event log: a JSON array or JSON Lines of events, or the trace batch ``{"events": [...],
  "batch_metadata": ...}``; each event either a ``TraceEvent`` (``event_id``, ``timestamp``,
  ``type``, ``event_data``, ``emission_sequence``, ``parent_event_id``) or a bare event dump
  (``type``, ``timestamp``, ``agent_role``, ``task_name``, ... at the top). Types read:
  ``crew_kickoff_started`` (``crew_name``, ``inputs``), ``task_started`` (``task_description``,
  ``expected_output``, ``context``, ``agent_role``), ``agent_execution_started`` (``agent_role``,
  ``agent_goal``, ``agent_backstory``, ``task_prompt``), ``llm_call_started`` (``messages``),
  ``llm_call_completed`` (``response``), ``tool_usage_started`` / ``tool_usage_finished`` /
  ``tool_usage_error`` (``tool_name``, ``tool_args``, ``output``, ``error``), ``task_completed``
  (``output_raw``), ``task_failed``, ``agent_execution_completed`` / ``_error`` (``output``,
  ``error``), ``agent_reasoning_completed`` (``plan``), ``crew_kickoff_completed`` (``output``),
  ``crew_kickoff_failed``, ``crew_test_result`` (``quality``); ``llm_stream_chunk`` /
  ``llm_thinking_chunk`` are the pieces of a response that ``llm_call_completed`` holds whole
  (counted, not stored twice). Every kickoff starts a run (several runs per file).
* ``CrewOutput`` (``raw``, ``pydantic``, ``json_dict``, ``tasks_output[]``, ``token_usage``), each
  ``TaskOutput`` with ``description``, ``name``, ``expected_output``, ``summary``, ``raw``,
  ``json_dict``, ``agent``, ``output_format``, ``messages[]`` ({role, content}).
* ``output_log_file`` JSON: ``[{timestamp, task_name, task, agent, status, output, ...}]``.

Mapping: the principal is the user who kicked the crew off (``inputs``); the crew itself is an agent
(named by ``crew_name``, role ``crew``) that hands each task to its agent (a shared delegation with
the description and expected output); an agent's role names it. The agent's prompts, model
responses, tool calls and results are private to it (a result linked to its call); the built-in
``Delegate work to coworker`` / ``Ask question to coworker`` tools are shared delegations to the
coworker, their result the coworker's shared answer; a task's output is a shared message to the
crew; the crew's final output a shared message to the user. ``crew_kickoff_failed`` / ``task_failed``
make the status ``failed``; ``crew_test_result`` quality is the user's outcome score. LLM call
configuration (``tools``, ``callbacks``, ``available_functions``, sampling parameters) is kept in
``data``; any other key that carries text is reported as a warning.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item
from app.ingest.readers.base import NO, Reader, Sniff
from app.ingest.readers.builder import (
    RunBuilder,
    as_text,
    load_json,
    load_json_or_lines,
    peek_keys,
    text_leaves,
)

USER = "user"
DELEGATION_TOOLS = {"delegate work to coworker": "delegate", "ask question to coworker": "ask"}
#: keys every event may carry that hold no message text (ids, times, fingerprints)
BASE_KEYS = {"timestamp", "type", "source_fingerprint", "source_type", "fingerprint_metadata", "task_id", "task_name",
             "agent_id", "agent_role", "event_id", "parent_event_id", "previous_event_id", "triggered_by_event_id",
             "started_event_id", "emission_sequence", "crew_name", "crew", "from_task", "from_agent", "agent",
             "task", "agent_key", "call_id", "model", "run_attempts", "delegations", "tool_class", "started_at",
             "finished_at", "from_cache", "output_format", "task_display_name", "call_type", "usage",
             "finish_reason", "response_id", "attempt", "ready", "total_tokens", "iteration", "event_data",
             "serialization_error", "object_type", "event_type", "source"}
#: LLM call configuration: kept in data, not text of the conversation
CONFIG_KEYS = {"tools", "callbacks", "available_functions", "temperature", "top_p", "max_tokens", "stream", "seed",
               "stop_sequences", "frequency_penalty", "presence_penalty", "n", "response_format"}
READ_KEYS = {"inputs", "task_description", "expected_output", "context", "agent_goal", "agent_backstory",
             "task_prompt", "messages", "response", "tool_name", "tool_args", "output", "error", "output_raw", "plan",
             "quality", "chunk", "tool_call", "execution_duration", "agent_info", "failure"}
#: the key whose text an unknown event type's log event shows (the first present)
GENERIC_TEXT = ("message", "output", "error", "query", "task_prompt", "content", "result", "plan")
LOG_KEYS = {"timestamp", "task_name", "task", "agent", "status", "output", "input", "message", "level", "crew",
            "flow", "tool", "error", "duration", "metadata"}


def _event(rec: dict[str, Any]) -> dict[str, Any]:
    """A TraceEvent or a bare event as one flat dict (``event_data`` merged in)."""
    data = rec.get("event_data")
    if isinstance(data, dict):
        inner = data.get("event") if isinstance(data.get("event"), dict) and "event_type" in data else data
        merged = {**inner, **{k: v for k, v in rec.items() if k != "event_data"}}
        merged["type"] = rec.get("type") or inner.get("type")
        return merged
    return dict(rec)


def _role(e: dict[str, Any]) -> str | None:
    for key in ("agent_role",):
        if isinstance(e.get(key), str) and e[key].strip():
            return e[key].strip()
    for key in ("agent", "from_agent"):
        v = e.get(key)
        if isinstance(v, dict) and isinstance(v.get("role"), str):
            return v["role"].strip()
        if key == "agent" and isinstance(v, str) and v.strip():
            return v.strip()
    info = e.get("agent_info")
    if isinstance(info, dict) and isinstance(info.get("role"), str):
        return info["role"]
    return None


class CrewAIReader(Reader):
    name = "crewai"
    description = "CrewAI: a crew's event log (trace events, JSON array / JSON Lines), its CrewOutput, or output_log_file"

    def sniff(self, path: Path) -> Sniff:
        top = peek_keys(path, first_record=False)
        if "tasks_output" in top and top & {"raw", "token_usage", "json_dict"}:
            return Sniff(0.9, "a CrewAI CrewOutput ('tasks_output' beside raw / token_usage)")
        if "events" in top and "batch_metadata" in top:
            return Sniff(0.85, "a CrewAI trace batch ('events' beside 'batch_metadata')")
        first = peek_keys(path, first_record=True)
        if "type" in first and first & {"event_data", "emission_sequence", "source_fingerprint", "fingerprint_metadata"}:
            return Sniff(0.8, "CrewAI events: 'type' beside event_data / emission_sequence / source_fingerprint")
        if {"task", "agent", "status", "timestamp"} <= first and first <= LOG_KEYS:
            return Sniff(0.6, "a CrewAI output_log_file (timestamp, task, agent, status, output)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        stem = Path(shown).stem
        doc, err = load_json(path, shown)
        if err is None and isinstance(doc, dict) and "tasks_output" in doc:
            yield read_crew_output(doc, Location(shown), stem)
            return
        records: list[tuple[Any, Location]] = []
        if err is None and isinstance(doc, dict) and isinstance(doc.get("events"), list):
            records = [(e, Location(shown, pointer=f"events[{i}]")) for i, e in enumerate(doc["events"])]
        else:
            for rec in load_json_or_lines(path, shown):
                if isinstance(rec, ImportItem):
                    yield rec
                else:
                    records.append(rec)
        dicts = [(r, loc) for r, loc in records if isinstance(r, dict)]
        for r, loc in records:
            if not isinstance(r, dict):
                yield error_item(loc, f"a CrewAI event must be a JSON object, got {type(r).__name__}")
        if dicts and all("type" not in r and "status" in r for r, _ in dicts):
            yield read_log_file([r for r, _ in dicts], Location(shown), stem)
            return
        # one run per kickoff
        runs: list[list[tuple[dict, Location]]] = []
        for r, loc in dicts:
            e = _event(r)
            if e.get("type") == "crew_kickoff_started" or not runs:
                runs.append([])
            runs[-1].append((e, loc))
        for i, evs in enumerate(runs):
            yield _EventLog(evs, stem if len(runs) == 1 else f"{stem}-{i + 1}").item()


class _EventLog:
    def __init__(self, events: list[tuple[dict, Location]], stem: str) -> None:
        self.events = events
        self.stem = stem
        first = events[0][0]
        self.crew = str(first.get("crew_name") or next((e.get("crew_name") for e, _ in events if e.get("crew_name")),
                                                       None) or "crew")
        kick = next((e for e, _ in events if e.get("type") == "crew_kickoff_started"), first)
        rid = kick.get("event_id") or stem
        self.b = RunBuilder(f"crewai/{self.crew}/{rid}", scenario=f"crewai/{self.crew}", family="crewai",
                            title=self.crew, default_principal=USER, source_format="crewai")
        self.seen: set[str] = set()
        self.seen_all = ""
        self.task_agent: dict[str, str] = {}
        self.pending: dict[tuple[str, str], list[int]] = {}
        self.chunks = 0

    def remember(self, *texts: Any) -> None:
        for x in texts:
            t = as_text(x)
            if t and t.strip():
                self.seen.add(t.strip())
                self.seen_all += "\n" + t.strip()

    def text(self, kind: str, actor: str, text: Any, e: dict, to: list[str] | None = None, **data: Any) -> int | None:
        t = as_text(text)
        if not t:
            return None
        self.remember(t)
        return self.b.event(kind, actor, t, recipients=to, ts=e.get("timestamp"),
                            data={"crewai": {k: e[k] for k in ("event_id", "type", "task_id", "task_name",
                                                               "emission_sequence", "parent_event_id") if e.get(k)},
                                  **data})

    def unseen(self, text: Any) -> bool:
        """True when `text` is not (part of) a text already stored (a summary's "..." ignored)."""
        t = as_text(text)
        if not t or not t.strip():
            return False
        t = t.strip().removesuffix("...").strip()
        return t not in self.seen and t not in self.seen_all

    def item(self) -> ImportItem:
        b = self.b
        b.principal(USER, name="The user who kicked off the crew")
        b.agent(self.crew, role="crew")
        b.status = "completed"
        loc = self.events[0][1]
        for idx, (e, where) in enumerate(self.events):
            t = e.get("type")
            handler = getattr(self, f"on_{t}", None)
            role = _role(e) or self.task_agent.get(str(e.get("task_id"))) or self.crew
            if handler is not None:
                handler(e, role)
            elif t in ("llm_stream_chunk", "llm_thinking_chunk"):
                self.chunks += 1
            else:
                used = self.generic(e, role)
                if used:
                    e = {k: v for k, v in e.items() if k != used}
            self.check(e, where, idx, handled=handler is not None or t in ("llm_stream_chunk", "llm_thinking_chunk"))
        if self.chunks:
            b.note(f"{self.chunks} streamed chunks (llm_stream_chunk / llm_thinking_chunk): their text is in the "
                   "llm_call_completed responses")
        stamps = [str(e.get("timestamp")) for e, _ in self.events if e.get("timestamp")]
        b.started_at, b.ended_at = (min(stamps), max(stamps)) if stamps else (None, None)
        return b.item(loc)

    def check(self, e: dict, where: Location, idx: int, handled: bool) -> None:
        mapped = BASE_KEYS | CONFIG_KEYS | (READ_KEYS if handled else set())
        self.b.check_keys(e, mapped, f"events[{idx}]({e.get('type')})")

    # ---------------------------------------------------------------- handlers

    def on_crew_kickoff_started(self, e: dict, role: str) -> None:
        inputs = e.get("inputs")
        if inputs:
            self.text("message", USER, inputs if isinstance(inputs, str) else json.dumps(inputs, ensure_ascii=False),
                      e, [self.crew], inputs=inputs)
        else:
            self.text("log", self.crew, f"crew {self.crew} kicked off", e)

    def on_crew_kickoff_completed(self, e: dict, role: str) -> None:
        out = e.get("output")
        raw = out.get("raw") if isinstance(out, dict) else out
        self.text("message", self.crew, raw, e, [USER], output=out if isinstance(out, dict) else None)
        if isinstance(out, dict):
            for k in ("description", "expected_output", "summary", "name"):
                if self.unseen(out.get(k)):
                    self.b.warn(f"crew_kickoff_completed.output.{k}: carries text the log did not show before "
                                "but maps to no event; kept in data", field=f"output.{k}")
        if e.get("total_tokens"):
            self.b.metadata["total_tokens"] = e["total_tokens"]

    def on_crew_kickoff_failed(self, e: dict, role: str) -> None:
        self.b.status = "failed"
        self.text("log", self.crew, e.get("error") or "crew kickoff failed", e, error=True)

    def on_crew_test_result(self, e: dict, role: str) -> None:
        q = e.get("quality")
        if isinstance(q, (int, float)) and not isinstance(q, bool):
            self.b.outcome(USER, score=float(q), metrics={"quality": q, "execution_duration": e.get("execution_duration"),
                                                          "eval_model": e.get("model")})
            self.b.aggregate_score = float(q)

    def on_task_started(self, e: dict, role: str) -> None:
        if e.get("task_id"):
            self.task_agent[str(e["task_id"])] = role
        parts = [as_text(e.get("task_description")) or as_text(e.get("task_name"))]
        if e.get("expected_output"):
            parts.append(f"Expected output: {e['expected_output']}")
        if self.unseen(e.get("context")):
            parts.append(f"Context: {e['context']}")
        self.b.agent(role, role=role)
        self.remember(e.get("task_description"), e.get("expected_output"), e.get("context"))
        self.text("delegation", self.crew, "\n\n".join(p for p in parts if p), e, [role],
                  expected_output=e.get("expected_output"), context=e.get("context") or None)

    def on_task_completed(self, e: dict, role: str) -> None:
        out = e.get("output_raw")
        if out is None and isinstance(e.get("output"), dict):
            out = e["output"].get("raw")
        self.text("message", role, out, e, [self.crew], output_format=e.get("output_format"))

    def on_task_failed(self, e: dict, role: str) -> None:
        self.b.status = "failed"
        self.text("log", role, e.get("error") or "task failed", e, error=True)

    def on_agent_execution_started(self, e: dict, role: str) -> None:
        agent = e.get("agent") if isinstance(e.get("agent"), dict) else {}
        goal = e.get("agent_goal") or agent.get("goal")
        backstory = e.get("agent_backstory") or agent.get("backstory")
        self.b.agent(role, role=role, metadata={k: v for k, v in (("goal", goal), ("backstory", backstory)) if v})
        profile = "\n".join(p for p in (f"Goal: {goal}" if goal else None, f"Backstory: {backstory}"
                                        if backstory else None) if p)
        if profile and self.unseen(profile):
            self.text("log", role, profile, e, profile=True)
        if self.unseen(e.get("task_prompt")):
            self.text("log", role, e.get("task_prompt"), e, prompt=True)

    def on_agent_execution_completed(self, e: dict, role: str) -> None:
        if self.unseen(e.get("output")):
            self.text("log", role, e.get("output"), e, final=True)

    def on_agent_execution_error(self, e: dict, role: str) -> None:
        self.text("log", role, e.get("error") or "agent error", e, error=True)

    on_lite_agent_execution_started = on_agent_execution_started
    on_lite_agent_execution_completed = on_agent_execution_completed
    on_lite_agent_execution_error = on_agent_execution_error

    def on_llm_call_started(self, e: dict, role: str) -> None:
        msgs = e.get("messages")
        if isinstance(msgs, str):
            msgs = [{"role": "user", "content": msgs}]
        for m in msgs or []:
            if isinstance(m, dict) and self.unseen(m.get("content")):
                self.text("log", role, m.get("content"), e, role_in_prompt=m.get("role"), context=True)

    def on_llm_call_completed(self, e: dict, role: str) -> None:
        resp = e.get("response")
        if isinstance(resp, (dict, list)) and not isinstance(resp, str):
            text = as_text(resp)
        else:
            text = resp
        self.text("log", role, text, e, llm_response=True, model=e.get("model"))

    def on_llm_call_failed(self, e: dict, role: str) -> None:
        self.text("log", role, e.get("error") or "LLM call failed", e, error=True)

    def on_agent_reasoning_completed(self, e: dict, role: str) -> None:
        self.text("log", role, e.get("plan"), e, plan=True)

    def on_tool_usage_started(self, e: dict, role: str) -> None:
        name = str(e.get("tool_name") or "tool")
        args = e.get("tool_args")
        if isinstance(args, str) and args[:1] == "{":
            try:
                args = json.loads(args)
            except ValueError:
                pass
        kind = DELEGATION_TOOLS.get(name.strip().lower())
        data = {"crewai": {k: e[k] for k in ("event_id", "task_id", "run_attempts") if e.get(k) is not None}}
        if kind and isinstance(args, dict) and args.get("coworker"):
            coworker = str(args["coworker"]).strip()
            text = "\n\n".join(p for p in (as_text(args.get("task") or args.get("question")),
                                           f"Context: {args['context']}" if args.get("context") else None) if p)
            self.remember(text, args.get("task"), args.get("question"), args.get("context"))
            seq = self.b.handoff(role, coworker, text, ts=e.get("timestamp"),
                                 data={"tool": name, "arguments": args, "delegation": kind, **data})
        else:
            seq = self.b.tool_call(role, name, args, ts=e.get("timestamp"), data=data)
        self.pending.setdefault((role, name), []).append(seq)

    def _result(self, e: dict, role: str, result: Any, is_error: bool) -> None:
        name = str(e.get("tool_name") or "tool")
        calls = self.pending.get((role, name)) or []
        parent = calls.pop(0) if calls else None
        if parent is None:
            parent = self.b.tool_call(role, name, e.get("tool_args"), ts=e.get("timestamp"))
        call = self.b.events[parent]
        text = as_text(result)
        self.remember(text)
        if call["kind"] == "delegation":
            coworker = call["recipients"][0] if call["recipients"] else role
            self.b.event("message", coworker, text, recipients=[role], ts=e.get("timestamp"), parent=parent,
                         data={"tool": name, "is_error": is_error or None})
        else:
            self.b.tool_result(role, result, parent=parent, name=name, is_error=is_error or None, ts=e.get("timestamp"),
                               data={"from_cache": e.get("from_cache")} if e.get("from_cache") else None)

    def on_tool_usage_finished(self, e: dict, role: str) -> None:
        self._result(e, role, e.get("output"), False)

    def on_tool_usage_error(self, e: dict, role: str) -> None:
        self._result(e, role, e.get("error"), True)

    on_tool_execution_error = on_tool_usage_error
    on_tool_validate_input_error = on_tool_usage_error
    on_tool_selection_error = on_tool_usage_error

    def generic(self, e: dict, role: str) -> None:
        """An event type this reader does not know: a private log of its agent (or the crew) named
        by the type; its text-bearing keys are warned by `check`."""
        key = next((k for k in GENERIC_TEXT if as_text(e.get(k))), None)
        text = f"{e.get('type') or 'event'}: {as_text(e[key])}" if key else str(e.get("type") or "event")
        self.remember(e.get(key) if key else None)
        self.b.event("log", role, text, ts=e.get("timestamp"),
                     data={"crewai": {k: v for k, v in e.items() if k not in ("crew", "agent", "task")}})
        return key


def read_crew_output(doc: dict[str, Any], loc: Location, stem: str) -> ImportItem:
    b = RunBuilder(f"crewai/{stem}", scenario=f"crewai/{stem}", family="crewai", default_principal=USER,
                   source_format="crewai")
    crew = "crew"
    b.principal(USER, name="The user who kicked off the crew")
    b.agent(crew, role="crew")
    b.status = "completed"
    b.check_keys(doc, {"raw", "pydantic", "json_dict", "tasks_output", "token_usage"}, "crew_output")
    seen: set[str] = set()
    for i, t in enumerate(doc.get("tasks_output") or []):
        if not isinstance(t, dict):
            b.warn(f"tasks_output[{i}]: not an object; skipped", field=f"tasks_output[{i}]")
            continue
        role = str(t.get("agent") or "agent").strip()
        b.agent(role, role=role)
        desc = as_text(t.get("description")) or as_text(t.get("name")) or f"task {i + 1}"
        if t.get("expected_output"):
            desc += f"\n\nExpected output: {t['expected_output']}"
        b.handoff(crew, role, desc, data={"task_name": t.get("name"), "summary": t.get("summary"),
                                          "expected_output": t.get("expected_output")})
        seen.update({as_text(t.get("description")) or "", as_text(t.get("summary")) or ""})
        for j, m in enumerate(t.get("messages") or []):
            if not isinstance(m, dict):
                continue
            b.check_keys(m, {"role", "content", "tool_call_id", "name", "tool_calls"}, f"tasks_output[{i}].messages[{j}]")
            text = as_text(m.get("content"))
            if text and text.strip() not in seen:
                seen.add(text.strip())
                b.thought(role, text, data={"role": m.get("role"), "tool_calls": m.get("tool_calls")})
        raw = as_text(t.get("raw"))
        if raw:
            seen.add(raw.strip())
        b.message(role, raw or f"(task {i + 1}: no output)", to=[crew],
                  data={"output_format": t.get("output_format"), "json_dict": t.get("json_dict"),
                        "pydantic": t.get("pydantic")})
        b.check_keys(t, {"description", "name", "expected_output", "summary", "raw", "pydantic", "json_dict", "agent",
                         "output_format", "messages", "tool_failures"}, f"tasks_output[{i}]")
        for k in ("json_dict", "pydantic"):
            for path, text in text_leaves(t.get(k)):
                if text.strip() not in seen and text.strip() not in (raw or ""):
                    b.warn(f"tasks_output[{i}].{k}.{path}: carries text ({text[:40]!r}) that the output's raw does "
                           "not hold; kept in data", field=f"tasks_output[{i}].{k}")
        for f in t.get("tool_failures") or []:
            b.event("log", role, as_text(f), data={"tool_failure": f})
    final = as_text(doc.get("raw"))
    if final:
        b.message(crew, final, to=[USER], data={"json_dict": doc.get("json_dict"), "pydantic": doc.get("pydantic")})
    if isinstance(doc.get("token_usage"), dict):
        b.metadata["token_usage"] = doc["token_usage"]
    return b.item(loc)


def read_log_file(entries: list[dict[str, Any]], loc: Location, stem: str) -> ImportItem:
    crew = next((str(e["crew"]) for e in entries if e.get("crew")), "crew")
    b = RunBuilder(f"crewai/{crew}/{stem}", scenario=f"crewai/{crew}", family="crewai", default_principal=USER,
                   source_format="crewai")
    b.principal(USER, name="The user who kicked off the crew")
    b.agent(crew, role="crew")
    b.status = "completed"
    for i, e in enumerate(entries):
        role = str(e.get("agent") or crew).strip()
        if role == "None":
            role = crew
        status = str(e.get("status") or "")
        b.check_keys(e, LOG_KEYS - {"metadata"}, f"[{i}]")
        ts = str(e["timestamp"]).replace(" ", "T") + "Z" if e.get("timestamp") else None
        if status == "started":
            b.handoff(crew, role, as_text(e.get("task")) or as_text(e.get("task_name")) or "task", ts=ts,
                      data={"task_name": e.get("task_name")})
        elif status == "completed":
            b.message(role, as_text(e.get("output")) or "(no output)", to=[crew], ts=ts,
                      data={"task_name": e.get("task_name")})
        else:
            text = as_text(e.get("message")) or as_text(e.get("output")) or as_text(e.get("error")) or status or "log"
            if e.get("error") or status == "failed":
                b.status = "failed"
            b.event("log", role, text, ts=ts, data={"status": status or None, "tool": e.get("tool")})
    return b.item(loc)
