"""A2A wire logs, protocol 1.0 and 0.3: envelopes, bare JSON-RPC, SSE, agent cards, sidecars."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest import iter_path

DATA = Path(__file__).parent / "data" / "wire"


def _ev(seq, ts, kind, actor, recipients, content, data=None, metadata=None, visibility="shared"):
    return {"seq": seq, "ts": ts, "kind": kind, "actor": actor, "recipients": recipients, "visibility": visibility,
            "content": content, "data": {} if data is None else data, "parent_seq": None, "hop": None,
            "metadata": metadata or {}}


def _runs(path, **kw):
    items = list(iter_path(path, **kw))
    return [i.run for i in items if i.run], [i.error for i in items if i.error]


def test_v10_envelopes_group_by_context_and_count_repeated_history_once():
    runs, errors = _runs(DATA / "v10_envelopes.jsonl")
    assert errors == []
    assert [r["run_id"] for r in runs] == ["ctx-car-1", "ctx-car-2", "ctx-new"]
    car1 = runs[0]
    assert car1["events"] == [
        _ev(0, "2026-05-01T10:00:01Z", "message", "buyer_agent", ["seller_agent"], "Is the hatchback available?",
            {"max_price": 18500}),
        _ev(1, "2026-05-01T10:00:02Z", "state_update", "seller_agent", ["buyer_agent"], "working",
            {"task_id": "task-1", "state": "working"}),
        # m-1 again in both Task histories: counted once; m-2 is in history and status.message: once
        _ev(2, None, "message", "seller_agent", ["buyer_agent"], "Yes. Your offer?", metadata={"a2a_task_id": "task-1"}),
        _ev(3, "2026-05-01T10:00:06Z", "state_update", "seller_agent", ["buyer_agent"], "input-required",
            {"task_id": "task-1", "state": "input-required"}),
        _ev(4, "2026-05-01T10:00:06Z", "artifact", "seller_agent", ["buyer_agent"], None,
            {"task_id": "task-1", "artifact_id": "quote-1", "name": "quote", "data": {"price": 19900, "currency": "EUR"}}),
    ]
    assert sum(e["kind"] == "message" for e in car1["events"]) == 2
    assert [a["id"] for a in car1["agents"]] == ["buyer_agent", "seller_agent"]
    assert car1["agents"][1]["role"] == "server"
    assert car1["agents"][1]["metadata"]["agent_card"]["name"] == "Seller Bot"
    assert car1["scenario"]["id"] == "unknown" and car1["scenario"]["family"] == "unknown"
    assert "run_context" in car1["scenario"]["metadata"]["note"]
    assert (car1["started_at"], car1["ended_at"]) == ("2026-05-01T10:00:01Z", "2026-05-01T10:00:06Z")
    assert car1["metadata"]["a2a_protocols"] == ["1.0"]
    assert car1["metadata"]["a2a_last_task_state"] == "input-required"
    # the JSON-RPC error answering req-3 (paired by id, no contextId of its own)
    assert runs[1]["events"][1] == _ev(1, "2026-05-01T10:30:01Z", "log", "seller_agent", ["buyer_agent"],
                                       "Task not found", {"error": {"code": -32001, "message": "Task not found"}})
    # req-4 carried no contextId: its response's contextId places it
    assert [(e["actor"], e["content"]) for e in runs[2]["events"]] == [
        ("buyer_agent", "New conversation"), ("seller_agent", "Hello!")]


def test_v10_sse_stream_joins_artifact_chunks():
    runs, errors = _runs(DATA / "v10_stream.sse")
    assert errors == []
    (run,) = runs
    assert run["run_id"] == "ctx-stream"
    assert run["events"] == [
        _ev(0, None, "message", "user", ["agent"], "Draft the contract"),
        _ev(1, None, "state_update", "agent", ["user"], "submitted", {"task_id": "task-9", "state": "submitted"}),
        _ev(2, "2026-05-01T12:00:01Z", "state_update", "agent", ["user"], "working",
            {"task_id": "task-9", "state": "working"}),
        _ev(3, None, "artifact", "agent", ["user"], "Clause 1: the buyer pays €18,400.",
            {"task_id": "task-9", "artifact_id": "contract", "name": "contract.md", "data": {"signed": False}}),
        _ev(4, "2026-05-01T12:00:09Z", "state_update", "agent", ["user"], "completed",
            {"task_id": "task-9", "state": "completed"}),
    ]
    assert [(a["id"], a["role"]) for a in run["agents"]] == [("user", "client"), ("agent", "server")]
    assert run["status"] == "completed"


def test_v03_mixed_lines_and_sse_with_agent_card_names_the_server():
    runs, errors = _runs(DATA / "v03_mixed.log")
    assert errors == []
    (run,) = runs
    card = "NDA Summariser"
    file_part = {"kind": "file", "file": {"uri": "https://files.example/nda.pdf", "mimeType": "application/pdf",
                                          "name": "nda.pdf"}}
    assert run["events"] == [
        _ev(0, None, "message", "user", [card], "Summarise the NDA", {"parts": [file_part]}),
        _ev(1, None, "state_update", card, ["user"], "submitted", {"task_id": "t-3", "state": "submitted"}),
        _ev(2, None, "message", card, ["user"], "Reading…"),
        _ev(3, None, "state_update", card, ["user"], "working", {"task_id": "t-3", "state": "working", "final": False}),
        _ev(4, None, "artifact", card, ["user"], "The NDA lasts 2 years.", {"task_id": "t-3", "artifact_id": "sum"}),
        _ev(5, "2026-05-02T09:00:00Z", "state_update", card, ["user"], "input-required",
            {"task_id": "t-3", "state": "input-required", "final": True}),
    ]
    assert run["metadata"]["a2a_protocols"] == ["0.3"]
    assert run["agents"][1]["metadata"]["agent_card"]["url"] == "https://nda.example/a2a"


def test_sidecar_file_supplies_the_rest_and_merges_by_timestamp():
    runs, errors = _runs(DATA / "with_sidecar.jsonl")
    assert errors == []
    (run,) = runs
    assert run["run_id"] == "commerce-deal-7"
    assert run["scenario"]["alignment"] == "competitive"
    assert run["events"] == [
        _ev(0, "2026-05-01T10:00:05Z", "tool_call", "buyer_agent", [], "lookup_budget()", {"tool": "budget"},
            visibility="private"),
        _ev(1, "2026-05-01T10:00:10Z", "message", "buyer_agent", ["seller_agent"], "Offer: 18,000"),
        # 10:00:20 tie: the sidecar's event as written comes before the wire message
        _ev(2, "2026-05-01T10:00:20Z", "state_update", "seller_agent", [], "thinking", visibility="private"),
        _ev(3, "2026-05-01T10:00:20Z", "message", "seller_agent", ["buyer_agent"], "Counter: 18,700"),
        _ev(4, "2026-05-01T10:00:30Z", "log", "system", [], "episode over", visibility="private"),
    ]
    assert run["audits"][0]["evidence"] == [3]
    assert [a["id"] for a in run["agents"]] == ["buyer_agent", "seller_agent"]  # nothing added


def _env(ts, frm, to, body):
    return {"ts": ts, "direction": "request" if "method" in body else "response", "from_agent": frm,
            "to_agent": to, "body": body}


def _send(rid, mid, ctx, text, role="ROLE_USER"):
    return {"jsonrpc": "2.0", "id": rid, "method": "SendMessage",
            "params": {"message": {"messageId": mid, "contextId": ctx, "role": role, "parts": [{"text": text}]}}}


def _write(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def test_in_log_run_context_placeholders_overrides_and_unplaced_wire_messages(tmp_path):
    ctx = "c-9"
    side = {"type": "run_context", "context_id": ctx, "run": {
        "run_id": "run-9", "scenario": {"id": "s", "family": "f"},
        "agents": [{"id": "x"}, {"id": "y"}],
        "events": [
            {"wire_message": "w-2", "hop": 4},  # placed first although it was sent second
            {"kind": "tool_call", "actor": "y", "content": "calc()", "ts": "2026-01-01T00:00:00Z"},
            {"wire_message": "w-1", "parent_seq": 0},
        ]}}
    records = [side,
               _env("2026-01-01T00:00:01Z", "x", "y", _send(1, "w-1", ctx, "one")),
               _env("2026-01-01T00:00:02Z", "x", "y", _send(2, "w-2", ctx, "two")),
               _env("2026-01-01T00:00:03Z", "x", "y", _send(3, "w-3", ctx, "three")),  # no placeholder
               _env("2026-01-01T00:00:04Z", "z", "x", _send(4, "w-4", ctx, "from a stranger"))]
    _write(tmp_path / "log.jsonl", records)
    (run,), errors = _runs(tmp_path / "log.jsonl")
    assert errors == []
    assert [(e["seq"], e["kind"], e["content"], e["parent_seq"], e["hop"]) for e in run["events"]] == [
        (0, "message", "two", None, 4),
        (1, "tool_call", "calc()", None, None),
        (2, "message", "one", 0, None),
        (3, "message", "three", None, None),
        (4, "message", "from a stranger", None, None),
    ]
    # "z" is on the wire but not in the sidecar: added as an agent
    assert [a["id"] for a in run["agents"]] == ["x", "y", "z"]
    assert run["agents"][2]["metadata"] == {"source": "a2a-wire"}


def test_bad_sidecar_and_bad_lines_reject_only_their_own_run(tmp_path):
    records = [
        {"type": "run_context", "context_id": "a", "run": {"run_id": "A", "scenario": {"id": "s", "family": "f"},
                                                           "agents": [{"id": "x"}, {"id": "y"}],
                                                           "events": [{"wire_message": "missing"}]}},
        _env(None, "x", "y", _send(1, "m1", "a", "hello")),
        _env(None, "x", "y", _send(2, "m2", "b", "other run")),
    ]
    _write(tmp_path / "log.jsonl", records)
    with open(tmp_path / "log.jsonl", "a", encoding="utf-8") as f:
        f.write("{this is not json\n")
    items = list(iter_path(tmp_path / "log.jsonl"))
    errors = [i.error for i in items if i.error]
    assert sorted(str(e.where) for e in errors) == [f"{tmp_path}/log.jsonl:1", f"{tmp_path}/log.jsonl:4"]
    bad_ref = next(e for e in errors if e.where.line == 1)
    assert bad_ref.field == "run.events[0].wire_message" and "not in the wire log" in bad_ref.message
    assert [i.run["run_id"] for i in items if i.run] == ["b"]


def test_bare_bodies_without_any_context_form_one_fallback_run(tmp_path):
    body = {"jsonrpc": "2.0", "id": 5, "method": "message/send",
            "params": {"message": {"kind": "message", "messageId": "q", "role": "user",
                                   "parts": [{"kind": "text", "text": "anyone?"}, {"kind": "data", "data": {"n": 1}}]}}}
    _write(tmp_path / "lonely.jsonl", [body])
    (run,), errors = _runs(tmp_path / "lonely.jsonl")
    assert errors == []
    assert run["run_id"] == "lonely.jsonl#no-context"
    assert run["events"] == [_ev(0, None, "message", "user", ["agent"], "anyone?", {"n": 1})]


def test_sse_with_crlf_and_multiline_data(tmp_path):
    msg = {"kind": "message", "messageId": "m", "contextId": "crlf", "role": "agent",
           "parts": [{"kind": "text", "text": "ok"}]}
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "result": msg}, indent=1)
    sse = "event: message\r\n" + "".join(f"data: {line}\r\n" for line in text.split("\n")) + "\r\n"
    (tmp_path / "s.sse").write_bytes(sse.encode("utf-8"))
    (run,), errors = _runs(tmp_path / "s.sse")
    assert errors == []
    assert run["events"] == [_ev(0, None, "message", "agent", ["user"], "ok")]


def test_agent_card_file_next_to_a_bare_log_names_the_server(tmp_path):
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m", "contextId": "k", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"message": {"messageId": "n", "contextId": "k", "role": "ROLE_AGENT",
                                                               "parts": [{"text": "hello"}]}}}
    _write(tmp_path / "log.jsonl", [body, reply])
    (tmp_path / ".well-known").mkdir()
    (tmp_path / ".well-known" / "agent-card.json").write_text(json.dumps(
        {"name": "Travel Agent", "version": "1", "capabilities": {}, "skills": [], "supportedInterfaces": []}),
        encoding="utf-8")
    (run,), errors = _runs(tmp_path / "log.jsonl")
    assert errors == []
    assert [(e["actor"], e["recipients"]) for e in run["events"]] == [("user", ["Travel Agent"]),
                                                                      ("Travel Agent", ["user"])]
    # read as a directory: the card file is consumed by the log, nothing is reported unused
    items = list(iter_path(tmp_path))
    assert [i.run["run_id"] for i in items if i.run] == ["k"]
    assert [u for i in items for u in i.unused_files] == []


def test_a_log_with_only_an_agent_card_is_reported_unused(tmp_path):
    _write(tmp_path / "card.jsonl", [{"type": "agent_card", "card": {"name": "X", "skills": []}}])
    (item,) = list(iter_path(tmp_path / "card.jsonl"))
    assert item.run is None and item.error is None and item.unused_files == [f"{tmp_path}/card.jsonl"]
