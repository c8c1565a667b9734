"""OpenAI Agents SDK trace exports: one run per trace, agents from agent spans, hand-offs as
delegations, function spans as linked tool call/result, guardrails as checks, zero silent loss."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest.readers.openai_agents import OpenAIAgentsReader

from .loss import assert_no_silent_loss, store_and_reload

EXPORT = Path(__file__).parent / "data" / "openai_agents" / "library-desk-export.json"


def test_trace_export_becomes_runs_with_agents_handoffs_and_tools():
    r = OpenAIAgentsReader()
    assert r.sniff(EXPORT).score > 0.9
    first, second = list(r.read(EXPORT, "export.json"))
    run = first.run
    assert run["run_id"] == "openai-agents/group/thread-88"  # the trace's conversation
    assert run["scenario"]["id"] == "Library desk" and run["metadata"]["openai_agents"]["group_id"] == "thread-88"
    agents = {a["id"]: a for a in run["agents"]}
    assert set(agents) == {"Front desk", "Renewals"} and all(a["principal"] == "user" for a in agents.values())
    assert agents["Front desk"]["private_state"] == {"instructions": "You run the library front desk."}
    ev = run["events"]
    by_kind = {}
    for e in ev:
        by_kind.setdefault(e["kind"], []).append(e)
    (ask,) = [e for e in ev if e["actor"] == "user"]
    assert ask["recipients"] == ["Front desk"] and ask["visibility"] == "shared"
    (handoff,) = by_kind["delegation"]
    assert (handoff["actor"], handoff["recipients"], handoff["visibility"]) == ("Front desk", ["Renewals"], "shared")
    calls, results = by_kind["tool_call"], by_kind["tool_result"]
    assert [c["actor"] for c in calls] == ["Front desk", "Renewals"]
    assert [r["parent_seq"] for r in results] == [c["seq"] for c in calls]
    assert all(e["visibility"] == "private" for e in calls + results)
    assert results[1]["data"]["is_error"] is True and "hold queue: 1 patron waiting" in results[1]["content"]
    (answer,) = [e for e in ev if e["kind"] == "message" and e["actor"] == "Renewals"]
    assert answer["recipients"] == ["user"] and answer["content"].startswith("Sorry, someone has a hold")
    assert [(c["check_id"], c["passed"]) for c in run["checks"]] == [("no_personal_data", True)]
    assert not first.warnings
    blocked = second.run
    assert [(c["check_id"], c["passed"]) for c in blocked["checks"]] == [("no_personal_data", False)]
    assert blocked["metadata"]["import_notes"] == [
        "1 response span(s): the SDK exports no model text for them (Responses API)"]
    assert [n["message"] for n in second.notices] == blocked["metadata"]["import_notes"]
    assert [w["message"][:40] for w in second.warnings] == ["span span_b3.span_data.reason_text: carr"]


def test_jsonl_of_items_reads_the_same(tmp_path):
    items = json.loads(EXPORT.read_text())["data"]
    p = tmp_path / "spans.jsonl"
    p.write_text("\n".join(json.dumps(i) for i in reversed(items)) + "\n")
    runs = [i.run for i in OpenAIAgentsReader().read(p, "spans.jsonl")]
    again = [i.run for i in OpenAIAgentsReader().read(EXPORT, "export.json")]
    assert sorted((r["run_id"], [e["content"] for e in r["events"]]) for r in runs) == sorted(
        (r["run_id"], [e["content"] for e in r["events"]]) for r in again)


def test_openai_agents_zero_silent_loss_through_the_loader(engine):
    runs, warnings, summary = store_and_reload(engine, OpenAIAgentsReader().read(EXPORT, "export.json"))
    assert summary.imported == 2 and summary.rejected == 0
    assert_no_silent_loss(json.loads(EXPORT.read_text()), runs, warnings,
                          consumed=(r"\.object$",),
                          structural=(r"\.id$", r"trace_id$", r"parent_id$", r"_at$", r"\.type$",
                                      r"\.name$", r"\.model$", r"output_type$", r"group_id$", r"response_id$",
                                      r"tool_name$", r"_agent$", r"\.role$", r"handoffs\[", r"tools\["),
                          kept=(r"\.metadata\.", r"\.tool_calls\[", r"\.input\[\d+\]\.content$"))


def test_traces_of_one_conversation_are_one_run(tmp_path):
    items = json.loads(EXPORT.read_text())["data"]
    second = [dict(i) for i in items if i.get("id") in ("span_a1", "span_g3")]  # an agent and its generation
    t2 = "trace_1111222233334444555566667777aaaa"
    for i in second:
        i.update(trace_id=t2, id=i["id"] + "_b", parent_id=i["parent_id"] and i["parent_id"] + "_b",
                 started_at=i["started_at"].replace("08:15", "08:20"), ended_at=i["ended_at"].replace("08:15", "08:20"))
    second[-1]["span_data"] = {**second[-1]["span_data"], "input": [{"role": "user", "content": "And 'Emma'?"}],
                               "output": [{"role": "assistant", "content": "Emma is due Friday."}]}
    head = {"object": "trace", "id": t2, "workflow_name": "Library desk", "group_id": "thread-88", "metadata": None}
    p = tmp_path / "thread.json"
    p.write_text(json.dumps({"data": items + [head] + second}))
    runs = {i.run["run_id"]: i.run for i in OpenAIAgentsReader().read(p, "thread.json")}
    assert set(runs) == {"openai-agents/group/thread-88", "openai-agents/trace_0badf00d11223344556677889900aabb"}
    run = runs["openai-agents/group/thread-88"]
    assert run["metadata"]["openai_agents"]["trace_ids"] == ["trace_5c0ffee0a1b2c3d4e5f60718293a4b5c", t2]
    asks = [e["content"] for e in run["events"] if e["actor"] == "user"]
    assert asks == ["Can I keep 'Dune' two more weeks?", "And 'Emma'?"]
    assert run["events"][-1]["content"] == "Emma is due Friday."
