"""Files holding runs, written here in the shapes the frameworks write (small): a tau-bench
`historical_trajectories/*.json` (a JSON array of EnvRunResult), a tau2-bench results file
(`simulations[]` beside `tasks[]` and `info`), JSON Lines of runs, and a tau2-bench "dir" results
folder (`results.json` + one `simulations/<id>.json` per run). Shapes taken from tau-bench's
`historical_trajectories/gpt-4o-airline.json` and tau2-bench's `src/tau2/data_model/simulation.py`."""
from __future__ import annotations

import json
from pathlib import Path

POLICY = "# Ferry Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST.\n\nNever refund a used ticket."


def _call(cid: str, name: str, args: dict) -> dict:
    return {"function": {"arguments": json.dumps(args), "name": name}, "id": cid, "type": "function"}


def tau_bench_runs() -> list[dict]:
    """Two EnvRunResults: task 0 (reward 1, one call id used twice, as the real file does) and task 1."""
    def run(task_id: int, reward: float, user: str, want: str) -> dict:
        return {
            "task_id": task_id, "reward": reward, "trial": 0,
            "info": {"task": {"user_id": user, "actions": [{"name": "book_ferry", "kwargs": {"user_id": user}}],
                              "instruction": f"You are {user}. You want {want}. You are reactive to the agent.",
                              "outputs": []},
                     "source": "user", "user_cost": 0.0021,
                     "reward_info": {"reward": reward, "info": {"r_actions": reward, "gt_data_hash": "ab12cd"},
                                     "actions": []}},
            "traj": [
                {"role": "system", "content": POLICY},
                {"role": "user", "content": f"Hi, I would like {want}."},
                {"role": "assistant", "content": None, "tool_calls": [_call("call_A", "get_user", {"id": user})]},
                {"role": "tool", "tool_call_id": "call_A", "name": "get_user", "content": "{\"name\": \"Mia Li\"}"},
                {"role": "assistant", "content": "I found your profile. Which day do you travel?"},
                {"role": "user", "content": "Tomorrow morning, please."},
                {"role": "assistant", "content": None, "tool_calls": [_call("call_A", "book_ferry", {"day": "tue"})]},
                {"role": "tool", "tool_call_id": "call_A", "name": "book_ferry", "content": "booked FX-12"},
                {"role": "assistant", "content": "Your ferry FX-12 is booked for tomorrow morning."},
                {"role": "user", "content": "Thanks! ###STOP###"},
            ],
        }
    return [run(0, 1.0, "mia_li_3668", "a one-way ferry to Seattle"),
            run(1, 0.0, "omar_sy_1234", "to cancel my ferry booking")]


TAU_BENCH_PROFILE = """\
profile: 1
name: tau-bench-trajectories
description: tau-bench historical_trajectories/*.json, a JSON array of runs
runs:
  each: record
  parts:
    conversation: traj
    scenario: info.task
    metrics: "{reward: reward, reward_info: info.reward_info}"
keys:
  metadata:
    run_id: "join('/', ['tau-bench', to_string(task_id), to_string(trial)])"
    scenario_id: "join('/', ['tau-bench', to_string(task_id)])"
  scenario: {description: instruction}
  conversation: {chat_role: role, content: content, tool_calls: tool_calls, call_id: tool_call_id}
values:
  chat_role:
    system: {kind: message, actor: system, visibility: private}
    user: {kind: message, actor: user}
    assistant: {kind: message, actor: assistant}
    tool: {kind: tool_result, actor: assistant, visibility: private}
agents: {from: actors, principal: user}
principals: {from: actors, match: [user], kind: person, name_key: info.task.user_id,
             objective_key: info.task.instruction}
visibility:
  - {when: {kind: message, actor: [user, assistant], recipient: none}, visibility: shared, recipients: all_others}
keep: {metadata: [info], conversation: [name]}
metrics:
  aggregate_score: reward
  principals:
    user: {score: reward, success: [{key: reward, equals: 1}]}
"""


def tau2_task(tid: str, purpose: str) -> dict:
    return {"id": tid, "description": {"purpose": purpose, "relevant_policies": None, "notes": None},
            "user_scenario": {"persona": "A hurried shop owner.",
                              "instructions": {"domain": "parcel", "reason_for_call": "Redirect parcel PK-4410.",
                                               "known_info": "Your sender code is SV-77.",
                                               "unknown_info": "You do not know the PIN.",
                                               "task_instructions": "Check the label when asked."}},
            "initial_state": None,
            "evaluation_criteria": {"actions": [], "nl_assertions": ["Agent verifies the sender."],
                                    "reward_basis": ["DB"]}}


