"""smolagents memory steps: task from the user, plans and thoughts private, code calls with their
observations (or errors) linked, the final answer shared, zero silent loss."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest.readers.smolagents import SmolagentsReader

from .loss import assert_no_silent_loss, store_and_reload

RUN = Path(__file__).parent / "data" / "smolagents" / "pier7-tide-run.json"


def test_run_result_steps_become_events():
    r = SmolagentsReader()
    assert r.sniff(RUN).score > 0.8
    (item,) = r.read(RUN, "pier7-tide-run.json")
    run = item.run
    (agent,) = run["agents"]
    assert agent["id"] == "harbour_analyst" and agent["principal"] == "user"
    assert agent["private_state"]["system_prompt"].startswith("You are an expert assistant")
    assert run["principals"][0]["objective"] == "When is high tide at Pier 7 tomorrow, and how high?"
    ev = run["events"]
    assert [(e["kind"], e["actor"], e["visibility"]) for e in ev] == [
        ("message", "user", "shared"), ("log", "harbour_analyst", "private"), ("log", "harbour_analyst", "private"),
        ("tool_call", "harbour_analyst", "private"), ("tool_result", "harbour_analyst", "private"),
        ("log", "harbour_analyst", "private"), ("tool_call", "harbour_analyst", "private"),
        ("tool_result", "harbour_analyst", "private"), ("log", "harbour_analyst", "private"),
        ("tool_call", "harbour_analyst", "private"), ("message", "harbour_analyst", "shared")]
    assert ev[3]["content"] == "rows = tide_table(pier=7)\nprint(rows[:3])" and ev[4]["parent_seq"] == 3
    assert ev[7]["parent_seq"] == 6 and ev[7]["data"]["is_error"] is True and "NameError" in ev[7]["content"]
    assert ev[10]["recipients"] == ["user"] and ev[10]["content"] == "The tide peaks at 14:20, 3.1 m."
    assert ev[2]["ts"] == "2026-05-28T20:26:45Z"
    (warning,) = item.warnings
    assert warning["message"].startswith("steps[4].scratch: carries text ('retry with the table reloaded')")


def test_plain_step_list(tmp_path):
    p = tmp_path / "memory.json"
    p.write_text(json.dumps(json.loads(RUN.read_text())["steps"]))
    (item,) = SmolagentsReader().read(p, "memory.json")
    assert item.run["run_id"] == "smolagents/memory" and item.run["agents"][0]["id"] == "agent"
    assert item.run["events"][-1]["content"] == "The tide peaks at 14:20, 3.1 m."


def test_smolagents_zero_silent_loss_through_the_loader(engine):
    runs, warnings, summary = store_and_reload(engine, SmolagentsReader().read(RUN, "pier7-tide-run.json"))
    assert summary.imported == 1 and summary.rejected == 0
    assert_no_silent_loss(json.loads(RUN.read_text()), runs, warnings,
                          structural=(r"\.id$", r"\.type$", r"\.role$", r"\.name$", r"^state$", r"^name$"),
                          kept=(r"model_input_messages", r"model_output_message\.content", r"code_action$",
                                r"action_output$"))
