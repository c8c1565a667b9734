"""A2A protocol objects (JSON-RPC binding), protocol 1.0 and 0.3: reading and building.

Field names follow the A2A specification (a2aproject/A2A `specification/a2a.proto`, JSON names
in camelCase):

* 1.0: methods ``SendMessage``, ``SendStreamingMessage``, ``GetTask``; roles ``ROLE_USER`` /
  ``ROLE_AGENT``; states ``TASK_STATE_*``; a Part is told apart by its key (``text``, ``data``,
  ``raw``, ``url``); results are wrapped: ``{"message"}``, ``{"task"}``, ``{"statusUpdate"}``,
  ``{"artifactUpdate"}``.
* 0.3: methods ``message/send``, ``message/stream``, ``tasks/get``; objects carry ``kind``
  (``message``, ``task``, ``status-update``, ``artifact-update``); roles ``user`` / ``agent``;
  parts ``{"kind": "text"|"data"|"file", ...}``; states such as ``input-required``.

Everything here is pure dict manipulation; `app.ingest.readers.wire` turns these objects into events.
"""
from __future__ import annotations

from typing import Any

SEND_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
TASK_METHODS = frozenset({"GetTask", "CancelTask", "SubscribeToTask", "tasks/get", "tasks/cancel",
                          "tasks/resubscribe"})
WRAPPED_KEY = "a2annotate.wrapped"  # part metadata flag: 0.3 DataPart holding a non-object value

_WRAPPERS = (("message", "message"), ("task", "task"), ("statusUpdate", "status"),
             ("artifactUpdate", "artifact"))
_KINDS_03 = {"message": "message", "task": "task", "status-update": "status",
             "artifact-update": "artifact"}


LIST_METHODS = frozenset({"ListTasks", "tasks/list"})
CARD_METHODS = frozenset({"GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard", "GetAuthenticatedExtendedCard"})


def rest_method(http_method: str, path: str) -> tuple[str | None, dict]:
    """The JSON-RPC method (1.0 names) an HTTP+JSON (REST) binding call stands for, and the params
    found in its path: ``POST /message:send`` -> SendMessage, ``POST /message:stream`` ->
    SendStreamingMessage, ``GET /tasks/{id}`` -> GetTask, ``POST /tasks/{id}:cancel`` -> CancelTask,
    ``GET|POST /tasks/{id}:subscribe`` -> SubscribeToTask, ``GET /tasks`` -> ListTasks,
    ``GET /extendedAgentCard`` (0.3: ``/v1/card``) -> GetExtendedAgentCard. A leading ``/v1`` (0.3)
    and a tenant prefix (``/{tenant}/message:send``) are allowed; the tenant is returned in params."""
    parts = [p for p in (path or "").split("?")[0].split("/") if p]
    m = (http_method or "").upper()
    if parts and parts[0] == "v1":
        parts = parts[1:]
    params: dict = {}
    for i, head in enumerate(parts):
        rest = parts[i:]
        if head in ("message:send", "message:stream") and m == "POST" and len(rest) == 1:
            method = "SendMessage" if head == "message:send" else "SendStreamingMessage"
        elif head == "tasks" and len(rest) == 1 and m == "GET":
            method = "ListTasks"
        elif head == "tasks" and len(rest) == 2:
            tid, _, action = rest[1].partition(":")
            params["id"] = tid
            method = {"": "GetTask" if m == "GET" else None, "cancel": "CancelTask",
                      "subscribe": "SubscribeToTask"}.get(action)
            if method is None:
                return None, {}
        elif head in ("extendedAgentCard", "card") and len(rest) == 1 and m == "GET":
            method = "GetExtendedAgentCard"
        else:
            continue
        if i:
            params["tenant"] = "/".join(parts[:i])
        return method, params
    return None, {}


_PROTO_NAMES = {"message_id": "messageId", "context_id": "contextId", "task_id": "taskId",
                "artifact_id": "artifactId", "last_chunk": "lastChunk", "reference_task_ids": "referenceTaskIds",
                "mime_type": "mimeType", "file_with_uri": "fileWithUri", "file_with_bytes": "fileWithBytes",
                "accepted_output_modes": "acceptedOutputModes", "history_length": "historyLength",
                "push_notification": "pushNotification", "status_update": "statusUpdate",
                "artifact_update": "artifactUpdate", "next_page_token": "nextPageToken"}


