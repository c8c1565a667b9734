"""The reader builder: ids, actors, tool-call links, hand-offs, warnings for unmapped text."""
from __future__ import annotations

from app.ingest.readers.builder import RunBuilder, as_text, text_leaves


def test_builder_makes_a_normalized_run_with_linked_tool_events_and_warnings():
    b = RunBuilder("r-1", scenario="shop/1", family="shop", default_principal="customer")
    b.principal("customer", name="Casey")
    b.message("customer", "I want a refund", to=["clerk"])
    call = b.tool_call("clerk", "find_order", {"id": 7}, call_id="c-1")
    b.tool_result("clerk", {"status": "paid"}, call_id="c-1")
    b.tool_result("clerk", "orphan", call_id="c-404")
    b.handoff("clerk", "manager", "over to you")
    b.broadcast("manager", "refund approved", ["customer", "clerk", "manager"])
    b.thought("manager", "that was easy")
    b.check_keys({"text": "mapped", "extra": {"deep": "lost words"}, "n": 3}, {"text"}, "turns[0]")
    b.outcome("customer", success=True, score=1.0)
    item = b.item("shop.json")
    assert item.ok, item.error
    run = item.run
    assert [a["id"] for a in run["agents"]] == ["clerk", "manager"]
    assert all(a["principal"] == "customer" for a in run["agents"])
    ev = run["events"]
    assert [(e["kind"], e["actor"], e["recipients"], e["visibility"]) for e in ev] == [
        ("message", "customer", ["clerk"], "shared"), ("tool_call", "clerk", [], "private"),
        ("tool_result", "clerk", [], "private"), ("tool_result", "clerk", [], "private"),
        ("delegation", "clerk", ["manager"], "shared"), ("message", "manager", ["customer", "clerk"], "shared"),
        ("log", "manager", [], "private")]
    assert ev[2]["parent_seq"] == call and ev[2]["data"]["result"] == {"status": "paid"}
    assert ev[2]["content"] == '{"status": "paid"}' and ev[3]["parent_seq"] is None
    assert run["principals"][0]["outcome"] == {"success": True, "score": 1.0, "metrics": {}}
    messages = [w["message"] for w in item.warnings]
    assert any("c-404" in m for m in messages)
    assert any(m.startswith("turns[0].extra: carries text ('lost words')") for m in messages)
    assert not any("turns[0].n" in m for m in messages)  # a number carries no text


def test_a_run_without_events_is_an_error_and_system_only_when_said():
    b = RunBuilder("empty")
    item = b.item("x.json")
    assert not item.ok and item.error.field == "events"
    b.message("system", "boot")
    b.message(None, "anonymous")
    item = b.item("x.json")
    assert [e["actor"] for e in item.run["events"]] == ["system", "system"]
    assert item.run["agents"] == []
    assert [w["message"] for w in item.warnings] == ["an event without an actor was attributed to 'system'"]


def test_time_order_keeps_parent_links():
    b = RunBuilder("t")
    c = b.tool_call("a", "f", ts="2026-01-01T00:00:02Z", call_id="1")
    b.message("a", "first", ts="2026-01-01T00:00:01Z")
    b.tool_result("a", "ok", call_id="1", ts="2026-01-01T00:00:03Z")
    assert c == 0
    run = b.item("t.json", order_by_time=True).run
    assert [e["content"] for e in run["events"]] == ["first", "f()", "ok"]
    assert run["events"][2]["parent_seq"] == 1


def test_text_helpers():
    assert as_text([{"type": "text", "text": "a"}, "b", {"type": "image", "url": 1}]) == 'a\nb\n{"type": "image", "url": 1}'
    assert as_text("") is None and as_text({}) is None and as_text(3) == "3"
    assert list(text_leaves({"a": [{"b": "x"}, " "], "c": 1})) == [("a[0].b", "x")]
