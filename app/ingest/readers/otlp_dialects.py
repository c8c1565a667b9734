"""The span attribute vocabularies the OTLP reader (app.ingest.readers.otlp) maps, one table row per key.

Each `Attr` row says which dialect writes the key, what part of the canonical record it feeds
(`role`), and how its value is decoded (`decode`). `app.ingest.readers.otlp` asks `role_text(attrs,
role)` for a role's value (rows in table order: the first key present wins) and `unmapped_text`
for every attribute that carries text but is in no row: those are reported as import warnings
(the value stays in ``data.attributes``, and the warning says so), never kept there silently.

Dialects:

* ``genai``: the OpenTelemetry GenAI semantic conventions (``gen_ai.*``);
* ``openinference``: Arize OpenInference (``input.value``, ``llm.input_messages.N.message.*``, ...);
* ``openllmetry``: Traceloop OpenLLMetry: flattened ``gen_ai.prompt.N.{role,content,tool_call_id,
  tool_calls.M.{id,name,arguments}}`` and ``gen_ai.completion.N.{role,content,refusal,finish_reason,
  tool_calls.M.*}``, ``llm.request.type`` (chat / completion) on LLM spans, and the
  ``traceloop.span.kind`` (workflow / task / agent / tool) spans with ``traceloop.entity.name``,
  ``traceloop.entity.input`` and ``traceloop.entity.output`` (JSON); of its CrewAI instrumentation's
  ``crewai.*`` attributes the task description (input) and the crew result (output) are mapped,
  the rest (agent goals and backstories, task and agent lists) is warned;
* ``adk``: Google ADK (tracer ``gcp.vertex.agent``): spans ``invocation``, ``agent_run [NAME]`` (newer
  releases: ``invoke_agent NAME`` with ``gen_ai.agent.name``), ``call_llm`` with
  ``gcp.vertex.agent.llm_request`` (JSON: model, config, contents[] of google.genai Content) and
  ``gcp.vertex.agent.llm_response`` (JSON LlmResponse: content.parts[] with text / function_call),
  ``execute_tool NAME`` with ``gcp.vertex.agent.tool_call_args`` and ``gcp.vertex.agent.tool_response``
  (a ``transfer_to_agent`` call naming ``agent_name`` is a hand-off), ``send_data`` with
  ``gcp.vertex.agent.data``, and ``gcp.vertex.agent.session_id`` (the run), ``invocation_id``,
  ``event_id``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from app.ingest.safety import safejson

#: roles: where a key's value goes
INPUT = "input"            # the span's input text (content of a delegation / log; data.input_messages of an LLM call)
OUTPUT = "output"          # the span's output text (content of the message it ends with)
TOOL_NAME = "tool_name"
TOOL_ARGS = "tool_args"    # a tool call's arguments (data.tool.arguments, the call's content)
TOOL_RESULT = "tool_result"  # a tool result (data.result, the result's content)
TOOL_DESCRIPTION = "tool_description"
TRANSFER_TARGET = "transfer_target"  # a hand-off's target agent
AGENT = "agent"            # the span's own agent (its lane)
AGENT_DESCRIPTION = "agent_description"
CONVERSATION = "conversation"  # the run the span belongs to
SYSTEM = "system"          # system instructions (the agent's private log)
OPERATION = "operation"    # invoke_agent | llm | tool (see OPERATIONS)
META = "meta"              # known, carries no message text: ids, names, enums, counts (kept in data.attributes)


@dataclass(frozen=True)
class Attr:
    dialect: str
    key: str          # exact key, or a glob (``*`` spans dots) for flattened lists
    role: str
    decode: str = "text"  # text | json | messages | flat:<prefix> | adk_request | adk_response | adk_contents | entity
    note: str = ""


ATTRS: tuple[Attr, ...] = (
    # ---- operation and lane
    Attr("genai", "gen_ai.operation.name", OPERATION),
    Attr("openinference", "openinference.span.kind", OPERATION),
    Attr("openllmetry", "traceloop.span.kind", OPERATION),
    Attr("openllmetry", "llm.request.type", OPERATION),
    Attr("genai", "gen_ai.agent.name", AGENT),
    Attr("openinference", "agent.name", AGENT),
    Attr("genai", "gen_ai.agent.id", AGENT),
    Attr("genai", "gen_ai.agent.description", AGENT_DESCRIPTION),
    Attr("genai", "gen_ai.system_instructions", SYSTEM, "messages",
         "the agent's instructions: its private log (once per agent and text)"),
    Attr("genai", "gen_ai.conversation.id", CONVERSATION),
    Attr("openinference", "session.id", CONVERSATION),
    Attr("adk", "gcp.vertex.agent.session_id", CONVERSATION),
    # ---- inputs
    Attr("genai", "gen_ai.input.messages", INPUT, "messages"),
    Attr("openinference", "input.value", INPUT, "messages"),
    Attr("openinference", "llm.input_messages.*", INPUT, "flat:llm.input_messages"),
    Attr("openllmetry", "gen_ai.prompt.*", INPUT, "flat:gen_ai.prompt",
         "gen_ai.prompt.N.role / content / tool_call_id / tool_calls.M.{id,name,arguments}"),
    Attr("adk", "gcp.vertex.agent.llm_request", INPUT, "adk_request",
         "JSON {model, config, contents[]}: the history sent to the model; the last contents[] turn is the input"),
    Attr("adk", "gcp.vertex.agent.data", INPUT, "adk_contents", "JSON list of Content sent to a live agent"),
    Attr("openllmetry", "traceloop.entity.input", INPUT, "entity"),
    Attr("openllmetry", "crewai.task.description", INPUT, "text", "OpenLLMetry's CrewAI task spans"),
    # ---- outputs
    Attr("genai", "gen_ai.output.messages", OUTPUT, "messages"),
    Attr("openinference", "output.value", OUTPUT, "messages"),
    Attr("openinference", "llm.output_messages.*", OUTPUT, "flat:llm.output_messages"),
    Attr("openllmetry", "gen_ai.completion.*", OUTPUT, "flat:gen_ai.completion",
         "gen_ai.completion.N.role / content / refusal / finish_reason / tool_calls.M.{id,name,arguments}"),
    Attr("adk", "gcp.vertex.agent.llm_response", OUTPUT, "adk_response",
         "JSON LlmResponse: content.parts[] text (thought parts included) and function_call"),
    Attr("openllmetry", "traceloop.entity.output", OUTPUT, "entity"),
    Attr("openllmetry", "crewai.crew.result", OUTPUT, "text", "OpenLLMetry's CrewAI crew span"),
    # ---- tools
    Attr("genai", "gen_ai.tool.name", TOOL_NAME),
    Attr("openinference", "tool.name", TOOL_NAME),
    Attr("genai", "gen_ai.tool.description", TOOL_DESCRIPTION),
    Attr("openinference", "tool.description", TOOL_DESCRIPTION),
    Attr("genai", "gen_ai.tool.call.arguments", TOOL_ARGS, "json"),
    Attr("openinference", "tool.parameters", TOOL_ARGS, "json"),
    Attr("adk", "gcp.vertex.agent.tool_call_args", TOOL_ARGS, "json"),
    Attr("genai", "gen_ai.tool.call.result", TOOL_RESULT, "json"),
    Attr("adk", "gcp.vertex.agent.tool_response", TOOL_RESULT, "json", "JSON; {'result': null} means no result"),
    Attr("genai", "gen_ai.transfer.target.name", TRANSFER_TARGET),
    Attr("genai", "gen_ai.transfer.target.id", TRANSFER_TARGET),
    # ---- known, no message text
    *(Attr("genai", k, META) for k in (
        "gen_ai.system", "gen_ai.provider.name", "gen_ai.request.*", "gen_ai.response.*", "gen_ai.usage.*",
        "gen_ai.tool.call.id", "gen_ai.tool.type", "gen_ai.caller.*", "gen_ai.transfer.*",
        "gen_ai.tool.definitions", "gen_ai.output.type", "gen_ai.data_source.id", "gen_ai.token.type",
        "server.*", "client.*", "error.type", "peer.service", "a2a.*")),
    *(Attr("openinference", k, META) for k in (
        "llm.model_name", "llm.provider", "llm.system", "llm.token_count.*", "llm.invocation_parameters",
        "llm.tools.*", "tool_call.id", "tool.id", "input.mime_type", "output.mime_type", "graph.node.*",
        "user.id", "metadata", "tag.tags")),
    *(Attr("openllmetry", k, META) for k in (
        "traceloop.entity.name", "traceloop.entity.path", "traceloop.entity.version", "traceloop.workflow.name",
        "traceloop.association.properties.*", "traceloop.correlation.id", "traceloop.prompt.*",
        "llm.usage.*", "llm.is_streaming", "llm.user", "llm.headers", "llm.request.functions.*",
        "llm.response.*", "llm.frequency_penalty", "llm.presence_penalty", "llm.top_k", "llm.chat.stop_sequences",
        "gen_ai.openai.*")),
    *(Attr("adk", k, META) for k in (
        "gcp.vertex.agent.invocation_id", "gcp.vertex.agent.event_id")),
)

#: the values of the OPERATION keys that name an operation, and the agent names span names carry
OPERATIONS: dict[tuple[str, str], str] = {
    ("traceloop.span.kind", "agent"): "invoke_agent",
    ("traceloop.span.kind", "tool"): "tool",
    ("llm.request.type", "chat"): "llm",
    ("llm.request.type", "completion"): "llm",
}
#: span names that say the operation (ADK's, OpenLLMetry's provider spans)
SPAN_NAME_OPERATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^agent_run \[.+\]$"), "invoke_agent"),   # adk
    (re.compile(r"^call_llm$"), "llm"),                     # adk
    (re.compile(r"^send_data$"), "llm"),                    # adk (live agents)
)
#: span names that carry the span's agent: ``agent_run [NAME]`` (ADK), ``invoke_agent NAME`` (GenAI)
AGENT_SPAN_NAMES: tuple[re.Pattern[str], ...] = (re.compile(r"^agent_run \[(.+)\]$"),
                                                 re.compile(r"^invoke_agent (.+)$"))
#: tools that hand off, and the argument naming the target (ADK's transfer_to_agent)
TRANSFER_TOOLS: dict[str, str] = {"transfer_to_agent": "agent_name"}
#: span events whose text is mapped (older GenAI conventions)
MAPPED_EVENTS = frozenset({"gen_ai.user.message", "gen_ai.system.message", "gen_ai.content.prompt", "gen_ai.choice",
                           "gen_ai.assistant.message", "gen_ai.content.completion", "gen_ai.tool.message"})


def _matches(row: Attr, key: str) -> bool:
    return row.key == key or ("*" in row.key and fnmatchcase(key, row.key))


def row_of(key: str) -> Attr | None:
    """The table row that maps `key`, if any."""
    for row in ATTRS:
        if _matches(row, key):
            return row
    return None


def dialects_of(attrs: dict[str, Any]) -> list[str]:
    """The dialects whose keys a span's attributes use (table order)."""
    out: list[str] = []
    for key in attrs:
        row = row_of(key)
        if row is not None and row.dialect not in out:
            out.append(row.dialect)
    return out


