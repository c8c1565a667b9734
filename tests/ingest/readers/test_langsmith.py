"""LangSmith / LangGraph run exports (app.ingest.readers.langgraph): a nested run tree and the same
runs flat (JSON Lines, shuffled), through the registry and the loader on both databases."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest import detect_format, iter_path
from app.ingest.canonical import epoch_to_iso

from .stored_text import import_file, missing_texts

DATA = Path(__file__).parent.parent / "data" / "frameworks" / "langsmith"
TREE = DATA / "orchard_tree.json"
FLAT = DATA / "orchard_runs.jsonl"
RID = "langsmith/7f3e2a10-0c4d-4e55-9a61-3b2d8c0f1a01"


def _run(path):
    items = list(iter_path(path))
    assert [str(i.error) for i in items if i.error] == []
    (item,) = items
    return item


def test_graph_nodes_are_agents_with_tool_calls_results_and_hand_offs():
    assert detect_format(TREE) == "langsmith" and detect_format(FLAT) == "langsmith"
    item = _run(TREE)
    run = item.run
    assert run["run_id"] == RID and run["status"] == "completed"
    assert [a["id"] for a in run["agents"]] == ["irrigation_lead", "soil_probe_agent"]
    assert run["agents"][0]["model"] == "orchard-model-2"
    assert [p["id"] for p in run["principals"]] == ["user"]
    assert run["principals"][0]["outcome"]["metrics"] == {"grower_approval": 1.0}
    ev = run["events"]
    assert not any(e["actor"] == "system" for e in ev) and all(e["content"] for e in ev)
    assert (ev[0]["actor"], ev[0]["recipients"], ev[0]["visibility"]) == ("user", ["irrigation_lead"], "shared")
    hand = [(e["actor"], e["recipients"]) for e in ev if e["kind"] == "delegation"]
    assert hand == [("irrigation_lead", ["soil_probe_agent"]), ("soil_probe_agent", ["irrigation_lead"])]
    call = next(e for e in ev if e["kind"] == "tool_call")
    assert (call["actor"], call["visibility"], call["data"]["call_id"]) == ("soil_probe_agent", "private", "call_s1")
    result = next(e for e in ev if e["kind"] == "tool_result" and e["parent_seq"] == call["seq"])
    assert result["actor"] == "soil_probe_agent" and result["content"].startswith("Block C: 18%")
    # the ToolNode answering a hand-off call is in the caller's lane, linked to the hand-off
    first_hand = next(e for e in ev if e["kind"] == "delegation")
    assert next(e for e in ev if e["parent_seq"] == first_hand["seq"])["actor"] == "irrigation_lead"
    report = next(e for e in ev if e["content"].startswith("Block C is dry"))
    assert (report["kind"], report["recipients"], report["visibility"]) == ("message", ["irrigation_lead"], "shared")
    final = ev[-1]
    assert (final["actor"], final["recipients"], final["content"]) == (
        "irrigation_lead", ["user"], "Water block C for 40 minutes after 22:00; the night stays dry.")
    prompts = [e for e in ev if e["data"].get("role") == "system"]
    assert {e["actor"] for e in prompts} == {"irrigation_lead", "soil_probe_agent"}
    assert all(e["visibility"] == "private" for e in prompts)
    assert [w["message"].split(":")[0] for w in item.warnings] == ["runs[].serialized"]


def test_flat_runs_in_any_order_give_the_same_run():
    assert _run(FLAT).run == _run(TREE).run


def test_every_text_is_stored_or_warned_on_both_databases(engine):
    summary, _ = import_file(engine, TREE)
    assert (summary.imported, summary.rejected) == (1, 0)
    assert missing_texts(json.loads(TREE.read_text()), engine, [RID], summary.warnings) == []
    flat, _ = import_file(engine, FLAT)
    assert (flat.imported, flat.unchanged) == (0, 1)


def test_batch_payload_patches_complete_posted_runs(tmp_path):
    post = {"id": "r-1", "name": "ChatModel", "run_type": "llm", "trace_id": "r-1", "start_time": 1780000000000,
            "dotted_order": "20260528T000000000000Zr-1", "inputs": {"messages": [{"role": "user", "content": "Any gulls on the pier?"}]}}
    patch = {"dotted_order": "20260528T000000000000Zr-1", "trace_id": "r-1", "end_time": 1780000001000,
             "outputs": {"choices": [{"message": {"role": "assistant", "content": "Two herring gulls, both loafing."}}]}}
    p = tmp_path / "batch.json"
    p.write_text(json.dumps({"post": [post], "patch": [patch]}))
    run = _run(p).run
    assert [(e["actor"], e["recipients"], e["content"]) for e in run["events"]] == [
        ("user", ["ChatModel"], "Any gulls on the pier?"), ("ChatModel", ["user"], "Two herring gulls, both loafing.")]
    assert run["started_at"] == epoch_to_iso(1780000000.0)  # the JS SDK's epoch milliseconds


def test_two_traces_in_one_file_are_two_runs(tmp_path):
    lines = [json.loads(ln) for ln in FLAT.read_text().splitlines()]
    other = []
    for r in lines:
        o = json.loads(json.dumps(r).replace("7f3e2a10-0c4d-4e55-9a61", "0b1c2d3e-0c4d-4e55-9a61"))
        other.append(o)
    p = tmp_path / "two_traces.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in lines + other) + "\n")
    runs = [i.run for i in iter_path(p)]
    assert [r["run_id"] for r in runs] == [RID, "langsmith/0b1c2d3e-0c4d-4e55-9a61-3b2d8c0f1a01"]
    assert len(runs[0]["events"]) == len(runs[1]["events"]) == len(_run(TREE).run["events"])