def from_proto_json(obj: Any, _depth: int = 0) -> Any:
    """0.3 HTTP+JSON bodies as gRPC transcoding writes them -> the JSON-RPC object shapes.

    The 0.3 REST binding serialises the protobuf messages: snake_case field names when the proto
    names are kept (``message_id``), a Message's parts under ``content``, a TaskStatus's message
    under ``update``, a SendMessageRequest's message under ``request``. Only these known names
    are renamed; ``metadata`` and data values are left exactly as they are."""
    if _depth > 64:
        return obj
    if isinstance(obj, list):
        return [from_proto_json(v, _depth + 1) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = _PROTO_NAMES.get(k, k)
        out[key] = v if key in ("metadata", "data") else from_proto_json(v, _depth + 1)
    if "role" in out and "parts" not in out and isinstance(out.get("content"), list):
        out["parts"] = out.pop("content")
    if "state" in out and "message" not in out and isinstance(out.get("update"), dict):
        out["message"] = out.pop("update")
    if "request" in out and "message" not in out and isinstance(out.get("request"), dict):
        out["message"] = out.pop("request")
    return out


def protocol_of_method(method: str) -> str:
    """Return "0.3" for slash-style method names (``message/send``), else "1.0"."""
    return "0.3" if "/" in method else "1.0"


def role_name(role: Any) -> str | None:
    """Map ``ROLE_USER``/``user`` to "user" and ``ROLE_AGENT``/``agent`` to "agent"."""
    if not isinstance(role, str):
        return None
    r = role.lower()
    r = r.removeprefix("role_")
    return r or None


def state_name(state: Any) -> str | None:
    """Map ``TASK_STATE_INPUT_REQUIRED`` and ``input-required`` alike to "input-required"."""
    if not isinstance(state, str) or not state:
        return None
    s = state
    if s.upper().startswith("TASK_STATE_"):
        s = s[len("TASK_STATE_"):]
    s = s.lower().replace("_", "-")
    return "unknown" if s == "unspecified" else s


def part_kind(part: Any) -> str:
    """Return "text", "data", "file" or "other" for one Part of either protocol version."""
    if not isinstance(part, dict):
        return "other"
    kind = part.get("kind", part.get("type"))  # "type": protocol 0.2 and earlier
    if kind in ("text", "data", "file"):
        return kind
    if "text" in part:
        return "text"
    if "data" in part:
        return "data"
    if "raw" in part or "url" in part or "file" in part:
        return "file"
    return "other"


def _data_value(part: dict) -> Any:
    meta = part.get("metadata")
    if isinstance(meta, dict) and meta.get(WRAPPED_KEY) and isinstance(part.get("data"), dict):
        return part["data"].get("value")
    return part.get("data")


def parts_to_content(parts: Any) -> tuple[str | None, Any]:
    """Turn Parts into an event's (content, data).

    content: the text parts joined with newlines (None when there is none). data: ``{}`` when
    there is no other part, the value of the single data part when that is the only other part,
    else ``{"parts": [every non-text part as written]}``.
    """
    if not isinstance(parts, list):
        return None, {}
    texts: list[str] = []
    datas: list[Any] = []
    others: list[Any] = []
    for p in parts:
        k = part_kind(p)
        if k == "text" and isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif k == "data":
            datas.append(_data_value(p))
            others.append(p)
        else:
            others.append(p)
    content = "\n".join(texts) if texts else None
    if not others:
        return content, {}
    if len(others) == 1 and datas:
        return content, datas[0]
    return content, {"parts": others}


def join_artifact_parts(old: list, new: list) -> list:
    """Append streamed artifact parts; a text chunk continues a preceding text part."""
    out = list(old)
    for p in new:
        if (out and part_kind(p) == "text" and part_kind(out[-1]) == "text"
                and isinstance(out[-1].get("text"), str) and isinstance(p.get("text"), str)):
            merged = dict(out[-1])
            merged["text"] = out[-1]["text"] + p["text"]
            out[-1] = merged
        else:
            out.append(p)
    return out


def classify_result(result: Any) -> tuple[str, Any]:
    """Return (kind, object) for a JSON-RPC result: kind is message|task|status|artifact|other."""
    if not isinstance(result, dict):
        return "other", result
    kind = result.get("kind")
    if isinstance(kind, str) and kind in _KINDS_03:
        return _KINDS_03[kind], result
    for key, k in _WRAPPERS:
        if isinstance(result.get(key), dict):
            return k, result[key]
    if isinstance(result.get("artifact"), dict):
        return "artifact", result
    if "messageId" in result and "parts" in result:
        return "message", result
    if "status" in result and "taskId" in result:
        return "status", result
    if "status" in result and "id" in result:
        return "task", result
    if isinstance(result.get("tasks"), list):  # ListTasks
        return "tasks", result
    return "other", result


def context_of_body(body: dict) -> str | None:
    """The contextId a JSON-RPC request or response names, if any."""
    params = body.get("params")
    if isinstance(params, dict):
        msg = params.get("message")
        if isinstance(msg, dict) and isinstance(msg.get("contextId"), str):
            return msg["contextId"]
        if isinstance(params.get("contextId"), str):
            return params["contextId"]
    kind, obj = classify_result(body.get("result"))
    if kind not in ("other", "tasks") and isinstance(obj, dict) and isinstance(obj.get("contextId"), str):
        return obj["contextId"]
    return None


def contexts_of_list(body: dict) -> list[str]:
    """The contextIds of the tasks in a ListTasks result (in order, each once)."""
    kind, obj = classify_result(body.get("result"))
    if kind != "tasks":
        return []
    out: dict[str, None] = {}
    for t in obj["tasks"]:
        if isinstance(t, dict) and isinstance(t.get("contextId"), str):
            out.setdefault(t["contextId"])
    return list(out)


def task_ids_of_body(body: dict) -> list[str]:
    """Task ids a JSON-RPC request or response refers to."""
    ids: list[str] = []
    params = body.get("params")
    if isinstance(params, dict):
        msg = params.get("message")
        if isinstance(msg, dict) and isinstance(msg.get("taskId"), str):
            ids.append(msg["taskId"])
        if body.get("method") in TASK_METHODS and isinstance(params.get("id"), str):
            ids.append(params["id"])
    kind, obj = classify_result(body.get("result"))
    if isinstance(obj, dict):
        key = "id" if kind == "task" else "taskId"
        if isinstance(obj.get(key), str):
            ids.append(obj[key])
    return ids


def looks_like_agent_card(obj: Any) -> bool:
    """True for an AgentCard (``.well-known/agent-card.json`` content) of either version."""
    return (isinstance(obj, dict) and isinstance(obj.get("name"), str) and "jsonrpc" not in obj
            and any(k in obj for k in ("skills", "capabilities", "supportedInterfaces", "protocolVersion",
                                       "protocolVersions", "defaultInputModes")))


# --------------------------------------------------------------------------- building

def build_parts(content: str | None, data: Any, protocol: str) -> list[dict]:
    """Parts for an event: one text part for `content`, one data part unless `data` == {}."""
    parts: list[dict] = []
    if content is not None:
        parts.append({"text": content} if protocol == "1.0" else {"kind": "text", "text": content})
    if data != {}:
        if protocol == "1.0":
            parts.append({"data": data})
        elif isinstance(data, dict):
            parts.append({"kind": "data", "data": data})
        else:  # a 0.3 DataPart holds an object: wrap other JSON values and flag it
            parts.append({"kind": "data", "data": {"value": data}, "metadata": {WRAPPED_KEY: True}})
    return parts


def build_message(protocol: str, message_id: str, context_id: str, role: str, content: str | None,
                  data: Any, metadata: dict) -> dict:
    """A Message object; `role` is "user" or "agent"."""
    msg: dict[str, Any] = {}
    if protocol == "0.3":
        msg["kind"] = "message"
    msg["messageId"] = message_id
    msg["contextId"] = context_id
    msg["role"] = ("ROLE_USER" if role == "user" else "ROLE_AGENT") if protocol == "1.0" else role
    msg["parts"] = build_parts(content, data, protocol)
    if metadata:
        msg["metadata"] = metadata
    return msg


def build_send_request(protocol: str, rpc_id: int | str, message: dict) -> dict:
    """A JSON-RPC SendMessage (1.0) / message/send (0.3) request body."""
    method = "SendMessage" if protocol == "1.0" else "message/send"
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": {"message": message}}


def build_message_response(protocol: str, rpc_id: int | str, message: dict) -> dict:
    """A JSON-RPC response whose result is a Message (wrapped in 1.0, bare in 0.3)."""
    result = {"message": message} if protocol == "1.0" else message
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}