def tau2_simulation(sid: str, task_id: str, reward: float) -> dict:
    return {
        "id": sid, "task_id": task_id, "timestamp": "2026-03-02T09:01:00", "start_time": "2026-03-02T09:00:00",
        "end_time": "2026-03-02T09:01:00", "duration": 60.0, "termination_reason": "user_stop",
        "agent_cost": 0.01, "user_cost": 0.002, "trial": 0, "seed": 4, "mode": "half_duplex",
        "reward_info": {"reward": reward, "db_check": {"db_match": reward == 1.0, "db_reward": reward},
                        "reward_basis": ["DB"], "reward_breakdown": {"DB": reward}, "info": None},
        "messages": [
            {"role": "assistant", "content": "Parcel desk, how can I help?", "turn_idx": 0,
             "timestamp": "2026-03-02T09:00:01"},
            {"role": "user", "content": "redirect PK-4410 to my shop pls", "turn_idx": 1,
             "timestamp": "2026-03-02T09:00:03"},
            {"role": "user", "content": None, "turn_idx": 2, "timestamp": "2026-03-02T09:00:05",
             "tool_calls": [{"id": "u-1", "name": "read_label", "arguments": {"field": "code"}, "requestor": "user"}]},
            {"role": "tool", "id": "u-1", "content": "SV-77", "requestor": "user", "error": False, "turn_idx": 3,
             "timestamp": "2026-03-02T09:00:06"},
            {"role": "assistant", "content": None, "turn_idx": 4, "timestamp": "2026-03-02T09:00:08",
             "tool_calls": [{"id": "a-1", "name": "redirect_parcel", "arguments": {"parcel": "PK-4410"},
                             "requestor": "assistant"}]},
            {"role": "tool", "id": "a-1", "content": "redirected", "requestor": "assistant", "error": False,
             "turn_idx": 5, "timestamp": "2026-03-02T09:00:09"},
            {"role": "assistant", "content": "Done, PK-4410 now goes to your shop.", "turn_idx": 6,
             "timestamp": "2026-03-02T09:00:10"},
            {"role": "user", "content": "great ###STOP###", "turn_idx": 7, "timestamp": "2026-03-02T09:00:12"},
        ],
    }


TAU2_INFO = {"git_commit": "0000abc", "num_trials": 1, "max_steps": 60,
             "user_info": {"implementation": "user_simulator", "llm": "sim-model-2"},
             "agent_info": {"implementation": "llm_agent", "llm": "desk-model-9"},
             "environment_info": {"domain_name": "parcel", "policy": "# Parcel policy\n\nVerify the sender first."}}


def tau2_results() -> dict:
    return {"timestamp": "2026-03-02T09:05:00", "info": TAU2_INFO,
            "tasks": [tau2_task("12", "The agent must verify the sender before a redirect."),
                      tau2_task("13", "The agent must refuse to waive storage fees.")],
            "simulations": [tau2_simulation("sim-a", "12", 1.0), tau2_simulation("sim-b", "13", 0.0),
                            tau2_simulation("sim-c", "12", 1.0)]}


TAU2_PROFILE = """\
profile: 1
name: tau2-results
description: a tau2-bench results file, simulations[] beside tasks[] (joined by task id) and info
runs:
  files: "*.json"
  each: record
  records: simulations
  parts: {conversation: messages, metrics: reward_info}
  join:
    scenario: {from: tasks, key: id, run_key: task_id}
    metadata: {from: info, as: info}
keys:
  metadata: {run_id: id, scenario_id: task_id, started_at: start_time, ended_at: end_time}
  scenario: {id: id, description: description.purpose}
  conversation: {chat_role: role, content: content, actor: requestor, ts: timestamp, turn: turn_idx,
                 tool_calls: tool_calls, call_id: id}
values:
  chat_role:
    system: {kind: message, actor: system, visibility: private}
    user: {kind: message, actor: user}
    assistant: {kind: message, actor: assistant}
    tool: {kind: tool_result, actor: agent, visibility: private}
agents: {from: actors, principal: user}
principals: {from: actors, match: [user], name: simulated user, kind: person}
visibility:
  - {when: {kind: message, actor: [user, assistant], recipient: none}, visibility: shared, recipients: all_others}
keep: {metadata: [info]}
metrics:
  aggregate_score: reward
  principals:
    user: {score: reward, success: [{key: reward, equals: 1}], metrics: [reward_breakdown]}
"""


def write_tau_bench(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tau_bench_runs(), indent=1))
    return path


def write_tau2_results(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tau2_results(), indent=1))
    return path


def write_tau2_dir(root: Path) -> Path:
    """tau2's "dir" storage: results.json (info, tasks) and simulations/<id>.json, one run each."""
    (root / "simulations").mkdir(parents=True, exist_ok=True)
    res = tau2_results()
    sims = res.pop("simulations")
    (root / "results.json").write_text(json.dumps(res, indent=1))
    for s in sims:
        (root / "simulations" / f"{s['id']}.json").write_text(json.dumps(s, indent=1))
    (root / "README.txt").write_text("tau2 results, dir storage\n")
    return root


def write_runs_jsonl(path: Path, truncated: bool = False) -> Path:
    """JSON Lines, one run a line: {episode, domain, messages[]} (a harness's own dump)."""
    lines = []
    for i, domain in enumerate(("retail", "airline", "retail")):
        lines.append(json.dumps({"episode": f"ep-{i}", "domain": domain, "score": i / 2,
                                 "messages": [{"from": "customer", "text": f"Order {i} has not arrived yet."},
                                              {"from": "helper", "text": f"I am sorry, order {i} ships today."}]}))
    text = "\n".join(lines) + "\n"
    if truncated:
        text += '{"episode": "ep-3", "messages": [{"from": "cust'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
