"""CrewAI (app.ingest.readers.crewai): an event log (TraceEvent lines), a CrewOutput and an
output_log_file, through the registry and the loader on both databases."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest import detect_format, iter_path

from .stored_text import import_file, missing_texts

DATA = Path(__file__).parent.parent / "data" / "frameworks" / "crewai"
EVENTS = DATA / "tidepool_events.jsonl"
OUTPUT = DATA / "estuary_crew_output.json"
LOG = DATA / "dune_output_log.json"
RID = "crewai/tidepool_survey/tp-000-4c1e"


def _run(path):
    items = list(iter_path(path))
    assert [str(i.error) for i in items if i.error] == []
    (item,) = items
    return item


def test_event_log_crew_hands_tasks_to_agents_with_private_tools_and_a_coworker_question():
    assert {detect_format(p) for p in (EVENTS, OUTPUT, LOG)} == {"crewai"}
    item = _run(EVENTS)
    run = item.run
    assert run["run_id"] == RID and run["status"] == "completed"
    assert [a["id"] for a in run["agents"]] == ["tidepool_survey", "Transect Counter", "Field Editor"]
    assert run["agents"][1]["metadata"]["goal"] == "Produce exact quadrat counts"
    user = run["principals"][0]
    assert user["id"] == "user" and user["outcome"]["score"] == 8.5 and run["aggregate_score"] == 8.5
    ev = run["events"]
    assert not any(e["actor"] == "system" for e in ev) and all(e["content"] for e in ev)
    assert (ev[0]["actor"], ev[0]["recipients"]) == ("user", ["tidepool_survey"])
    tasks = [(e["actor"], e["recipients"]) for e in ev if e["kind"] == "delegation" and e["actor"] == "tidepool_survey"]
    assert tasks == [("tidepool_survey", ["Transect Counter"]), ("tidepool_survey", ["Field Editor"])]
    assert "Expected output: Counts per quadrat" in ev[1]["content"]
    call = next(e for e in ev if e["kind"] == "tool_call")
    result = next(e for e in ev if e["kind"] == "tool_result")
    assert (call["actor"], call["visibility"], result["parent_seq"]) == ("Transect Counter", "private", call["seq"])
    ask = next(e for e in ev if e["kind"] == "delegation" and e["actor"] == "Transect Counter")
    assert ask["recipients"] == ["Field Editor"] and ask["content"].startswith("Is a blurred corner")
    answer = next(e for e in ev if e["parent_seq"] == ask["seq"])
    assert (answer["actor"], answer["recipients"], answer["visibility"]) == ("Field Editor", ["Transect Counter"], "shared")
    private = {e["content"][:20] for e in ev if e["visibility"] == "private" and e["actor"] == "Transect Counter"}
    assert "You are Transect Cou" in private and "Thought: the photos " in private  # prompt and response
    assert ev[-1]["actor"] == "tidepool_survey" and ev[-1]["recipients"] == ["user"]
    assert sum(e["content"].startswith("Limpets held steady") for e in ev) == 2  # the task's and the crew's output
    assert [w["message"].split(":")[0] for w in item.warnings] == ["events[10](memory_save_started).value"]
    assert run["metadata"]["import_notes"][0].startswith("1 streamed chunks")


def test_crew_output_and_log_file():
    run = _run(OUTPUT).run
    assert [a["id"] for a in run["agents"]] == ["crew", "Logger Reader", "Estuary Analyst"]
    assert [(e["kind"], e["actor"], e["visibility"]) for e in run["events"]][:5] == [
        ("delegation", "crew", "shared"), ("log", "Logger Reader", "private"), ("log", "Logger Reader", "private"),
        ("log", "Logger Reader", "private"), ("message", "Logger Reader", "shared")]
    assert run["events"][-1]["recipients"] == ["user"]
    log = _run(LOG).run
    assert [(e["kind"], e["actor"], e["recipients"]) for e in log["events"]] == [
        ("delegation", "crew", ["Dune Walker"]), ("message", "Dune Walker", ["crew"])]


def test_every_text_is_stored_or_warned_on_both_databases(engine):
    lines = [json.loads(ln) for ln in EVENTS.read_text().splitlines()]
    summary, _ = import_file(engine, EVENTS)
    assert (summary.imported, summary.rejected) == (1, 0)
    # LLM call configuration (tool schemas, callbacks) and tool names are kept in data, as the reader documents
    kept = ["[].event_data.tools", "[].event_data.callbacks", "[].event_data.tool_name"]
    assert missing_texts(lines, engine, [RID], summary.warnings, kept=kept) == []
    out, _ = import_file(engine, OUTPUT)
    assert missing_texts(json.loads(OUTPUT.read_text()), engine, ["crewai/estuary_crew_output"], out.warnings) == []
    log, _ = import_file(engine, LOG)
    assert missing_texts(json.loads(LOG.read_text()), engine, ["crewai/crew/dune_output_log"], log.warnings) == []


def test_every_kickoff_in_a_log_is_a_run(tmp_path):
    lines = EVENTS.read_text().splitlines()
    again = [ln.replace('"tp-', '"tq-') for ln in lines]
    p = tmp_path / "two_kickoffs.jsonl"
    p.write_text("\n".join(lines + again) + "\n")
    runs = [i.run for i in iter_path(p)]
    assert [r["run_id"] for r in runs] == ["crewai/tidepool_survey/tp-000-4c1e", "crewai/tidepool_survey/tq-000-4c1e"]
    assert len(runs[0]["events"]) == len(runs[1]["events"]) == 15


def test_strict_accepts_a_faithful_crew_output_log(engine):
    from app.ingest.loader import load_items

    summary = load_items(engine, iter_path(LOG), strict=True)
    assert (summary.imported, summary.rejected, summary.warnings) == (1, 0, [])
