"""Google ADK (Agent Development Kit) sessions: a `Session` as JSON (what ``adk web`` / the API
server return for ``GET /apps/{app}/users/{user}/sessions/{id}``, or a session service's dump), or a
bare list of its events (JSON array or JSON Lines). Field names in either spelling: snake_case
(``invocation_id``, ``function_call``, ``transfer_to_agent``) or the camelCase aliases ADK's models
write (``invocationId``, ``functionCall``, ``transferToAgent``).

Shapes read (from google/adk-python ``src/google/adk/events/event.py``, ``event_actions.py``,
``sessions/session.py`` and google.genai ``Content``/``Part``):

* session: ``id``, ``app_name``, ``user_id``, ``state``, ``events[]``, ``last_update_time`` (older
  dumps: ``context`` for the state, per-event ``options``);
* event: ``author`` ("user" or the agent's name), ``content: {role, parts[]}``, ``actions:
  {state_delta, artifact_delta, transfer_to_agent, escalate, skip_summarization,
  requested_auth_configs}``, ``invocation_id``, ``branch``, ``id``, ``timestamp`` (epoch seconds),
  ``partial``, ``turn_complete``, ``error_code``, ``error_message``, ``interrupted``,
  ``long_running_tool_ids``, ``usage_metadata``, ``grounding_metadata``, ``custom_metadata``;
* part: ``text`` (``thought: true`` for reasoning), ``function_call {id, name, args}``,
  ``function_response {id, name, response}``, ``executable_code {code, language}``,
  ``code_execution_result {outcome, output}``, ``inline_data`` / ``file_data``.

Mapping: one run per session, id ``adk/<app_name>/<session id>``; the principal is the user
(``user_id`` names it); each author is an agent of the user. A user's text is a shared message to the
agent that answers it; an agent's text is a shared message to the user; a thought part is the agent's
private log; function calls and responses are the agent's private tool calls and results (the result
linked to its call by id, else by name); ``actions.transfer_to_agent`` (or a ``transfer_to_agent``
call naming ``agent_name``, when the log has no actions) is a shared hand-off to that agent;
``state_delta`` a private state update, ``artifact_delta`` an artifact event, ``escalate`` a shared
delegation to the parent agent (from ``branch``) or a log, an error a log event and the run's status
``error``. Keys that carry text and map to nothing are warnings.
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
from app.ingest.readers.builder import RunBuilder, load_json_or_lines, peek_keys, peek_text
from app.ingest.readers.otlp_dialects import part_of

USER = "user"
TRANSFER_TOOLS = {"transfer_to_agent": "agent_name", "transfer_to_other_agent": "agent_name"}

SESSION_KEYS = {"id", "app_name", "user_id", "state", "events", "last_update_time", "context"}
EVENT_KEYS = {"author", "content", "actions", "invocation_id", "branch", "id", "timestamp", "partial",
              "turn_complete", "error_code", "error_message", "interrupted", "long_running_tool_ids",
              "usage_metadata", "grounding_metadata", "custom_metadata", "options", "is_greeting",
              "finish_reason", "model_version", "avg_logprobs", "live_session_resumption_update",
              "input_transcription", "output_transcription", "citation_metadata", "cache_metadata"}
#: event keys whose strings are ids, enums or numbers (not message text)
EVENT_META = {"invocation_id", "branch", "id", "timestamp", "partial", "turn_complete", "error_code", "interrupted",
              "long_running_tool_ids", "usage_metadata", "is_greeting", "finish_reason", "model_version",
              "avg_logprobs", "cache_metadata"}
PART_KEYS = {"text", "thought", "thought_signature", "function_call", "function_response", "executable_code",
             "code_execution_result", "inline_data", "file_data", "video_metadata"}
ACTION_KEYS = {"state_delta", "artifact_delta", "transfer_to_agent", "escalate", "skip_summarization",
               "requested_auth_configs", "requested_tool_confirmations", "end_of_agent", "agent_state",
               "rewind_before_invocation_id", "transfer_reason"}


def snake(d: Any) -> dict[str, Any]:
    """A dict with camelCase keys (ADK's JSON aliases) as snake_case (one level)."""
    if not isinstance(d, dict):
        return {}
    return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): v for k, v in d.items()}


