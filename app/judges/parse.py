"""The judge's answer, a public contract (shared spec interfaces.md, "Judge answers"). Pure.

`extract_json` finds the one JSON object in a model's text (tolerant: code fences and text around
it are ignored). The shape checks raise :class:`AnswerError` when the answer is not the contract's
shape (the runner retries once, showing the model this message). What is well-formed but wrong
for the run is *dropped and reported* in ``problems``, never kept as if valid:

* a label whose mode is not in the taxonomy (or not among the judge's modes);
* a label whose agent is not an agent of the run (per-agent: not the agent asked about);
* an evidence seq that is no event of the run (the label stays with its other evidence).

Extra keys are ignored. Mode codes match case-insensitively; seqs may be written as ``12``,
``"12"`` or ``"#12"``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


class AnswerError(ValueError):
    """The answer is not the contract's JSON object; the message says what is wrong."""


@dataclass
class RunFacts:
    """What an answer is checked against: mode codes, agent ids, event seqs (and their actors)."""

    modes: list[str]
    agents: list[str]
    seqs: set[int]
    actor_of: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._mode = {m.upper(): m for m in self.modes}

    def mode(self, code: Any) -> str | None:
        return self._mode.get(code.strip().upper()) if isinstance(code, str) else None


def extract_json(text: str | None) -> dict[str, Any]:
    """The JSON object in `text`; raises AnswerError saying why there is none."""
    if text is None or not str(text).strip():
        raise AnswerError("the answer is empty")
    s = str(text).strip()
    candidates = [s]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(s)]
    first = s.find("{")
    if first >= 0:
        candidates.append(s[first:s.rfind("}") + 1] if s.rfind("}") > first else s[first:])
    last_err = None
    for c in candidates:
        try:
            value = json.loads(c)
        except ValueError as exc:
            last_err = exc
            continue
        if isinstance(value, dict):
            return value
        last_err = ValueError(f"a JSON {type(value).__name__}, not an object")
    if first >= 0:  # one object followed by more text: decode the first
        try:
            value, _ = json.JSONDecoder().raw_decode(s[first:])
            if isinstance(value, dict):
                return value
        except ValueError as exc:
            last_err = exc
    if first < 0:
        if isinstance(last_err, ValueError) and "not an object" in str(last_err):
            raise AnswerError(f"the answer is {last_err}")
        raise AnswerError("no JSON object found in the answer")
    raise AnswerError(f"the JSON object could not be read: {last_err}")


