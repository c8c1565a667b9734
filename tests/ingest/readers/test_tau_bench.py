"""tau-bench and tau2-bench readers: several runs per file, the simulated user as principal with
its reward as outcome, tool calls linked to results, ReAct turns split, zero silent loss."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest.readers.tau_bench import Tau2BenchReader, TauBenchReader

from .loss import assert_no_silent_loss, store_and_reload

DATA = Path(__file__).parent / "data"
TAU1 = DATA / "tau_bench" / "ferry-gpt-x.json"


def test_tau_bench_runs_events_and_outcomes():
    r = TauBenchReader()
    assert r.sniff(TAU1).score > 0.9
    assert not Tau2BenchReader().sniff(TAU1)
    items = list(r.read(TAU1, "ferry-gpt-x.json"))
    assert [i.run["run_id"] for i in items] == ["tau-bench/ferry-gpt-x/3/0", "tau-bench/ferry-gpt-x/3/1",
                                                "tau-bench/ferry-gpt-x/7/0"]
    first, react, crashed = (i.run for i in items)
    assert first["scenario"]["id"] == "tau-bench/ferry/3" and first["scenario"]["family"] == "ferry"
    (user,) = first["principals"]
    assert (user["id"], user["name"]) == ("user", "oskar_lind_204") and "Thursday" in user["objective"]
    assert user["outcome"]["success"] is True and user["outcome"]["score"] == 1.0 and first["aggregate_score"] == 1.0
    assert [(a["id"], a["principal"]) for a in first["agents"]] == [("assistant", "user")]
    ev = first["events"]
    assert [(e["kind"], e["actor"], e["visibility"]) for e in ev] == [
        ("message", "system", "private"), ("message", "user", "shared"), ("tool_call", "assistant", "private"),
        ("tool_result", "assistant", "private"), ("message", "assistant", "shared"), ("message", "user", "shared"),
        ("message", "assistant", "shared"), ("tool_call", "assistant", "private"),
        ("tool_result", "assistant", "private"), ("message", "assistant", "shared"), ("message", "user", "shared")]
    assert ev[1]["recipients"] == ["assistant"] and ev[4]["recipients"] == ["user"]
    assert ev[3]["parent_seq"] == 2 and ev[8]["parent_seq"] == 7
    assert ev[2]["data"]["arguments"] == {"booking": "HX-88"} and ev[2]["data"]["call_id"] == "call_q1"
    assert react["principals"][0]["outcome"]["success"] is False
    assert react["principals"][0]["outcome"]["metrics"]["outputs"] == {"12 EUR": False}
    assert [(e["kind"], e["actor"]) for e in react["events"]] == [
        ("message", "system"), ("message", "user"), ("log", "assistant"), ("tool_call", "assistant"),
        ("tool_result", "assistant"), ("log", "assistant"), ("message", "assistant"), ("message", "user")]
    assert react["events"][4]["parent_seq"] == 3 and react["events"][6]["content"] == "Yes, Thursday works. Want me to move it?"
    assert crashed["status"] == "error" and "RateLimitError" in crashed["events"][-1]["content"]
    warned = [w["message"] for w in items[2].warnings]
    assert any(w.startswith("annotator_remark: carries text") for w in warned)
    assert any(w.startswith("traj[1].mood: carries text") for w in warned)
    assert not items[0].warnings


def test_tau_bench_zero_silent_loss_through_the_loader(engine):
    runs, warnings, summary = store_and_reload(engine, TauBenchReader().read(TAU1, "ferry-gpt-x.json"))
    assert summary.imported == 3 and summary.rejected == 0
    assert_no_silent_loss(json.loads(TAU1.read_text()), runs, warnings,
                          structural=(r"\.role$", r"\.type$", r"\.name$", r"\.id$", r"tool_call_id$", r"source$",
                                      r"gt_data_hash$", r"function\.name$", r"\.user_id$"),
                          kept=(r"\.actions\[", r"\.outputs", r"traceback$"))


TAU2 = DATA / "tau2_bench"
TAU2_JSON = TAU2 / "json" / "parcel_desk-model-9_2trials.json"
TAU2_DIR = TAU2 / "dir_storage"


def test_tau2_results_file_user_tools_checks_and_review():
    r = Tau2BenchReader()
    assert r.sniff(TAU2_JSON).score > 0.9 and r.sniff(TAU2_DIR).score > 0.8
    assert not TauBenchReader().sniff(TAU2_JSON)
    good, bad = (i.run for i in r.read(TAU2_JSON, "parcel.json"))
    assert good["run_id"] == "tau2/5b1e-good" and good["scenario"]["id"] == "tau2/parcel/12"
    assert "verify the sender" in good["scenario"]["description"]
    (user,) = good["principals"]
    assert user["id"] == "user" and "Redirect parcel PK-4410" in user["objective"] and "hurried" in user["objective"]
    assert user["outcome"]["success"] is True and good["aggregate_score"] == 1.0
    (agent,) = good["agents"]
    assert (agent["id"], agent["role"], agent["model"]) == ("assistant", "llm_agent", "desk-model-9")
    assert "Never waive" in agent["private_state"]["policy"]
    ev = good["events"]
    # the user's own tool call (on its device) is private to the user; the agent's two calls are
    # answered by one multi_tool message, each result linked to its call
    assert (ev[3]["kind"], ev[3]["actor"], ev[4]["kind"], ev[4]["parent_seq"]) == ("tool_call", "user", "tool_result", 3)
    assert [(e["kind"], e["parent_seq"]) for e in ev[6:10]] == [("tool_call", None), ("tool_call", None),
                                                                 ("tool_result", 6), ("tool_result", 7)]
    assert all(e["visibility"] == "shared" for e in ev if e["kind"] == "message")
    assert {c["check_id"]: c["passed"] for c in good["checks"]} == {
        "db_match": True, "action:redirect_parcel": True, "nl:Agent asks for the sender code before redirecting.": True}
    assert bad["principals"][0]["outcome"]["success"] is False and bad["events"][3]["data"]["is_error"] is True
    (audit,) = bad["audits"]
    assert (audit["source"], audit["mode"], audit["agent"], audit["evidence"]) == ("tau2-review", None, "assistant", [4])
    assert "Waiving storage fees" in audit["note"]
    checks = {c["check_id"]: c for c in bad["checks"]}
    assert checks["review"]["detail"].startswith("The agent skipped") and not checks["error:missing_verification"]["passed"]


def test_tau2_dir_storage_and_a_single_simulation_file():
    r = Tau2BenchReader()
    (run,) = [i.run for i in r.read(TAU2_DIR, "exp")]
    assert run["run_id"] == "tau2/77c0-dir" and run["status"] == "timeout"
    assert "Redirect parcel" in run["principals"][0]["objective"]  # the task from results.json
    single = TAU2_DIR / "simulations" / "77c0-dir.json"
    assert r.sniff(single).score > 0.8
    (again,) = [i.run for i in r.read(single, str(single))]
    assert again["principals"][0]["objective"] == run["principals"][0]["objective"]


def test_tau2_zero_silent_loss_through_the_loader(engine):
    runs, warnings, summary = store_and_reload(engine, Tau2BenchReader().read(TAU2_JSON, "parcel.json"))
    assert summary.imported == 2 and summary.rejected == 0
    assert any(w.startswith("messages[4].reasoning_trace: carries text") for w in warnings)
    assert_no_silent_loss(json.loads(TAU2_JSON.read_text()), runs, warnings,
                          structural=(r"\.role$", r"\.id$", r"requestor$", r"\.name$", r"timestamp$", r"_time$",
                                      r"termination_reason$", r"\.mode$", r"git_commit$", r"implementation$",
                                      r"\.llm$", r"domain(_name)?$", r"reward_basis", r"error_type$",
                                      r"error_tags", r"severity$", r"\.source$", r"action_id$", r"task_id$"),
                          kept=(r"^tasks\[\d+\]\.evaluation_criteria", r"global_simulation_guidelines$",
                                r"\.arguments\.", r"^tasks\[\d+\]\.user_scenario\.instructions\.domain$"))


def test_the_tasks_answers_are_hidden_from_blind_annotators():
    """Expected actions and outputs (tau-bench) and evaluation criteria (tau2) are answers: a
    blind annotator's view of the run has none of them; a reviewer's keeps them."""
    from app.annotations.blind import Sight, visible_metadata

    blind, reviewer = Sight(labels=False, demo_truth=False), Sight(labels=True, demo_truth=False)
    first = next(iter(TauBenchReader().read(TAU1, "ferry-gpt-x.json"))).run
    assert first["metadata"]["tau_bench"]["expected_actions"]
    seen = visible_metadata(first["metadata"], blind)
    assert "expected_actions" not in seen["tau_bench"] and "expected_outputs" not in seen["tau_bench"]
    assert seen["tau_bench"]["task_id"] == first["metadata"]["tau_bench"]["task_id"]
    assert visible_metadata(first["metadata"], reviewer)["tau_bench"]["expected_actions"]
    good = next(iter(Tau2BenchReader().read(TAU2_JSON, "parcel.json"))).run
    assert good["metadata"]["tau2"]["evaluation_criteria"]
    assert "evaluation_criteria" not in visible_metadata(good["metadata"], blind)["tau2"]