def carries_text(value: Any, depth: int = 0) -> bool:
    """Whether a value holds prose: a string with a letter and a blank (ids, enums, model names have
    none), or a list / JSON document holding one."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "[") and depth < 3:
            try:
                return carries_text(safejson.loads(s), depth + 1)
            except ValueError:
                pass
        return bool(re.search(r"\s", s)) and bool(re.search(r"[^\W\d_]", s))
    if isinstance(value, list) and depth < 6:
        return any(carries_text(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 6:
        return any(carries_text(v, depth + 1) for v in value.values())
    return False


def unmapped_text(attrs: dict[str, Any]) -> list[str]:
    """The keys of `attrs` that carry text and that no table row maps."""
    return [k for k, v in attrs.items() if row_of(k) is None and carries_text(v)]


def _json(v: Any) -> Any:
    if isinstance(v, str) and v.strip()[:1] in ("{", "["):
        try:
            return safejson.loads(v)
        except ValueError:
            return v
    return v


# ---------------------------------------------------------------- google.genai Content (ADK)

def part_of(part: Any) -> dict[str, Any]:
    """A google.genai Part in either spelling (``function_call`` / ``functionCall``) as snake_case keys."""
    if not isinstance(part, dict):
        return {}
    out = {}
    for k, v in part.items():
        out[re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower()] = v
    return out


def content_text(content: Any, thoughts: bool = True) -> str | None:
    """The text parts of a google.genai Content (``{role, parts: [{text}, ...]}``), joined by newlines."""
    if not isinstance(content, dict):
        return None
    texts = []
    for raw in content.get("parts") or []:
        p = part_of(raw)
        if isinstance(p.get("text"), str) and p["text"] and (thoughts or not p.get("thought")):
            texts.append(p["text"])
    return "\n".join(texts) if texts else None


def content_calls(content: Any) -> list[dict[str, Any]]:
    """The function_call parts of a Content: ``[{id, name, args}]``."""
    if not isinstance(content, dict):
        return []
    out = []
    for raw in content.get("parts") or []:
        fc = part_of(raw).get("function_call")
        if isinstance(fc, dict):
            out.append(fc)
    return out


def calls_text(calls: list[dict[str, Any]]) -> str | None:
    if not calls:
        return None
    return "\n".join(f"{c.get('name')}({json.dumps(c.get('args', c.get('arguments')), ensure_ascii=False)})"
                     for c in calls)


def adk_response_text(value: Any) -> str | None:
    """An ADK llm_response: its text parts, else its function calls as ``name(args)``, else its error."""
    doc = _json(value)
    if not isinstance(doc, dict):
        return None
    content = doc.get("content")
    if content is None and isinstance(doc.get("candidates"), list) and doc["candidates"]:
        content = (doc["candidates"][0] or {}).get("content")  # a raw Gemini GenerateContentResponse
    text = content_text(content) or calls_text(content_calls(content))
    if text:
        return text
    err = doc.get("error_message") or doc.get("errorMessage")
    return err if isinstance(err, str) and err else None


def adk_response_calls(value: Any) -> list[dict[str, Any]]:
    doc = _json(value)
    if not isinstance(doc, dict):
        return []
    content = doc.get("content")
    if content is None and isinstance(doc.get("candidates"), list) and doc["candidates"]:
        content = (doc["candidates"][0] or {}).get("content")
    return content_calls(content)


#: span names of runners that invoke agents without being one (ADK's ``Runner``)
RUNNER_SPAN_NAMES = frozenset({"invocation"})


def runner_agent_span(name: str, attrs: dict[str, Any], parent_name: str | None = None) -> bool:
    """An agent span of a dialect whose runner / workflow span above it is no agent (ADK's
    ``agent_run [NAME]`` or ``invoke_agent NAME`` under ``invocation``, OpenLLMetry's agent under
    its workflow)."""
    return (bool(AGENT_SPAN_NAMES[0].match(name or "")) or parent_name in RUNNER_SPAN_NAMES
            or str(attrs.get("traceloop.span.kind", "")).lower() == "agent")


def adk_request_contents(value: Any) -> list[dict[str, Any]] | None:
    doc = _json(value)
    if isinstance(doc, dict) and isinstance(doc.get("contents"), list):
        return [c for c in doc["contents"] if isinstance(c, dict)]
    return None


def adk_request_text(value: Any) -> str | None:
    """An ADK llm_request: the text of its last turn (the history before it is in data.input_messages)."""
    contents = adk_request_contents(value)
    for c in reversed(contents or []):
        t = content_text(c)
        if t:
            return t
    return None


def adk_contents_text(value: Any) -> str | None:
    doc = _json(value)
    if not isinstance(doc, list):
        return None
    texts = [t for t in (content_text(c) for c in doc) if t]
    return "\n".join(texts) if texts else None


def entity_text(value: Any) -> str | None:
    """OpenLLMetry ``traceloop.entity.input`` / ``.output``: JSON ``{"inputs": ...}``, ``{"args": [...],
    "kwargs": {...}}`` or ``{"outputs": ...}``; a plain string stays as it is."""
    doc = _json(value)
    if isinstance(doc, str):
        return doc or None
    if isinstance(doc, dict):
        for key in ("outputs", "inputs", "output", "input"):
            if key in doc and len(doc) == 1:
                inner = doc[key]
                return inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)
    return json.dumps(doc, ensure_ascii=False) if doc is not None else None
