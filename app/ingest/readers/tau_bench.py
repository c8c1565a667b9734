"""tau-bench and tau2-bench trajectories (sierra-research/tau-bench, sierra-research/tau2-bench).

**tau-bench** (`--format tau-bench`): what ``run.py`` writes (and ``historical_trajectories/*.json``
holds): a JSON array of ``EnvRunResult``, many runs per file::

    [{"task_id": 0, "trial": 0, "reward": 1.0,
      "info": {"task": {"user_id", "instruction", "actions": [{name, kwargs}], "outputs"},
               "source", "user_cost", "reward_info": {"reward", "info": {r_actions|r_outputs, ...}, "actions"}}
               (or, for a run that crashed, {"error", "traceback"}),
      "traj": [OpenAI chat messages: system / user / assistant (+ tool_calls) / tool]}, ...]

One run per element, id ``tau-bench/<file stem>/<task_id>/<trial>``. The simulated user is the
principal ``user`` (named by ``task.user_id``; objective: the instruction) and speaks for itself;
the agent is ``assistant`` (the log's role name), acting for the user. ``user`` and ``assistant``
turns are shared messages between the two; the system prompt (the domain policy) is a private
message from ``system`` to the agent; tool calls and tool results are private to the agent (a
result is linked to its call by ``tool_call_id``). ReAct trajectories (``Thought: ... Action:
{...}`` and ``API output: ...`` turns) are split into the thought (a private log), the tool call
or the reply, and the tool result. The reward is the user's outcome (success when it is 1) and the
run's aggregate score; ``reward_info.info`` becomes the outcome's metrics; the expected actions
and outputs are kept in ``metadata.tau_bench``, declared in ``metadata.hidden_keys`` so that
blind mode keeps them from annotators (as tau2's evaluation criteria and reward details).

**tau2-bench** (`--format tau2-bench`): a ``Results`` document, ``{"timestamp", "info", "tasks":
[...], "simulations": [...]}`` (the "json" storage), or the "dir" storage: a folder holding
``results.json`` (info and tasks) and ``simulations/<id>.json`` (one ``SimulationRun`` each); a
single simulation file is read too (with the tasks of ``../results.json`` when it is there).
One run per simulation, id ``tau2/<simulation id>``. Messages are ``user`` / ``assistant`` /
``tool`` (tool calls carry a ``requestor``: the user may call tools too, on its own device) /
``multi_tool``; full-duplex runs store ``ticks`` instead, flattened as tau2's own
``get_messages`` does. The task's user scenario is the principal's objective, its purpose the
scenario description; ``reward_info`` gives the outcome and the checks (db, action, environment
and natural-language assertions, communicate checks: each a `checks` entry); an LLM ``review``
gives attributions (who, at which turn, why) as audits of source ``tau2-review``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item
from app.ingest.readers.base import NO, Reader, Sniff
from app.ingest.readers.builder import RunBuilder, as_text, load_json, peek_keys

USER = "user"
AGENT = "assistant"
#: run-metadata paths that hold the task's answers (expected actions and outputs, graded actions;
#: tau2's evaluation criteria and reward breakdown): hidden from annotators under blind mode
TAU1_HIDDEN = ("tau_bench.expected_actions", "tau_bench.expected_outputs", "tau_bench.graded_actions")
TAU2_HIDDEN = ("tau2.evaluation_criteria",)
_POLICY_HEAD = re.compile(r"^\s*#\s*([A-Za-z][\w -]*?)\s+agent policy", re.I)
_DOMAINS = ("airline", "retail", "telecom", "mock", "banking")


def _domain_from(system_text: str | None, stem: str) -> str:
    if system_text:
        m = _POLICY_HEAD.match(system_text)
        if m:
            return m.group(1).strip().lower().replace(" ", "-")
    low = stem.lower()
    for d in _DOMAINS:
        if d in low:
            return d
    return "unknown"


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


# ---------------------------------------------------------------------- tau-bench

_REACT_ACTION = re.compile(r"\n?\s*Action:\s*", re.S)
_API_OUTPUT = "API output: "
_TAU1_RECORD = {"task_id", "reward", "info", "traj", "trial"}
_TAU1_INFO = {"task", "source", "user_cost", "reward_info", "error", "traceback"}
_TAU1_TASK = {"user_id", "actions", "instruction", "outputs"}
_CHAT_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name"}


def _tau1_turns(b: RunBuilder, traj: list, where: str) -> None:
    pending_react: int | None = None  # the seq of a ReAct tool call awaiting its "API output"
    for i, m in enumerate(traj):
        at = f"{where}.traj[{i}]" if where else f"traj[{i}]"
        if not isinstance(m, dict):
            b.warn(f"{at}: a turn that is not an object ({type(m).__name__}); kept as a log event")
            b.event("log", "system", json.dumps(m, ensure_ascii=False), data={"raw": m})
            continue
        extra = b.check_keys(m, _CHAT_KEYS, at)
        role, content = m.get("role"), m.get("content")
        data: dict[str, Any] = {"turn": i, "extra": extra} if extra else {"turn": i}
        if role == "system":
            b.message("system", content, visibility="private", data=data)
        elif role == "user":
            text = as_text(content)
            if pending_react is not None and text and text.startswith(_API_OUTPUT):
                b.tool_result(AGENT, text, parent=pending_react, data=data)
                pending_react = None
            else:
                b.message(USER, content, to=[AGENT], data=data)
        elif role == "assistant":
            text = as_text(content)
            calls = m.get("tool_calls") or []
            react = None
            mt = _REACT_ACTION.search(text) if text and not calls else None
            if mt:
                thought, action = text[:mt.start()], text[mt.end():]
                try:
                    react = json.loads(action.strip())
                except ValueError:
                    react = None
                if isinstance(react, dict) and isinstance(react.get("name"), str):
                    # the agent's whole output (thought and action) is its private log; the
                    # reply or the tool call follows as its own event
                    b.thought(AGENT, text, data={**data, "react": "thought", "thought": thought.strip()})
                    arguments = react.get("arguments")
                    if react["name"] == "respond" and isinstance(arguments, dict) and "content" in arguments:
                        b.message(AGENT, arguments["content"], to=[USER], data={**data, "react": "respond"})
                    else:
                        pending_react = b.tool_call(AGENT, react["name"], arguments, data={**data, "react": "action"})
                    continue
            if text:
                b.message(AGENT, content, to=[USER], data=data)
            for j, c in enumerate(calls):
                if not isinstance(c, dict):
                    b.warn(f"{at}.tool_calls[{j}]: not an object; kept as a log event")
                    b.event("log", AGENT, json.dumps(c, ensure_ascii=False), data={"raw": c})
                    continue
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                cextra = b.check_keys(c, {"id", "type", "function"}, f"{at}.tool_calls[{j}]")
                b.tool_call(AGENT, fn.get("name"), _args(fn.get("arguments")), call_id=c.get("id"),
                            data=_clean({**data, "type": c.get("type"), "call_extra": cextra or None}))
        elif role == "tool":
            b.tool_result(AGENT, content, call_id=m.get("tool_call_id"), name=m.get("name"), data=data)
        else:
            b.warn(f"{at}.role: unknown role {role!r}; kept as a log event of 'system'")
            b.event("log", "system", content, data={**data, "role": role})


def tau1_record_to_item(rec: Any, stem: str, loc: Location) -> ImportItem:
    """One ``EnvRunResult`` as an ImportItem."""
    if not isinstance(rec, dict):
        return error_item(loc, f"a tau-bench result must be an object, got {type(rec).__name__}")
    traj = rec.get("traj")
    if not isinstance(traj, list) or not traj:
        return error_item(loc, "required: a non-empty list of chat messages (a run needs events)", field="traj")
    task_id, trial = rec.get("task_id"), rec.get("trial")
    info = rec.get("info") if isinstance(rec.get("info"), dict) else {}
    task = info.get("task") if isinstance(info.get("task"), dict) else {}
    system_text = next((as_text(m.get("content")) for m in traj if isinstance(m, dict) and m.get("role") == "system"),
                       None)
    domain = _domain_from(system_text, stem)
    b = RunBuilder(f"tau-bench/{stem}/{task_id}/{trial if trial is not None else 0}",
                   scenario=f"tau-bench/{domain}/{task_id}", family=domain,
                   title=f"tau-bench {domain} task {task_id}", default_principal=USER, source_format="tau-bench")
    extra = _clean({"record": b.check_keys(rec, _TAU1_RECORD, "", kept="metadata.tau_bench.extra") or None,
                    "info": b.check_keys(info, _TAU1_INFO, "info", kept="metadata.tau_bench.extra") or None,
                    "task": b.check_keys(task, _TAU1_TASK, "info.task", kept="metadata.tau_bench.extra") or None})
    b.principal(USER, name=task.get("user_id") if isinstance(task.get("user_id"), str) else "simulated user",
                objective=task.get("instruction") if isinstance(task.get("instruction"), str) else None,
                metadata={"simulated": True, "user_id": task.get("user_id")})
    b.agent(AGENT, principal=USER, role=f"{domain} agent" if domain != "unknown" else "agent")
    _tau1_turns(b, traj, "")
    if info.get("error") is not None:
        b.status = "error"
        text = as_text(info.get("error"))
        if info.get("traceback"):
            text = f"{text}\n{as_text(info.get('traceback'))}"
        b.event("log", "system", text, data={"error": info.get("error"), "traceback": info.get("traceback")})
    reward = rec.get("reward")
    reward_info = info.get("reward_info") if isinstance(info.get("reward_info"), dict) else {}
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        b.aggregate_score = float(reward)
        metrics = reward_info.get("info") if isinstance(reward_info.get("info"), dict) else {}
        b.outcome(USER, success=reward >= 1.0, score=float(reward), metrics=dict(metrics))
    b.metadata["tau_bench"] = _clean({"task_id": task_id, "trial": trial, "source": info.get("source"),
                                      "user_cost": info.get("user_cost"), "domain": domain,
                                      "expected_actions": task.get("actions"), "expected_outputs": task.get("outputs"),
                                      "graded_actions": reward_info.get("actions"), "extra": extra or None})
    # the task's answers, hidden from annotators while labels are blind (app.annotations.blind)
    b.metadata["hidden_keys"] = list(TAU1_HIDDEN)
    return b.item(loc)


def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


class TauBenchReader(Reader):
    name = "tau-bench"
    description = "tau-bench results (historical_trajectories/*.json, run.py checkpoints): many runs per file"

    def sniff(self, path: Path) -> Sniff:
        if not path.is_file():
            return NO
        keys = peek_keys(path)
        if {"traj", "task_id", "reward"} <= keys:
            return Sniff(0.95, "records with traj, task_id and reward (tau-bench EnvRunResult)")
        if {"traj", "info"} <= keys:
            return Sniff(0.6, "records with traj and info (tau-bench-like)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        doc, err = load_json(path, shown)
        if err is not None:
            yield err
            return
        stem = Path(shown).stem
        if isinstance(doc, dict):
            yield tau1_record_to_item(doc, stem, Location(shown))
            return
        if not isinstance(doc, list):
            yield error_item(Location(shown), "a tau-bench results file is a JSON array of run results")
            return
        for i, rec in enumerate(doc):
            yield tau1_record_to_item(rec, stem, Location(shown, pointer=f"[{i}]"))


# ---------------------------------------------------------------------- tau2-bench

_T2_SIM = {"id", "task_id", "timestamp", "start_time", "end_time", "duration", "termination_reason", "agent_cost",
           "user_cost", "agent_usage", "reward_info", "messages", "ticks", "trial", "seed", "mode",
           "speech_environment", "review", "user_only_review", "info", "auth_classification",
           "hallucination_retries_used", "hallucination_check", "provider_session_id", "policy", "effect_timeline"}
#: message keys that carry no text of their own (ids, numbers, flags, audio metadata) or are mapped
_T2_MSG = {"role", "content", "tool_calls", "turn_idx", "timestamp", "cost", "usage", "raw_data",
           "generation_time_seconds", "is_audio", "audio_format", "audio_content", "audio_path", "speech_effects",
           "source_effects", "channel_effects", "turn_taking_action", "utterance_ids", "chunk_id", "is_final_chunk",
           "source", "contains_speech", "id", "requestor", "error", "tool_messages", "audio_script_gold"}
_STATUS = {"user_stop": "completed", "agent_stop": "completed", "max_steps": "timeout", "timeout": "timeout",
           "too_many_errors": "failed"}


def _t2_messages(sim: dict) -> list:
    msgs = sim.get("messages")
    if isinstance(msgs, list):
        return msgs
    out: list = []
    for tick in sim.get("ticks") or []:
        if not isinstance(tick, dict):
            continue
        for who, role in (("agent", "assistant"), ("user", "user")):
            chunk = tick.get(f"{who}_chunk") if isinstance(tick.get(f"{who}_chunk"), dict) else None
            calls = tick.get(f"{who}_tool_calls") or []
            if (chunk and chunk.get("content")) or calls:
                msg = dict(chunk or {"role": role})
                msg["role"] = role
                msg["tool_calls"] = calls or None
                msg.setdefault("timestamp", tick.get("timestamp"))
                out.append(msg)
            out.extend(r for r in tick.get(f"{who}_tool_results") or [] if isinstance(r, dict))
    return out


def _t2_objective(task: dict) -> str | None:
    scen = task.get("user_scenario") if isinstance(task.get("user_scenario"), dict) else {}
    parts = []
    if scen.get("persona"):
        parts.append(f"Persona: {as_text(scen['persona'])}")
    ins = scen.get("instructions")
    if isinstance(ins, dict):
        for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions"):
            if ins.get(k):
                parts.append(f"{k.replace('_', ' ').capitalize()}: {as_text(ins[k])}")
    elif ins:
        parts.append(as_text(ins) or "")
    return "\n\n".join(parts) or None


def _t2_description(task: dict) -> str | None:
    d = task.get("description")
    parts = []
    if isinstance(d, dict):
        parts = [f"{k.replace('_', ' ').capitalize()}: {as_text(d[k])}" for k in ("purpose", "relevant_policies", "notes")
                 if d.get(k)]
    elif d:
        parts = [as_text(d) or ""]
    if task.get("ticket"):
        parts.append(f"Ticket: {as_text(task['ticket'])}")
    return "\n\n".join(parts) or None


_T2_TASK = {"id", "description", "user_scenario", "ticket", "initial_state", "evaluation_criteria"}


def _t2_task_keys(b: RunBuilder, task: dict) -> None:
    """Warn for the task's keys (and its user scenario's) that carry text this reader maps to nothing."""
    extra = b.check_keys(task, _T2_TASK, "task", kept="metadata.tau2.task_extra")
    if extra:
        b.metadata.setdefault("tau2", {})["task_extra"] = extra
    scen = task.get("user_scenario") if isinstance(task.get("user_scenario"), dict) else {}
    b.check_keys(scen, {"persona", "instructions"}, "task.user_scenario", kept="metadata.tau2.task (not shown)")
    ins = scen.get("instructions")
    if isinstance(ins, dict):
        b.check_keys(ins, {"domain", "reason_for_call", "known_info", "unknown_info", "task_instructions"},
                     "task.user_scenario.instructions", kept="metadata.tau2.task (not shown)")


def tau2_sim_to_item(sim: Any, tasks: dict[str, dict], info: dict, loc: Location, head: Any = None) -> ImportItem:
    """One ``SimulationRun`` as an ImportItem; `tasks` by id, `info` and `head` (the Results
    document or results.json, for its timestamp and other keys) from the results."""
    if not isinstance(sim, dict):
        return error_item(loc, f"a tau2-bench simulation must be an object, got {type(sim).__name__}")
    sid = sim.get("id")
    if not isinstance(sid, str) or not sid:
        return error_item(loc, "required: the simulation's id", field="id")
    task_id = str(sim.get("task_id"))
    task = tasks.get(task_id, {})
    env = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
    agent_info = info.get("agent_info") if isinstance(info.get("agent_info"), dict) else {}
    user_info = info.get("user_info") if isinstance(info.get("user_info"), dict) else {}
    domain = env.get("domain_name") if isinstance(env.get("domain_name"), str) else None
    if domain is None:
        scen = task.get("user_scenario") if isinstance(task.get("user_scenario"), dict) else {}
        ins = scen.get("instructions") if isinstance(scen.get("instructions"), dict) else {}
        domain = ins.get("domain") if isinstance(ins.get("domain"), str) else "unknown"
    b = RunBuilder(f"tau2/{sid}", scenario=f"tau2/{domain}/{task_id}", family=domain,
                   title=f"tau2-bench {domain} task {task_id}", description=_t2_description(task),
                   default_principal=USER, source_format="tau2-bench")
    sim_extra = b.check_keys(sim, _T2_SIM, "", kept="metadata.tau2.extra")
    _t2_task_keys(b, task)
    header: dict[str, Any] = {}
    if isinstance(head, dict):
        header = b.check_keys(head, {"timestamp", "info", "tasks", "simulations", "simulation_index"}, "results",
                               kept="metadata.tau2.results")
        header["timestamp"] = head.get("timestamp")
    header["info"] = {k: v for k, v in info.items() if k not in ("user_info", "agent_info", "environment_info")}
    b.principal(USER, name="simulated user", objective=_t2_objective(task),
                metadata=_clean({"simulated": True, "implementation": user_info.get("implementation"),
                                 "model": user_info.get("llm")}))
    policy = sim.get("policy") or env.get("policy")
    b.agent(AGENT, principal=USER, role=agent_info.get("implementation") or "agent", model=agent_info.get("llm"),
            private_state={"policy": policy} if policy else None)
    b.started_at, b.ended_at = sim.get("start_time"), sim.get("end_time")
    turn_seq: dict[int, int] = {}
    for i, m in enumerate(_t2_messages(sim)):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            b.warn(f"{at}: not an object; kept as a log event")
            b.event("log", "system", json.dumps(m, ensure_ascii=False))
            continue
        extra = b.check_keys(m, _T2_MSG, at)
        role, ts = m.get("role"), m.get("timestamp")
        data = _clean({"turn_idx": m.get("turn_idx"), "cost": m.get("cost"), "usage": m.get("usage"),
                       "raw_data": m.get("raw_data"), "extra": extra or None})
        text = None if m.get("is_audio") else m.get("content")
        if m.get("is_audio") and m.get("content"):
            b.note(f"{at}: audio content (base64) not stored as text")
        first = len(b.events)
        if role == "system":
            b.message("system", text, visibility="private", ts=ts, data=data)
        elif role in ("user", "assistant"):
            who, other = (USER, AGENT) if role == "user" else (AGENT, USER)
            if as_text(text):
                b.message(who, text, to=[other], ts=ts, data=data)
            for j, c in enumerate(m.get("tool_calls") or []):
                if not isinstance(c, dict):
                    b.warn(f"{at}.tool_calls[{j}]: not an object; skipped")
                    continue
                cextra = b.check_keys(c, {"id", "name", "arguments", "requestor"}, f"{at}.tool_calls[{j}]")
                caller = USER if c.get("requestor") == "user" else who
                b.tool_call(caller, c.get("name"), c.get("arguments"), call_id=c.get("id") or None, ts=ts,
                            data=_clean({**data, "requestor": c.get("requestor"), "call_extra": cextra or None}))
        elif role == "tool":
            results = m.get("tool_messages") if isinstance(m.get("tool_messages"), list) else [m]
            for r in results:
                if not isinstance(r, dict):
                    continue
                caller = USER if r.get("requestor") == "user" else AGENT
                b.tool_result(caller, r.get("content"), call_id=r.get("id") or None, is_error=bool(r.get("error")),
                              ts=r.get("timestamp") or ts, data=data)
        else:
            b.warn(f"{at}.role: unknown role {role!r}; kept as a log event of 'system'")
            b.event("log", "system", text, ts=ts, data={**data, "role": role})
        if isinstance(m.get("turn_idx"), int) and len(b.events) > first:
            turn_seq.setdefault(m["turn_idx"], first)
    if not b.events:
        ticks = sim.get("ticks") if isinstance(sim.get("ticks"), list) else None
        why = (f"its {len(ticks)} ticks carry no text, tool call or tool result (audio only, or stripped)"
               if ticks else "no messages")
        return error_item(loc, f"the simulation has nothing to import: {why}", run_id=b.run_id, field="messages")
    reason = sim.get("termination_reason")
    b.status = _STATUS.get(reason, "error") if isinstance(reason, str) else None
    _t2_reward(b, sim.get("reward_info"))
    _t2_review(b, sim.get("review"), turn_seq, "tau2-review")
    _t2_review(b, sim.get("user_only_review"), turn_seq, "tau2-user-review")
    b.metadata.setdefault("tau2", {}).update(_clean({"simulation_id": sid, "task_id": task_id, "trial": sim.get("trial"),
                                 "seed": sim.get("seed"), "mode": sim.get("mode"), "termination_reason": reason,
                                 "duration": sim.get("duration"), "agent_cost": sim.get("agent_cost"),
                                 "user_cost": sim.get("user_cost"), "domain": domain,
                                 "evaluation_criteria": task.get("evaluation_criteria"),
                                 "initial_state": task.get("initial_state"), "info": sim.get("info"),
                                 "user_info": user_info or None, "agent_info": agent_info or None,
                                 "environment": {k: v for k, v in env.items() if k != "policy"} or None,
                                 "results": header, "extra": sim_extra or None}))
    b.metadata["hidden_keys"] = list(TAU2_HIDDEN)
    return b.item(loc)


def _t2_reward(b: RunBuilder, ri: Any) -> None:
    if not isinstance(ri, dict):
        return
    extra = b.check_keys(ri, {"reward", "db_check", "env_assertions", "action_checks", "nl_assertions",
                              "communicate_checks", "reward_basis", "reward_breakdown", "info"}, "reward_info",
                         kept="the outcome's metrics")
    reward = ri.get("reward")
    metrics = _clean({"reward_basis": ri.get("reward_basis"), "reward_breakdown": ri.get("reward_breakdown"),
                      "info": ri.get("info"), "extra": extra or None})
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        b.aggregate_score = float(reward)
        b.outcome(USER, success=reward >= 1.0, score=float(reward), metrics=metrics)
    src = "tau2-evaluator"
    db = ri.get("db_check")
    if isinstance(db, dict):
        b.check(src, "db_match", db.get("db_match"), level="L0", agent=AGENT, metadata={"db_reward": db.get("db_reward")})
    for c in ri.get("action_checks") or []:
        if isinstance(c, dict):
            act = c.get("action") if isinstance(c.get("action"), dict) else {}
            b.check(src, f"action:{act.get('name')}", c.get("action_match"), level="L0",
                    agent=USER if act.get("requestor") == "user" else AGENT,
                    detail=json.dumps(act.get("arguments"), ensure_ascii=False, sort_keys=True),
                    metadata=_clean({"action": act, "action_reward": c.get("action_reward"), "tool_type": c.get("tool_type")}))
    for c in ri.get("env_assertions") or []:
        if isinstance(c, dict):
            ea = c.get("env_assertion") if isinstance(c.get("env_assertion"), dict) else {}
            b.check(src, f"env:{ea.get('func_name')}", c.get("met"), level="L0", detail=as_text(ea.get("message")),
                    metadata={"env_assertion": ea, "reward": c.get("reward")})
    for c in ri.get("nl_assertions") or []:
        if isinstance(c, dict):
            b.check(src, f"nl:{as_text(c.get('nl_assertion'))}"[:300], c.get("met"), level="L2", agent=AGENT,
                    detail=as_text(c.get("justification")), metadata={"nl_assertion": c.get("nl_assertion")})
    for c in ri.get("communicate_checks") or []:
        if isinstance(c, dict):
            b.check(src, f"communicate:{as_text(c.get('info'))}"[:300], c.get("met"), level="L1", agent=AGENT,
                    detail=as_text(c.get("justification")), metadata={"info": c.get("info")})


def _t2_review(b: RunBuilder, review: Any, turn_seq: dict[int, int], source: str) -> None:
    if not isinstance(review, dict):
        return
    rextra = b.check_keys(review, {"summary", "agent_error", "user_error", "critical_user_error", "has_errors", "errors",
                                   "cost"}, source, kept=f"metadata.{source}_extra")
    if rextra:
        b.metadata[f"{source}_extra"] = rextra
    if review.get("summary"):
        b.check(source, "review", not review.get("has_errors"), level="L2", detail=as_text(review.get("summary")),
                metadata=_clean({k: review.get(k) for k in ("agent_error", "user_error", "critical_user_error")}))
    for i, e in enumerate(review.get("errors") or []):
        if not isinstance(e, dict):
            continue
        eextra = b.check_keys(e, {"source", "error_type", "error_tags", "severity", "turn_idx", "tick_start", "tick_end",
                                  "reasoning", "correct_behavior", "user_message"}, f"{source}.errors[{i}]",
                              kept="the label's metadata")
        who = USER if e.get("source") == "user" or source == "tau2-user-review" else AGENT
        seq = turn_seq.get(e.get("turn_idx")) if isinstance(e.get("turn_idx"), int) else None
        note = "\n".join(t for t in (as_text(e.get("reasoning")),
                                     e.get("correct_behavior") and f"Correct behavior: {as_text(e['correct_behavior'])}",
                                     e.get("user_message") and f"User message: {as_text(e['user_message'])}") if t)
        meta = _clean({"error_type": e.get("error_type"), "error_tags": e.get("error_tags"),
                       "severity": e.get("severity"), "user_message": e.get("user_message"), "turn_idx": e.get("turn_idx"),
                       "extra": eextra or None})
        if seq is None:
            b.check(source, f"error:{e.get('error_type') or i}", False, level="L2", agent=who, detail=note, metadata=meta)
        else:
            b.label(source, mode=None, agent=who, evidence=[seq], level="L2", note=note, metadata=meta)


def _tasks_of(doc: Any) -> dict[str, dict]:
    tasks = doc.get("tasks") if isinstance(doc, dict) else None
    return {str(t.get("id")): t for t in tasks or [] if isinstance(t, dict)}


class Tau2BenchReader(Reader):
    name = "tau2-bench"
    description = "tau2-bench results: results.json with simulations[] beside tasks[], or the dir storage"
    reads_dirs = True

    def sniff(self, path: Path) -> Sniff:
        if path.is_dir():
            if (path / "results.json").is_file() and (path / "simulations").is_dir():
                return Sniff(0.9, "results.json beside simulations/ (tau2-bench dir storage)")
            return NO
        if not path.is_file():
            return NO
        keys = peek_keys(path, first_record=False)
        if {"simulations", "tasks", "info"} <= keys:
            return Sniff(0.95, "simulations[] beside tasks[] and info (tau2-bench Results)")
        if {"termination_reason", "task_id", "id"} <= keys and keys & {"messages", "ticks"}:
            return Sniff(0.85, "one simulation run (id, task_id, termination_reason, messages/ticks)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        if path.is_dir():
            head, err = load_json(path / "results.json", f"{shown}/results.json")
            if err is not None:
                yield err
                return
            tasks, info = _tasks_of(head), head.get("info") if isinstance(head, dict) else {}
            sims = list(head.get("simulations") or []) if isinstance(head, dict) else []
            for i, sim in enumerate(sims):
                yield tau2_sim_to_item(sim, tasks, info or {}, Location(f"{shown}/results.json", pointer=f"simulations[{i}]"),
                                       head)
            for f in sorted((path / "simulations").glob("*.json")):
                name = f"{shown}/simulations/{f.name}"
                sim, err = load_json(f, name)
                yield err if err is not None else tau2_sim_to_item(sim, tasks, info or {}, Location(name), head)
            return
        doc, err = load_json(path, shown)
        if err is not None:
            yield err
            return
        if isinstance(doc, dict) and "simulations" in doc:
            tasks, info = _tasks_of(doc), doc.get("info") if isinstance(doc.get("info"), dict) else {}
            sims = doc.get("simulations")
            if not isinstance(sims, list):
                yield error_item(Location(shown), "simulations: expected a list of simulation runs", field="simulations")
                return
            for i, sim in enumerate(sims):
                yield tau2_sim_to_item(sim, tasks, info, Location(shown, pointer=f"simulations[{i}]"), doc)
            return
        tasks, info, head = {}, {}, None
        results = path.parent.parent / "results.json" if path.parent.name == "simulations" else None
        if results is not None and results.is_file():
            head, err = load_json(results, str(results))
            if err is None and isinstance(head, dict):
                tasks, info = _tasks_of(head), head.get("info") if isinstance(head.get("info"), dict) else {}
            else:
                head = None
        yield tau2_sim_to_item(doc, tasks, info, Location(shown), head)
