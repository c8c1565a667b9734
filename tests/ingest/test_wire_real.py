"""A2A traffic as it really is: HTTP+JSON (REST) binding, ListTasks, errors with no context,
extensions / task metadata / tenant / A2A-Version / extended cards kept (issue 8 part 5)."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest import iter_path
from app.ingest.a2a import rest_method

DATA = Path(__file__).parent / "data" / "wire"


def _items():
    items = list(iter_path(DATA / "rest_binding.jsonl"))
    return {i.run["run_id"]: i.run for i in items if i.run}, [i.error for i in items if i.error]


def test_rest_paths_map_to_methods():
    assert rest_method("POST", "/message:send") == ("SendMessage", {})
    assert rest_method("POST", "/v1/message:stream") == ("SendStreamingMessage", {})
    assert rest_method("GET", "/acme/tasks/t1") == ("GetTask", {"id": "t1", "tenant": "acme"})
    assert rest_method("POST", "/tasks/t1:cancel") == ("CancelTask", {"id": "t1"})
    assert rest_method("GET", "/tasks") == ("ListTasks", {})
    assert rest_method("GET", "/healthz") == (None, {})


def test_rest_binding_attributed_by_role_with_everything_kept():
    runs, _ = _items()
    run = runs["ctx-rest"]
    ev = run["events"]
    assert [(e["kind"], e["actor"], e["recipients"], e["content"]) for e in ev] == [
        ("message", "buyer", ["shop-agent"], "Two lamps please"),
        ("state_update", "shop-agent", ["buyer"], "working"),
        ("message", "shop-agent", ["buyer"], "Shipped."),
        ("state_update", "shop-agent", ["buyer"], "completed"),
    ]  # the message repeated in the GetTask history and in ListTasks counts once
    assert ev[0]["metadata"]["a2a_extensions"] == ["https://example.org/ext/pricing/v1"]
    meta = run["metadata"]
    assert meta["a2a_protocol_version"] == "1.0" and meta["a2a_versions_declared"] == ["1.0"]
    assert meta["a2a_tenants"] == ["acme"] and meta["a2a_task_metadata"] == {"t1": {"priority": "high"}}
    shop = next(a for a in run["agents"] if a["id"] == "shop-agent")
    assert shop["metadata"]["agent_card"]["supportedInterfaces"][0]["protocolBinding"] == "HTTP+JSON"
    assert shop["metadata"]["extended_agent_card"]["skills"][0]["id"] == "wholesale"


def test_list_tasks_result_makes_a_run_of_each_listed_context():
    runs, _ = _items()
    old = runs["ctx-old"]
    assert old["status"] == "failed"
    assert [(e["actor"], e["content"]) for e in old["events"]] == [
        ("buyer", "Refund?"), ("shop-agent", "No."), ("shop-agent", "failed")]


def test_error_reply_without_context_is_reported_not_a_run():
    runs, errors = _items()
    assert set(runs) == {"ctx-rest", "ctx-old"}
    (err,) = errors
    assert "rest_binding.jsonl:6" in str(err) and "no known context" in str(err) and "task nope not found" in str(err)


def test_rest_stream_events_and_0_3_rest(tmp_path):
    def env(d, path, body, ex="s1", method="POST"):
        return {"direction": d, "from_agent": "c" if d == "request" else "srv", "to_agent": "srv" if d == "request" else "c",
                "exchange": ex, "http": {"method": method, "path": path}, "body": body}
    m = {"kind": "message", "messageId": "q", "contextId": "k3", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    lines = [env("request", "/v1/message:stream", {"message": m}),
             env("response", "/v1/message:stream", {"kind": "status-update", "taskId": "t", "contextId": "k3",
                                                     "status": {"state": "working"}, "final": False}),
             env("response", "/v1/message:stream", {"kind": "artifact-update", "taskId": "t", "contextId": "k3",
                                                     "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "he"}]}}),
             env("response", "/v1/message:stream", {"kind": "artifact-update", "taskId": "t", "contextId": "k3", "append": True,
                                                     "lastChunk": True,
                                                     "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "llo"}]}}),
             env("response", "/v1/message:stream", {"kind": "status-update", "taskId": "t", "contextId": "k3",
                                                     "status": {"state": "completed"}, "final": True})]
    p = tmp_path / "rest03.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines))
    (item,) = list(iter_path(p))
    run = item.run
    assert [(e["kind"], e["content"]) for e in run["events"]] == [
        ("message", "hi"), ("state_update", "working"), ("artifact", "hello"), ("state_update", "completed")]
    assert run["metadata"]["a2a_protocol_version"] == "0.3"
