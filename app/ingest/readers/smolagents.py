"""smolagents memory steps (huggingface/smolagents, ``smolagents.memory``).

Input: what ``agent.run(..., return_full_result=True).dict()`` gives, ``{"output", "state",
"steps": [...], "token_usage", "timing"}``, or a plain step list (``agent.memory.get_full_steps()``
or ``get_succinct_steps()``); one JSON document per file (a JSON array of RunResults, or JSON
Lines of them, give one run each). Steps carry no type; they are told apart by their keys, as
``smolagents.memory`` writes them:

* ``SystemPromptStep`` (``system_prompt``): the agent's private state (``system_prompt``);
* ``TaskStep`` (``task``): a shared message from the principal ``user`` to the agent (the first
  task is the user's objective);
* ``PlanningStep`` (``plan``, ``model_output_message``): a private log of the agent (the plan);
* ``ActionStep`` (``step_number``): the model output (thought and code) is a private log; each
  ``tool_calls`` entry (``{id, type, function: {name, arguments}}``; a CodeAgent's call is
  ``python_interpreter`` with the code) a private tool call; ``observations`` the private tool
  result, linked to the step's (last) call; ``error`` (``{type, message}``) that call's result,
  marked ``is_error`` (a private log when the step made no call); a step
  with ``is_final_answer`` ends with the answer (``action_output``) as a shared message to the user;
* ``FinalAnswerStep`` (``output``): that answer, unless an action step already gave it.

Times are the steps' ``timing.start_time`` / ``end_time`` (epoch seconds). The agent is named
by a ``name`` / ``agent_name`` key of the document when there is one, else ``agent``. ``state``
``max_steps_error`` makes the run ``failed``; ``model_input_messages`` (the prompt history, a
copy of earlier texts) and token usage stay in ``data``.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item
from app.ingest.readers.base import NO, Reader, Sniff
from app.ingest.readers.builder import RunBuilder, as_text, load_json_or_lines, peek_text

USER = "user"
_ACTION = {"step_number", "timing", "model_input_messages", "tool_calls", "error", "model_output_message",
           "model_output", "code_action", "observations", "observations_images", "action_output", "token_usage",
           "is_final_answer"}
_PLANNING = {"model_input_messages", "model_output_message", "plan", "timing", "token_usage"}
_RESULT = {"output", "state", "steps", "token_usage", "timing", "name", "agent_name", "messages"}


def _kind(step: dict) -> str | None:
    if "step_number" in step:
        return "action"
    if "plan" in step:
        return "planning"
    if "task" in step:
        return "task"
    if "system_prompt" in step:
        return "system"
    if set(step) == {"output"}:
        return "final"
    return None


def _ts(timing: Any, key: str) -> float | None:
    v = timing.get(key) if isinstance(timing, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def steps_to_item(steps: list, stem: str, loc: Location, result: dict | None = None) -> ImportItem:
    result = result or {}
    name = next((result[k] for k in ("name", "agent_name") if isinstance(result.get(k), str) and result[k]), "agent")
    b = RunBuilder(f"smolagents/{stem}", scenario=f"smolagents/{stem}", family="smolagents", default_principal=USER,
                   source_format="smolagents")
    b.principal(USER, name="user")
    agent = b.agent(name, principal=USER, role="agent")
    if result:
        extra = b.check_keys(result, _RESULT, "result", kept="metadata.smolagents")
        b.metadata["smolagents"] = {k: v for k, v in {"state": result.get("state"), "token_usage": result.get("token_usage"),
                                                       "timing": result.get("timing"), "extra": extra or None}.items()
                                    if v is not None}
        if result.get("state") == "max_steps_error":
            b.status = "failed"
    answered = False
    for i, step in enumerate(steps):
        at = f"steps[{i}]"
        if not isinstance(step, dict):
            b.warn(f"{at}: not an object; kept as a log event")
            b.thought(agent, json.dumps(step, ensure_ascii=False, default=str))
            continue
        kind = _kind(step)
        timing = step.get("timing")
        start, end = _ts(timing, "start_time"), _ts(timing, "end_time")
        base: dict[str, Any] = {"step": kind, "timing": timing, "token_usage": step.get("token_usage")}
        base = {k: v for k, v in base.items() if v is not None}
        if kind == "system":
            b.check_keys(step, {"system_prompt"}, at)
            b.agents[agent].setdefault("private_state", {})["system_prompt"] = step.get("system_prompt")
        elif kind == "task":
            ex = b.check_keys(step, {"task", "task_images"}, at)
            p = b.principals[USER]
            if p.get("objective") is None:
                p["objective"] = as_text(step.get("task"))
            data = {**base, "extra": ex} if ex else dict(base)
            if step.get("task_images"):
                data["task_images"] = step["task_images"]
            b.message(USER, step.get("task"), to=[agent], ts=start, data=data)
        elif kind == "planning":
            ex = b.check_keys(step, _PLANNING, at)
            b.thought(agent, step.get("plan") or as_text((step.get("model_output_message") or {}).get("content")),
                      ts=start, data={**base, "model_output_message": step.get("model_output_message"),
                                      "model_input_messages": step.get("model_input_messages"), **({"extra": ex} if ex else {})})
        elif kind == "action":
            ex = b.check_keys(step, _ACTION, at)
            data = {**base, "step_number": step.get("step_number"), **({"extra": ex} if ex else {})}
            if step.get("action_output") is not None and not step.get("is_final_answer"):
                data["action_output"] = step["action_output"]
            out = step.get("model_output")
            if out is None and isinstance(step.get("model_output_message"), dict):
                out = step["model_output_message"].get("content")
            if as_text(out):
                b.thought(agent, out, ts=start, data={**data, "model_output_message": step.get("model_output_message"),
                                                      "model_input_messages": step.get("model_input_messages")})
            last_call = None
            for j, c in enumerate(step.get("tool_calls") or []):
                if not isinstance(c, dict):
                    b.warn(f"{at}.tool_calls[{j}]: not an object; kept as a log event")
                    b.thought(agent, as_text(c), ts=start, data=data)
                    continue
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                args = fn.get("arguments")
                if isinstance(args, str) and fn.get("name") != "python_interpreter":
                    try:
                        args = json.loads(args)
                    except ValueError:
                        pass
                content = args if fn.get("name") == "python_interpreter" and isinstance(args, str) else None
                last_call = b.tool_call(agent, fn.get("name"), args, call_id=c.get("id"), content=content, ts=start,
                                        data={**data, "type": c.get("type"), "code_action": step.get("code_action")})
            if step.get("code_action") and last_call is None:
                last_call = b.tool_call(agent, "python_interpreter", step["code_action"], content=step["code_action"],
                                        ts=start, data=data)
            if step.get("observations") is not None or step.get("observations_images"):
                d = dict(data)
                if step.get("observations_images"):
                    d["observations_images"] = step["observations_images"]
                b.tool_result(agent, step.get("observations") or "[images]", parent=last_call, ts=end, data=d)
            err = step.get("error")
            if isinstance(err, (dict, str)):
                text = as_text(err.get("message")) if isinstance(err, dict) else err
                text = f"error ({err.get('type') if isinstance(err, dict) else 'error'}): {text}"
                if last_call is not None and step.get("observations") is None:  # the call failed: its result
                    b.tool_result(agent, text, parent=last_call, is_error=True, ts=end, data={**data, "error": err})
                else:
                    b.thought(agent, text, ts=end, data={**data, "error": err})
            if step.get("is_final_answer"):
                b.message(agent, as_text(step.get("action_output")), to=[USER], ts=end,
                          data={**data, "final_answer": True})
                answered = True
        elif kind == "final":
            if not answered:
                b.message(agent, as_text(step.get("output")), to=[USER], data={"step": "final", "final_answer": True})
                answered = True
        else:
            b.warn(f"{at}: a step of no known kind (keys {sorted(step)[:6]}); kept as a log event")
            b.thought(agent, json.dumps(step, ensure_ascii=False, default=str)[:4000], data={"step": step})
    if result.get("output") is not None and not answered:
        b.message(agent, as_text(result.get("output")), to=[USER], data={"final_answer": True})
    return b.item(loc, order_by_time=False)


def _looks_like_steps(doc: Any) -> bool:
    return isinstance(doc, list) and any(isinstance(s, dict) and _kind(s) in ("action", "planning", "task") for s in doc)


class SmolagentsReader(Reader):
    name = "smolagents"
    description = "smolagents memory steps: RunResult.dict() (output, state, steps) or memory.get_full_steps()"

    def sniff(self, path: Path) -> Sniff:
        if not path.is_file():
            return NO
        head = peek_text(path)
        if '"step_number"' in head and ('"model_output"' in head or '"observations"' in head or '"tool_calls"' in head):
            return Sniff(0.9, "memory steps (step_number, model_output / observations)")
        if '"steps"' in head and '"state"' in head and ('"task"' in head or '"system_prompt"' in head):
            return Sniff(0.8, "a RunResult (output, state, steps)")
        return NO

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        stem = Path(shown).stem
        recs = list(load_json_or_lines(path, shown))
        docs = [r for r in recs if not isinstance(r, ImportItem)]
        yield from (r for r in recs if isinstance(r, ImportItem))
        flat = [d for d, _ in docs]
        if flat and all(isinstance(d, dict) and "steps" not in d for d in flat) and _looks_like_steps(flat):
            yield steps_to_item(flat, stem, Location(shown))
            return
        results = [(d, loc) for d, loc in docs]
        for n, (d, loc) in enumerate(results):
            rid = stem if len(results) == 1 else f"{stem}/{n}"
            if isinstance(d, dict) and isinstance(d.get("steps"), list):
                yield steps_to_item(d["steps"], rid, loc, d)
            else:
                yield error_item(loc, "neither a smolagents RunResult ({output, state, steps}) nor a list of memory steps")