def _looks_like_event(keys: set[str]) -> bool:
    keys = {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower() for k in keys}
    return "author" in keys and bool(keys & {"invocation_id", "content", "actions"})


class AdkReader(Reader):
    name = "adk"
    description = "Google ADK sessions: a Session JSON (id, app_name, user_id, state, events[]) or a list of its events"

    def sniff(self, path: Path) -> Sniff:
        keys = {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower() for k in peek_keys(path, first_record=False)}
        if "events" in keys and keys & {"app_name", "user_id", "last_update_time"}:
            return Sniff(0.9, "an ADK session: 'events' beside app_name / user_id / last_update_time")
        if "events" in keys and "id" in keys and '"author"' in peek_text(path):
            return Sniff(0.7, "an object with 'id' and 'events' whose events have an 'author' (an ADK session dump)")
        first = peek_keys(path, first_record=True)
        if _looks_like_event(first):
            return Sniff(0.85, "records with 'author' and 'invocation_id' / 'content' (ADK events)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        records = list(load_json_or_lines(path, shown))
        errors = [r for r in records if isinstance(r, ImportItem)]
        yield from errors
        docs = [r for r in records if not isinstance(r, ImportItem)]
        if not docs:
            return
        if len(docs) == 1 and isinstance(docs[0][0], dict) and "events" in docs[0][0]:
            yield read_session(docs[0][0], Location(shown), Path(shown).stem)
            return
        sessions = [(d, loc) for d, loc in docs if isinstance(d, dict) and "events" in d]
        if sessions:  # a list of sessions
            for d, loc in sessions:
                yield read_session(d, loc, f"{Path(shown).stem}-{loc.pointer or loc.line}")
            return
        events = [d for d, _ in docs]
        yield read_session({"id": Path(shown).stem, "events": events}, Location(shown), Path(shown).stem)


def read_session(raw: dict[str, Any], loc: Location, stem: str) -> ImportItem:
    s = snake(raw)
    sid = s.get("id") or stem
    app = s.get("app_name")
    events = s.get("events")
    if not isinstance(events, list) or not events:
        return error_item(loc, "an ADK session needs a non-empty 'events' list (a run needs events)", field="events")
    rid = f"adk/{app}/{sid}" if app else f"adk/{sid}"
    b = RunBuilder(rid, scenario=f"adk/{app}" if app else "unknown", family="adk", title=app,
                   default_principal=USER, source_format="adk")
    b.principal(USER, name=str(s["user_id"]) if s.get("user_id") else "The user",
                metadata={"user_id": s["user_id"]} if s.get("user_id") else None)
    state = s.get("state", s.get("context"))
    b.metadata["adk"] = {k: v for k, v in s.items() if k not in ("events",)}
    if state:
        b.note("the session's final state is kept in metadata.adk.state")
    for k in s:
        if k not in SESSION_KEYS:
            b.check_keys({k: s[k]}, (), "session", kept="metadata.adk")
    evs = [snake(e) for e in events]
    authors = [e.get("author") for e in evs]
    _Session(b, evs, authors).read()
    return b.item(loc)


class _Session:
    def __init__(self, b: RunBuilder, evs: list[dict[str, Any]], authors: list[Any]) -> None:
        self.b = b
        self.evs = evs
        self.authors = authors
        self.pending: dict[str, list[int]] = {}  # tool name -> unanswered call seqs (calls without ids)
        self.transfer_calls: dict[int, str] = {}  # call seq -> target named in its args
        self.answered: int | None = None  # the call the last function_response answered

    def answerer(self, i: int) -> str | None:
        """The agent that answers the user's event i: the next author that is not the user."""
        inv = self.evs[i].get("invocation_id")
        for j in range(i + 1, len(self.evs)):
            a = self.authors[j]
            if isinstance(a, str) and a and a != USER and (inv is None or self.evs[j].get("invocation_id") in (inv, None)):
                return a
        return next((a for a in self.authors if isinstance(a, str) and a and a != USER), None)

    def read(self) -> None:
        b = self.b
        first_ts = last_ts = None
        for i, e in enumerate(self.evs):
            where = f"events[{i}]"
            if not e:
                b.warn(f"{where}: not an object; skipped", field=where)
                continue
            author = e.get("author")
            if not isinstance(author, str) or not author.strip():
                b.warn(f"{where}: no author; attributed to 'system'", field=f"{where}.author")
                author = "system"
            if author != USER and author != "system":
                b.agent(author, role="agent", metadata={"branch": e["branch"]} if e.get("branch") else None)
            ts = e.get("timestamp")
            if isinstance(ts, (int, float)) and not isinstance(ts, bool):
                first_ts = ts if first_ts is None else min(first_ts, ts)
                last_ts = ts if last_ts is None else max(last_ts, ts)
            else:
                ts = None
            meta = {k: e[k] for k in ("id", "invocation_id", "branch", "partial", "turn_complete", "finish_reason",
                                      "usage_metadata", "grounding_metadata", "custom_metadata", "interrupted")
                    if e.get(k) is not None}
            b.check_keys(e, EVENT_KEYS, where)
            for k in ("grounding_metadata", "custom_metadata"):
                if e.get(k):
                    b.check_keys({k: e[k]}, (), where, kept=f"data.adk.{k}")
            self.content(i, author, e.get("content"), ts, meta, where)
            actions = snake(e.get("actions"))
            options = snake(e.get("options"))  # older dumps
            self.actions(i, author, actions, options, ts, meta, where)
            if e.get("error_code") or e.get("error_message"):
                b.status = "error"
                b.event("log", author, e.get("error_message") or e.get("error_code"), ts=ts,
                        data={"adk": meta, "error_code": e.get("error_code")})
        b.started_at = _iso(first_ts)
        b.ended_at = _iso(last_ts)
        if b.status is None:
            b.status = "completed"

    def content(self, i: int, author: str, content: Any, ts: Any, meta: dict, where: str) -> None:
        b = self.b
        if content is None:
            return
        if not isinstance(content, dict):
            b.warn(f"{where}.content: expected a Content object; kept as text", field=f"{where}.content")
            b.event("log", author, content, ts=ts, data={"adk": meta})
            return
        parts = content.get("parts") or []
        to = [self.answerer(i)] if author == USER else [USER]
        to = [t for t in to if t]
        texts: list[str] = []
        for j, raw in enumerate(parts):
            p = part_of(raw)
            pw = f"{where}.content.parts[{j}]"
            b.check_keys(p, PART_KEYS, pw)
            if isinstance(p.get("text"), str) and p["text"]:
                if p.get("thought"):
                    b.thought(author, p["text"], ts=ts, data={"adk": meta, "thought": True})
                else:
                    texts.append(p["text"])
            fc = snake(p.get("function_call"))
            if fc:
                self.call(author, fc, ts, meta)
            fr = snake(p.get("function_response"))
            if fr:
                self.response(author, fr, ts, meta, pw)
            code = snake(p.get("executable_code"))
            if code:
                seq = b.tool_call(author, "code_execution", None, content=code.get("code"),
                                  data={"language": code.get("language"), "adk": meta}, ts=ts)
                self.pending.setdefault("code_execution", []).append(seq)
            res = snake(p.get("code_execution_result"))
            if res:
                calls = self.pending.get("code_execution") or []
                b.tool_result(author, res.get("output"), parent=calls.pop(0) if calls else None,
                              name="code_execution", is_error=res.get("outcome") not in (None, "OUTCOME_OK"),
                              data={"outcome": res.get("outcome"), "adk": meta}, ts=ts)
            for k in ("inline_data", "file_data"):
                blob = snake(p.get(k))
                if blob:
                    label = blob.get("display_name") or blob.get("file_uri") or blob.get("mime_type") or k
                    b.event("artifact", author, f"{k}: {label}", recipients=to, ts=ts,
                            data={k: {kk: vv for kk, vv in blob.items() if kk != "data"}, "adk": meta})
        if texts:
            b.message(author, "\n".join(texts), to=to, ts=ts, data={"adk": meta, "role": content.get("role")})

    def call(self, author: str, fc: dict[str, Any], ts: Any, meta: dict) -> None:
        name = fc.get("name")
        args = fc.get("args")
        seq = self.b.tool_call(author, name, args, call_id=fc.get("id"), ts=ts, data={"adk": meta})
        if not fc.get("id"):
            self.pending.setdefault(str(name), []).append(seq)
        arg = TRANSFER_TOOLS.get(str(name))
        if arg and isinstance(args, dict) and isinstance(args.get(arg), str):
            self.transfer_calls[seq] = args[arg]

    def response(self, author: str, fr: dict[str, Any], ts: Any, meta: dict, where: str) -> None:
        b = self.b
        name = fr.get("name")
        parent = b.call_seq(fr.get("id"))
        if parent is None:
            calls = self.pending.get(str(name)) or []
            parent = calls.pop(0) if calls else None
        if parent is None:
            b.warn(f"{where}.function_response: no function_call of {name!r} before it; kept unlinked",
                   field=f"{where}.function_response")
        result = fr.get("response")
        b.tool_result(author, result if not isinstance(result, dict) else json.dumps(result, ensure_ascii=False),
                      parent=parent, name=name, data={"result": result, "call_id": fr.get("id"), "adk": meta}, ts=ts)
        self.answered = parent

    def actions(self, i: int, author: str, actions: dict, options: dict, ts: Any, meta: dict, where: str) -> None:
        b = self.b
        for k in actions:
            if k not in ACTION_KEYS:
                b.check_keys({k: actions[k]}, (), f"{where}.actions")
        delta = actions.get("state_delta") or options.get("update_context")
        if delta:
            b.event("state_update", author, json.dumps(delta, ensure_ascii=False, sort_keys=True, default=str),
                    ts=ts, data={"state_delta": delta, "adk": meta})
        if actions.get("artifact_delta"):
            b.event("artifact", author, ", ".join(f"{k} (version {v})" for k, v in actions["artifact_delta"].items()),
                    ts=ts, data={"artifact_delta": actions["artifact_delta"], "adk": meta})
        target = actions.get("transfer_to_agent")
        if not target:
            # older logs: the transfer tool's response event, without actions: the call's argument
            e = self.evs[i]
            for raw in (e.get("content") or {}).get("parts") or [] if isinstance(e.get("content"), dict) else []:
                fr = snake(part_of(raw).get("function_response"))
                if fr and str(fr.get("name")) in TRANSFER_TOOLS:
                    resp = fr.get("response") if isinstance(fr.get("response"), dict) else {}
                    target = self.transfer_calls.get(self.answered) or resp.get("target_agent_name")
        if isinstance(target, str) and target.strip() == author:
            b.event("log", author, f"transfer to {author} (itself)", ts=ts, data={"adk": meta, "transfer_to_agent": author})
        elif isinstance(target, str) and target.strip():
            reason = actions.get("transfer_reason")
            text = f"transfer to {target.strip()}" + (f": {reason}" if isinstance(reason, str) and reason else "")
            b.handoff(author, target.strip(), text, ts=ts, data={"adk": meta, "transfer_reason": reason})
        if actions.get("escalate"):
            branch = self.evs[i].get("branch")
            parent = branch.split(".")[-2] if isinstance(branch, str) and "." in branch else None
            if parent:
                b.event("delegation", author, "escalate", recipients=[parent], ts=ts,
                        data={"escalate": True, "adk": meta})
            else:
                b.event("log", author, "escalate", ts=ts, data={"escalate": True, "adk": meta})
        if actions.get("requested_auth_configs"):
            b.event("log", author, "requested auth: " + ", ".join(map(str, actions["requested_auth_configs"])),
                    ts=ts, data={"requested_auth_configs": actions["requested_auth_configs"], "adk": meta})


def _iso(ts: float | None) -> str | None:
    from app.ingest.canonical import epoch_to_iso

    return epoch_to_iso(float(ts)) if ts is not None else None