def _seq(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*#?\d{1,12}\s*", value):
        return int(value.strip().lstrip("#"))
    return None


def _evidence(raw: Any, facts: RunFacts, where: str, problems: list[str]) -> list[int]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raw = [raw]
    out: list[int] = []
    for v in raw:
        s = _seq(v)
        if s is None:
            problems.append(f"{where}: evidence {v!r} is not a seq; dropped")
        elif s not in facts.seqs:
            problems.append(f"{where}: evidence #{s} is no event of the run; dropped")
        elif s not in out:
            out.append(s)
    return sorted(out)


def _text(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


def parse_labels(obj: dict[str, Any], facts: RunFacts, *, only_agent: str | None = None,
                 allowed_modes: Iterable[str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """A run or per-agent answer -> ``({"verdict", "labels": [{mode, agent, evidence, rationale}]}, problems)``."""
    verdict = obj.get("verdict")
    if verdict not in ("failure", "no_failure"):
        raise AnswerError(f'"verdict" must be "failure" or "no_failure", got {verdict!r}')
    labels = obj.get("labels", [])
    if labels is None:
        labels = []
    if not isinstance(labels, list):
        raise AnswerError(f'"labels" must be a list, got {type(labels).__name__}')
    allowed = {m.upper() for m in allowed_modes} if allowed_modes else None
    problems: list[str] = []
    if verdict == "no_failure" and labels:
        problems.append(f'verdict "no_failure" with {len(labels)} label(s): the labels were judged')
    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for i, lab in enumerate(labels):
        where = f"labels[{i}]"
        if not isinstance(lab, dict):
            problems.append(f"{where}: not an object; dropped")
            continue
        mode = facts.mode(lab.get("mode"))
        if mode is None or (allowed is not None and mode.upper() not in allowed):
            problems.append(f"{where}: unknown mode {lab.get('mode')!r}; dropped")
            continue
        agent = lab.get("agent")
        if not isinstance(agent, str) or agent not in facts.agents:
            problems.append(f"{where}: agent {agent!r} is not an agent of the run; dropped")
            continue
        if only_agent is not None and agent != only_agent:
            problems.append(f"{where}: agent {agent!r} is not the agent asked about ({only_agent}); dropped")
            continue
        ev = _evidence(lab.get("evidence"), facts, where, problems)
        key = (mode, agent)
        if key in seen:  # the same failure twice: one label, evidence merged
            seen[key]["evidence"] = sorted(set(seen[key]["evidence"]) | set(ev))
            continue
        seen[key] = {"mode": mode, "agent": agent, "evidence": ev, "rationale": _text(lab.get("rationale"))}
        out.append(seen[key])
    if verdict == "failure" and not out:
        problems.append('verdict "failure" but no valid label: stored as no failure found')
    return {"verdict": "failure" if out else "no_failure", "labels": out}, problems


def parse_present(obj: dict[str, Any], facts: RunFacts, mode: str) -> tuple[dict[str, Any], list[str]]:
    """A per-mode answer -> ``({"present", "labels": [...]}, problems)`` (one label when present)."""
    present = obj.get("present")
    if not isinstance(present, bool):
        raise AnswerError(f'"present" must be true or false, got {present!r}')
    problems: list[str] = []
    if not present:
        return {"present": False, "labels": []}, problems
    agent = obj.get("agent")
    where = f"mode {mode}"
    if not isinstance(agent, str) or agent not in facts.agents:
        problems.append(f"{where}: agent {agent!r} is not an agent of the run; dropped")
        return {"present": True, "labels": []}, problems
    ev = _evidence(obj.get("evidence"), facts, where, problems)
    return {"present": True, "labels": [{"mode": mode, "agent": agent, "evidence": ev,
                                         "rationale": _text(obj.get("rationale"))}]}, problems


def parse_attribution(obj: dict[str, Any], facts: RunFacts, *, nullable: bool = False,
                      within: tuple[int, int] | None = None) -> tuple[dict[str, Any], list[str]]:
    """An attribution answer -> ``({"agent", "step", "rationale"}, problems)``. With `nullable`
    (step-by-step: "not this step"), agent and step may both be null. A step outside `within`
    (binary search: the segment asked about) is dropped and reported."""
    if "agent" not in obj or "step" not in obj:
        raise AnswerError('an attribution answer needs "agent" and "step"')
    agent, step_raw = obj.get("agent"), obj.get("step")
    if agent is None and step_raw is None:
        if nullable:
            return {"agent": None, "step": None, "rationale": _text(obj.get("rationale"))}, []
        raise AnswerError('"agent" and "step" are null: name the responsible agent and the step')
    problems: list[str] = []
    step = _seq(step_raw) if step_raw is not None else None
    if step_raw is not None and step is None:
        raise AnswerError(f'"step" must be a seq (an integer), got {step_raw!r}')
    if step is not None and step not in facts.seqs:
        problems.append(f"step #{step} is no event of the run; dropped")
        step = None
    elif step is not None and within is not None and not within[0] <= step <= within[1]:
        problems.append(f"step #{step} is outside #{within[0]}-#{within[1]}; dropped")
        step = None
    if agent is not None and (not isinstance(agent, str) or agent not in facts.agents):
        problems.append(f"agent {agent!r} is not an agent of the run; dropped")
        agent = None
    return {"agent": agent, "step": step, "rationale": _text(obj.get("rationale"))}, problems


# --------------------------------------------------------------------------- JSON schemas (structured output)

_EV = {"type": "array", "items": {"type": "integer"}}
LABELS_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["verdict", "labels"],
    "properties": {
        "verdict": {"type": "string", "enum": ["failure", "no_failure"]},
        "labels": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["mode", "agent", "evidence", "rationale"],
            "properties": {"mode": {"type": "string"}, "agent": {"type": "string"}, "evidence": _EV,
                           "rationale": {"type": "string"}}}},
    },
}
PRESENT_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["present", "agent", "evidence", "rationale"],
    "properties": {"present": {"type": "boolean"}, "agent": {"type": ["string", "null"]}, "evidence": _EV,
                   "rationale": {"type": "string"}},
}
ATTRIBUTION_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["agent", "step", "rationale"],
    "properties": {"agent": {"type": ["string", "null"]}, "step": {"type": ["integer", "null"]},
                   "rationale": {"type": "string"}},
}
SCHEMAS = {"labels": LABELS_SCHEMA, "present": PRESENT_SCHEMA, "attribution": ATTRIBUTION_SCHEMA,
           "attribution_nullable": ATTRIBUTION_SCHEMA}
