"""Google ADK sessions (app.ingest.readers.adk): camelCase session JSON and snake_case event lines,
through the registry and the loader on both databases."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest import detect_format, iter_path

from .stored_text import import_file, missing_texts

DATA = Path(__file__).parent.parent / "data" / "frameworks" / "adk"
SESSION = DATA / "kestrel_session.json"
EVENTS = DATA / "quay_events.jsonl"
RID = "adk/harbour_berths/sess-kestrel-0412"


def _run(path):
    items = list(iter_path(path))
    assert [str(i.error) for i in items if i.error] == []
    (item,) = items
    return item


def test_session_events_become_agents_messages_tools_and_a_hand_off():
    assert detect_format(SESSION) == "adk" and detect_format(EVENTS) == "adk"
    item = _run(SESSION)
    run = item.run
    assert run["run_id"] == RID and run["status"] == "error"
    assert [(p["id"], p["name"]) for p in run["principals"]] == [("user", "skipper_moana")]
    assert [a["id"] for a in run["agents"]] == ["berth_coordinator", "tide_oracle"]
    assert all(a["principal"] == "user" for a in run["agents"])
    ev = run["events"]
    assert not any(e["actor"] == "system" for e in ev)
    assert all(e["content"] for e in ev)
    shape = [(e["kind"], e["actor"], e["recipients"], e["visibility"]) for e in ev]
    assert shape[0] == ("message", "user", ["berth_coordinator"], "shared")
    assert shape[1] == ("log", "berth_coordinator", [], "private")  # the thought part
    call = next(e for e in ev if e["kind"] == "tool_call" and e["data"]["tool"] == "lookup_berth")
    result = next(e for e in ev if e["kind"] == "tool_result" and e["parent_seq"] == call["seq"])
    assert call["visibility"] == result["visibility"] == "private"
    assert call["data"]["call_id"] == "adk-fc-7a1" and "free from 05:00" in result["content"]
    (handoff, escalate) = [e for e in ev if e["kind"] == "delegation"]
    assert (handoff["actor"], handoff["recipients"], handoff["visibility"]) == (
        "berth_coordinator", ["tide_oracle"], "shared")
    assert handoff["content"] == "transfer to tide_oracle: Tide heights are the oracle's call, not mine."
    assert (escalate["actor"], escalate["recipients"]) == ("tide_oracle", ["berth_coordinator"])
    code = next(e for e in ev if e["kind"] == "tool_call" and e["data"]["tool"] == "code_execution")
    assert next(e for e in ev if e["parent_seq"] == code["seq"])["content"].startswith("2.3 metres")
    answer = next(e for e in ev if e["actor"] == "tide_oracle" and e["kind"] == "message")
    assert answer["recipients"] == ["user"] and answer["visibility"] == "shared"
    assert [e["kind"] for e in ev if e["actor"] == "tide_oracle"].count("state_update") == 1
    assert ev[-1]["content"].startswith("The model produced a booking call")
    assert run["started_at"].startswith("2026-") and run["events"][0]["ts"] == run["started_at"]
    # the unmapped customMetadata is a warning naming its field, not silently in data
    assert [w["message"].split(":")[0] for w in item.warnings] == ["events[7].custom_metadata"]


def test_snake_case_event_lines_read_the_same_way():
    run = _run(EVENTS).run
    assert run["run_id"] == "adk/quay_events"
    assert [(e["kind"], e["actor"], e["visibility"]) for e in run["events"]] == [
        ("message", "user", "shared"), ("tool_call", "quay_planner", "private"),
        ("tool_result", "quay_planner", "private"), ("message", "quay_planner", "shared")]
    assert run["events"][2]["parent_seq"] == 1


def test_every_text_is_stored_or_warned_on_both_databases(engine):
    summary, read = import_file(engine, SESSION)
    assert (summary.imported, summary.rejected) == (1, 0)
    fixture = json.loads(SESSION.read_text())
    # the session's final state is kept in run metadata (documented), the rest must be stored or warned
    assert missing_texts(fixture, engine, [RID], summary.warnings, kept=["state"]) == []
    # the check itself finds text that was not imported
    fixture["events"][0]["content"]["parts"].append({"text": "words this import never saw"})
    assert missing_texts(fixture, engine, [RID], summary.warnings, kept=["state"]) == [
        ("events[0].content.parts[1].text", "words this import never saw")]
    summary2, _ = import_file(engine, EVENTS)
    lines = [json.loads(ln) for ln in EVENTS.read_text().splitlines()]
    assert missing_texts(lines, engine, ["adk/quay_events"], summary2.warnings) == []
    again, _ = import_file(engine, SESSION)
    assert (again.imported, again.unchanged) == (0, 1)  # idempotent


def test_a_session_without_events_is_rejected_with_its_field(tmp_path):
    p = tmp_path / "empty.session.json"
    p.write_text(json.dumps({"id": "s0", "appName": "x", "userId": "u", "state": {}, "events": []}))
    (item,) = list(iter_path(p, format="adk"))
    assert item.error is not None and item.error.field == "events"
