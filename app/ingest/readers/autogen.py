"""AutoGen AgentChat task results and message streams (microsoft/autogen, ``autogen_agentchat``),
and AG2 group chats (ag2ai/ag2, ``GroupChat.messages`` / ``ChatResult.chat_history``).

**AutoGen AgentChat** (`--format autogen`): a ``TaskResult`` dumped with pydantic, ``{"messages":
[...], "stop_reason"}`` (one file, a JSON array of them, or JSON Lines of them), or a message
stream (what ``run_stream`` yields, each message's ``model_dump()``: a JSON array or JSON Lines,
optionally ending with the TaskResult). One run per TaskResult (a stream: one per file). Every
message has a ``type`` and a ``source`` (the agent's name; ``user`` is the task's author, the
principal, for whom the agents act):

* chat messages (``TextMessage``, ``MultiModalMessage``, ``StopMessage``,
  ``ToolCallSummaryMessage``, ``StructuredMessage``): a team publishes each one to every
  participant, so it is a shared ``message`` whose recipients are all the other members (the
  sources seen in the run, the user included); list content (text and images) is joined as text;
* ``HandoffMessage``: a shared ``delegation`` from the source to ``target`` (the hand-off
  ``context`` kept in ``data``);
* ``ToolCallRequestEvent`` (``content``: FunctionCall ``{id, name, arguments}``): one private
  ``tool_call`` per call; ``ToolCallExecutionEvent`` (``content``: FunctionExecutionResult
  ``{call_id, name, content, is_error}``): one private ``tool_result`` per result, linked to its
  call;
* ``ThoughtEvent``, ``MemoryQueryEvent``, ``CodeGenerationEvent``, ``CodeExecutionEvent``,
  ``SelectSpeakerEvent``, ``SelectorEvent``, ``UserInputRequestedEvent`` and streaming chunks:
  private ``log`` events of the source (a streaming chunk whose ``full_message_id`` names a
  message of the stream is not stored again: the whole message is).

``models_usage`` and ``metadata`` go to ``data``; ``stop_reason`` (said by the team's termination
condition) is the run's last event, a log of ``system``, and is kept in the run's metadata.

**AG2** (`--format ag2`): a group chat's message list, ``[{"content", "role", "name"}, ...]``
(``GroupChat.messages``), or a ``ChatResult``, ``{"chat_id", "chat_history", "summary", "cost",
"human_input"}``, one file each (or a JSON array / JSON Lines of ChatResults). The speaker is
``name`` (else ``role``); every turn with text is posted to the group chat, so it is shared with all
members; an assistant turn's ``tool_calls`` are private tool calls, a ``tool`` turn's
``tool_responses`` private results linked by ``tool_call_id``. The first speaker whose name says
``user``, ``human``, ``admin`` or ``proxy`` (a UserProxyAgent) is the principal, for whom the others
act (else a principal ``user``). The summary is the run's last event, a log of the principal (the
chat's initiator receives it).
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
CHAT_TYPES = {"TextMessage", "MultiModalMessage", "StopMessage", "ToolCallSummaryMessage", "StructuredMessage"}
LOG_TYPES = {"ThoughtEvent", "MemoryQueryEvent", "CodeGenerationEvent", "CodeExecutionEvent", "SelectSpeakerEvent",
             "SelectorEvent", "UserInputRequestedEvent", "ModelClientStreamingChunkEvent"}
_MSG_KEYS = {"id", "source", "models_usage", "metadata", "created_at", "content", "type", "target", "context",
             "tool_calls", "results", "format_string", "retry_attempt", "code_blocks", "result", "request_id",
             "full_message_id"}


def _content_text(value: Any) -> str | None:
    """AutoGen content: a string, a list of strings and images (an image dumps as a dict with
    ``data``: keep a placeholder, not the base64), or a structured object."""
    if isinstance(value, list):
        parts = []
        for p in value:
            if isinstance(p, dict) and "data" in p and len(p) <= 2:
                parts.append("[image]")
            else:
                parts.append(as_text(p) or "")
        return "\n".join(p for p in parts if p) or None
    return as_text(value)


def _ag_item(messages: list, stop_reason: Any, stem: str, loc: Location, result: dict | None = None) -> ImportItem:
    b = RunBuilder(f"autogen/{stem}", scenario=f"autogen/{stem}", family="autogen", default_principal=USER,
                   source_format="autogen")
    first_task = next((m for m in messages if isinstance(m, dict) and m.get("source") == USER), None)
    b.principal(USER, name="user", objective=_content_text(first_task.get("content")) if first_task else None)
    members = list(dict.fromkeys(m.get("source") for m in messages if isinstance(m, dict)
                                 and isinstance(m.get("source"), str) and m.get("type") in CHAT_TYPES | {"HandoffMessage"}))
    for name in members:
        if name != USER:
            b.agent(name, principal=USER, role="agent")
    full_ids = {m.get("id") for m in messages if isinstance(m, dict) and m.get("type") in CHAT_TYPES}
    folded = 0
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            b.warn(f"{at}: not an object; kept as a log event")
            b.event("log", "system", json.dumps(m, ensure_ascii=False, default=str))
            continue
        mtype, src = m.get("type"), m.get("source")
        if mtype == "ModelClientStreamingChunkEvent" and m.get("full_message_id") in full_ids:
            folded += 1  # a streamed piece of a message the stream also holds whole
            continue
        if not isinstance(src, str) or not src:
            b.warn(f"{at}.source: missing; the message is attributed to 'system'")
            src = "system"
        ex = b.check_keys(m, _MSG_KEYS, at)
        if isinstance(m.get("metadata"), dict):
            b.check_keys(m["metadata"], (), f"{at}.metadata", kept="data.metadata")
        data = {k: m[k] for k in ("id", "type", "models_usage", "metadata") if m.get(k) not in (None, {}, [])}
        if ex:
            data["extra"] = ex
        ts = m.get("created_at")
        if mtype in CHAT_TYPES:
            if isinstance(m.get("content"), list):  # images: a placeholder in the text, the image in data
                images = [p for p in m["content"] if isinstance(p, dict) and "data" in p and len(p) <= 2]
                if images:
                    data["images"] = images
            if mtype == "ToolCallSummaryMessage":
                data.update({k: m.get(k) for k in ("tool_calls", "results") if m.get(k) is not None})
            b.broadcast(src, _content_text(m.get("content")), [x for x in members if x != src], ts=ts, data=data)
        elif mtype == "HandoffMessage":
            target = m.get("target")
            if not isinstance(target, str) or not target:
                b.warn(f"{at}.target: a HandoffMessage without a target; kept as a shared message")
                b.broadcast(src, _content_text(m.get("content")), [x for x in members if x != src], ts=ts, data=data)
                continue
            if m.get("context"):
                data["context"] = m["context"]
            b.handoff(src, target, _content_text(m.get("content")), ts=ts, data=data)
        elif mtype == "ToolCallRequestEvent":
            for j, c in enumerate(m.get("content") or []):
                if not isinstance(c, dict):
                    b.warn(f"{at}.content[{j}]: not a FunctionCall object; kept as a log event")
                    b.thought(src, as_text(c), ts=ts, data=data)
                    continue
                b.check_keys(c, {"id", "name", "arguments"}, f"{at}.content[{j}]")
                args = c.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        pass
                b.tool_call(src, c.get("name"), args, call_id=c.get("id"), ts=ts, data=data)
        elif mtype == "ToolCallExecutionEvent":
            for j, r in enumerate(m.get("content") or []):
                if not isinstance(r, dict):
                    b.warn(f"{at}.content[{j}]: not a FunctionExecutionResult object; kept as a log event")
                    b.thought(src, as_text(r), ts=ts, data=data)
                    continue
                b.check_keys(r, {"call_id", "name", "content", "is_error"}, f"{at}.content[{j}]")
                b.tool_result(src, r.get("content"), call_id=r.get("call_id"), name=r.get("name"),
                              is_error=r.get("is_error"), ts=ts, data=data)
        elif mtype in LOG_TYPES:
            text = _content_text(m.get("content"))
            if mtype == "CodeExecutionEvent" and isinstance(m.get("result"), dict):
                text = as_text(m["result"].get("output")) or text
                data["result"] = m["result"]
            if mtype == "CodeGenerationEvent" and m.get("code_blocks"):
                data["code_blocks"] = m["code_blocks"]
            b.thought(src, text or mtype, ts=ts, data=data)
        else:
            b.warn(f"{at}.type: unknown message type {mtype!r}; kept as a log event of {src!r}")
            b.thought(src, _content_text(m.get("content")), ts=ts, data=data)
    if folded:
        b.note(f"{folded} streaming chunk(s) of messages also present whole were not stored twice")
    if stop_reason is not None:
        # said by the team's termination condition, not by an agent
        b.metadata["stop_reason"] = stop_reason
        b.event("log", "system", f"stop: {as_text(stop_reason)}", data={"stop_reason": stop_reason})
    if result is not None:
        extra = b.check_keys(result, {"messages", "stop_reason"}, "task_result", kept="metadata.autogen_extra")
        if extra:
            b.metadata["autogen_extra"] = extra
    return b.item(loc)


def _is_message(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("type"), str) and "source" in obj


def iter_autogen(path: Path, shown: str) -> Iterator[ImportItem]:
    stem = Path(shown).stem
    results: list[tuple[Any, Location]] = []
    stream: list[Any] = []
    stream_loc: Location | None = None
    for rec in load_json_or_lines(path, shown):
        if isinstance(rec, ImportItem):
            yield rec
            continue
        doc, loc = rec
        docs = doc if isinstance(doc, list) else [doc]
        for d in docs:
            if isinstance(d, dict) and isinstance(d.get("messages"), list):
                results.append((d, loc))
            elif _is_message(d):
                stream.append(d)
                stream_loc = stream_loc or Location(shown)
            else:
                yield error_item(loc, "neither an AutoGen TaskResult ({messages, stop_reason}) nor a message "
                                      "(an object with type and source)")
    if stream:
        stop = results[-1][0].get("stop_reason") if results and not results[-1][0]["messages"] else None
        # a run_stream dump ends with the TaskResult, which repeats the messages: read it once
        if results and len(results) == 1 and len(results[0][0]["messages"]) >= len(stream):
            stream = []
        else:
            yield _ag_item(stream, stop, stem, stream_loc or Location(shown))
    for n, (res, loc) in enumerate(results):
        rid = stem if len(results) == 1 else f"{stem}/{n}"
        yield _ag_item(res["messages"], res.get("stop_reason"), rid, loc, res)


class AutoGenReader(Reader):
    name = "autogen"
    description = "AutoGen AgentChat TaskResult dumps and message streams (type/source messages)"

    def sniff(self, path: Path) -> Sniff:
        if not path.is_file():
            return NO
        head = peek_text(path)
        if '"source"' in head and any(f'"{t}"' in head for t in ("TextMessage", "ToolCallRequestEvent",
                                                                   "HandoffMessage", "ToolCallExecutionEvent")):
            return Sniff(0.9, "messages with source and an AgentChat message type")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        yield from iter_autogen(path, shown)


# ---------------------------------------------------------------------- AG2

_AG2_MSG = {"content", "role", "name", "tool_calls", "tool_responses", "tool_call_id", "function_call"}


def _is_principal(name: str) -> bool:
    low = name.lower()
    return low in ("user", "human", "admin") or "proxy" in low or "user" in low or "human" in low


def _ag2_item(history: list, stem: str, loc: Location, result: dict | None = None) -> ImportItem:
    b = RunBuilder(f"ag2/{stem}", scenario=f"ag2/{stem}", family="ag2", source_format="ag2")
    speakers = []
    for m in history:
        if isinstance(m, dict):
            who = m.get("name") if isinstance(m.get("name"), str) and m.get("name") else m.get("role")
            if isinstance(who, str) and who and m.get("role") != "tool":
                speakers.append(who)
    speakers = list(dict.fromkeys(speakers))
    principal = next((s for s in speakers if _is_principal(s)), None) or USER
    b.principal(principal, name=principal)
    b.default_principal = principal
    first = next((m for m in history if isinstance(m, dict)), None)
    if first is not None and b.principals[principal].get("objective") is None:
        b.principals[principal]["objective"] = as_text(first.get("content"))
    for s in speakers:
        b.agent(s, principal=principal, role="agent")
    last_caller: str | None = None
    for i, m in enumerate(history):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            b.warn(f"{at}: not an object; kept as a log event")
            b.event("log", "system", json.dumps(m, ensure_ascii=False, default=str))
            continue
        ex = b.check_keys(m, _AG2_MSG, at)
        data: dict[str, Any] = {"role": m.get("role")}
        if ex:
            data["extra"] = ex
        who = m.get("name") if isinstance(m.get("name"), str) and m.get("name") else m.get("role")
        who = who if isinstance(who, str) and who else "system"
        if m.get("role") == "tool" or m.get("tool_responses"):
            caller = last_caller or who
            responses = m.get("tool_responses") if isinstance(m.get("tool_responses"), list) else [m]
            for r in responses:
                if isinstance(r, dict):
                    b.tool_result(caller, r.get("content"), call_id=r.get("tool_call_id"), data=data)
            continue
        text = as_text(m.get("content"))
        if text:
            b.broadcast(who, m.get("content"), speakers, data=data)
        calls = list(m.get("tool_calls") or [])
        if isinstance(m.get("function_call"), dict):
            calls.append({"function": m["function_call"]})
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) and isinstance(c.get("function"), dict) else {}
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            b.tool_call(who, fn.get("name"), args, call_id=c.get("id") if isinstance(c, dict) else None,
                        data={**data, "type": c.get("type")} if isinstance(c, dict) and c.get("type") else data)
            last_caller = who
        if not text and not calls:
            b.thought(who, None, data=data)
    if result:
        ex = b.check_keys(result, {"chat_id", "chat_history", "summary", "cost", "human_input"}, "chat_result",
                          kept="metadata.ag2")
        b.metadata["ag2"] = {k: v for k, v in result.items() if k != "chat_history"}
        if ex:
            b.metadata["ag2"]["extra"] = ex
        said = {as_text(m.get("content")) for m in history if isinstance(m, dict)}
        for j, h in enumerate(result.get("human_input") or []):
            if isinstance(h, str) and h.strip() and h not in said:
                b.warn(f"chat_result.human_input[{j}]: human input ({h[:40]!r}) that no chat turn holds; "
                       "kept in metadata.ag2")
        if as_text(result.get("summary")):
            # the chat's summary goes to its initiator (the principal's side)
            b.event("log", principal, f"summary: {as_text(result['summary'])}", data={"summary": True})
    return b.item(loc)


def iter_ag2(path: Path, shown: str) -> Iterator[ImportItem]:
    stem = Path(shown).stem
    recs = list(load_json_or_lines(path, shown))
    docs = [r for r in recs if not isinstance(r, ImportItem)]
    yield from (r for r in recs if isinstance(r, ImportItem))
    flat = [(d, loc) for doc, loc in docs for d in (doc if isinstance(doc, list) else [doc])]
    if flat and all(isinstance(d, dict) and "chat_history" not in d and "messages" not in d for d, _ in flat):
        # one group chat: its message list (a JSON array, or JSON Lines of turns)
        yield _ag2_item([d for d, _ in flat], stem, Location(shown))
        return
    for n, (d, loc) in enumerate(flat):
        if isinstance(d, dict) and isinstance(d.get("chat_history"), list):
            rid = str(d.get("chat_id")) if d.get("chat_id") not in (None, "") else (stem if len(flat) == 1 else f"{stem}/{n}")
            yield _ag2_item(d["chat_history"], rid, loc, d)
        elif isinstance(d, dict) and isinstance(d.get("messages"), list):
            yield _ag2_item(d["messages"], stem if len(flat) == 1 else f"{stem}/{n}", loc)
        else:
            yield error_item(loc, "neither an AG2 ChatResult ({chat_history, summary}) nor a group chat message list")


class AG2Reader(Reader):
    name = "ag2"
    description = "AG2 group chats: GroupChat.messages ([{content, role, name}]) or ChatResult (chat_history, summary)"

    def sniff(self, path: Path) -> Sniff:
        if not path.is_file():
            return NO
        head = peek_text(path)
        if '"chat_history"' in head and ('"summary"' in head or '"chat_id"' in head):
            return Sniff(0.9, "a ChatResult (chat_history, summary / chat_id)")
        stripped = head.lstrip()
        if stripped.startswith("[") and '"name"' in head and '"role"' in head and '"content"' in head \
                and '"source"' not in head and '"run_id"' not in head:
            return Sniff(0.5, "a list of {content, role, name} turns (AG2 group chat messages)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        yield from iter_ag2(path, shown)
