"""How a judge questions a run: the strategies, windows over long traces, votes over samples.

A strategy is an async function of (judge definition, run view, asker) returning an
:class:`Outcome`. The asker (`app.judges.runner`) turns one :class:`CallSpec` into the parsed
answers of its ``samples`` requests; strategies never see HTTP, so they are tested with a plain
async function in place of a model.

* ``all-at-once``: one call per window; labels of all windows merged.
* ``per-agent``: one call per agent and window, showing only that agent's private state and its
  own principal's objective; only labels blaming that agent are kept.
* ``per-mode``: one yes/no call per mode (the judge's ``modes``, default all of the taxonomy).
* ``attribution-all-at-once``: one call per window naming (agent, step); over several windows the
  earliest step named wins.
* ``attribution-step-by-step``: asks about each step in order, showing the trace up to it, and
  stops at the first "yes" (Who&When's step-by-step).
* ``attribution-binary-search``: asks which step of a segment holds the error, keeps the half the
  answer falls in, until one step is left (Who&When's binary search).
* ``attribution-hybrid``: all-at-once for the agent, then step-by-step over that agent's steps.

Merging windows: labels are unioned by (mode, agent), evidence unioned. Samples (``samples: k``):
a (mode, agent) label is kept when at least ``vote_threshold`` of the k answers give it, with
that fraction as its confidence; an attribution keeps the most frequent (agent, step), its
fraction the confidence. With k = 1 no confidence is recorded.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.judges.parse import RunFacts, parse_attribution, parse_labels, parse_present
from app.judges.prompts import RunView, Window, fixed_tokens, memo_key, split_windows


@dataclass
class CallSpec:
    """One question: what to render (kind, window, focus) and how to read the answer."""

    kind: str
    answer: str
    window: Window
    parse: Callable[[dict[str, Any]], tuple[dict[str, Any], list[str]]]
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    verdict: str
    labels: list[dict[str, Any]] = field(default_factory=list)
    attribution: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    windows: int = 1
    truncated: bool = False
    confidence: float | None = None

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "labels": self.labels}
        if self.attribution is not None:
            out["attribution"] = self.attribution
        return out


#: the asker: one CallSpec -> the parsed answers of its samples (each (answer, problems))
Ask = Callable[[CallSpec], Awaitable[list[tuple[dict[str, Any], list[str]]]]]


def facts_of(view: RunView, modes: list[str]) -> RunFacts:
    return RunFacts(modes=modes, agents=view.agent_ids, seqs=view.seqs, actor_of=view.actor_of)


def windows_for(defn: dict[str, Any], view: RunView, lines=None, **kw: Any) -> list[Window]:
    """The windows of this call's trace: the context budget minus the fixed prompt and the answer
    (over the whole trace: kept in ``view.memo`` when the view keeps one)."""
    key = ("windows", memo_key(kw)) if view.memo is not None and lines is None else None
    if key is not None and key in view.memo:
        return view.memo[key]
    fixed = fixed_tokens(defn["prompts"], view, **kw)
    budget = defn["context"]["max_tokens"] - defn["sampling"]["max_tokens"] - fixed
    wins = split_windows(view.lines if lines is None else lines, budget, defn["context"]["window_overlap"])
    if key is not None:
        view.memo[key] = wins
    return wins


def _vote_labels(samples: list[tuple[dict[str, Any], list[str]]], threshold: float
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    k = len(samples)
    problems = [p for _, ps in samples for p in ps]
    if k == 1:
        return [dict(lab, confidence=None) for lab in samples[0][0].get("labels", [])], problems
    counts: Counter = Counter()
    first: dict[tuple[str, str], dict[str, Any]] = {}
    evidence: dict[tuple[str, str], set[int]] = {}
    for ans, _ in samples:
        for lab in ans.get("labels", []):
            key = (lab["mode"], lab["agent"])
            counts[key] += 1
            first.setdefault(key, lab)
            evidence.setdefault(key, set()).update(lab["evidence"])
    out = []
    for key, n in counts.items():
        frac = n / k
        if frac >= threshold:
            out.append({**first[key], "evidence": sorted(evidence[key]), "confidence": round(frac, 4)})
        else:
            problems.append(f"{key[0]} by {key[1]}: {n} of {k} samples; below the vote threshold, not kept")
    return out, problems


def _merge_labels(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for labs in groups:
        for lab in labs:
            key = (lab["mode"], lab["agent"])
            if key in merged:
                m = merged[key]
                m["evidence"] = sorted(set(m["evidence"]) | set(lab["evidence"]))
                if lab.get("confidence") is not None:
                    m["confidence"] = max(m.get("confidence") or 0, lab["confidence"])
            else:
                merged[key] = dict(lab)
    return list(merged.values())


def _label_outcome(groups: list[list[dict[str, Any]]], problems: list[str], windows: list[Window]) -> Outcome:
    labels = _merge_labels(groups)
    conf = [lab["confidence"] for lab in labels if lab.get("confidence") is not None]
    return Outcome(verdict="failure" if labels else "no_failure", labels=labels, problems=problems,
                   windows=max(len(windows), 1), truncated=any(w.truncated for w in windows),
                   confidence=min(conf) if conf else None)


def _modes(defn: dict[str, Any], view: RunView) -> list[str]:
    return [m["code"] for m in view.modes]


async def all_at_once(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    facts = facts_of(view, _modes(defn, view))
    wins = windows_for(defn, view, kind="labels", answer="labels")
    groups, problems = [], []
    for w in wins:
        samples = await ask(CallSpec("labels", "labels", w, lambda o: parse_labels(o, facts)))
        labs, ps = _vote_labels(samples, defn["sampling"]["vote_threshold"])
        groups.append(labs)
        problems += ps
    return _label_outcome(groups, problems, wins)


async def per_agent(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    facts = facts_of(view, _modes(defn, view))
    groups, problems, all_wins = [], [], []
    for agent in view.agents:
        wins = windows_for(defn, view, kind="agent", answer="labels", focus_agent=agent)
        all_wins += wins
        for w in wins:
            samples = await ask(CallSpec("agent", "labels", w,
                                         lambda o, a=agent["id"]: parse_labels(o, facts, only_agent=a),
                                         {"focus_agent": agent}))
            labs, ps = _vote_labels(samples, defn["sampling"]["vote_threshold"])
            groups.append(labs)
            problems += ps
    out = _label_outcome(groups, problems, all_wins)
    out.windows = max((w.count for w in all_wins), default=1)
    return out


async def per_mode(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    facts = facts_of(view, _modes(defn, view))
    groups, problems, all_wins = [], [], []
    for mode in view.modes:
        wins = windows_for(defn, view, kind="mode", answer="present", focus_mode=mode)
        all_wins += wins
        for w in wins:
            samples = await ask(CallSpec("mode", "present", w,
                                         lambda o, c=mode["code"]: parse_present(o, facts, c), {"focus_mode": mode}))
            labs, ps = _vote_labels(samples, defn["sampling"]["vote_threshold"])
            groups.append(labs)
            problems += ps
    out = _label_outcome(groups, problems, all_wins)
    out.windows = max((w.count for w in all_wins), default=1)
    return out


def _vote_attribution(samples: list[tuple[dict[str, Any], list[str]]]) -> tuple[dict[str, Any], float | None,
                                                                               list[str]]:
    problems = [p for _, ps in samples for p in ps]
    k = len(samples)
    counts = Counter((a.get("agent"), a.get("step")) for a, _ in samples)
    (agent, step), n = counts.most_common(1)[0]
    rationale = next(a.get("rationale", "") for a, _ in samples if (a.get("agent"), a.get("step")) == (agent, step))
    return {"agent": agent, "step": step, "rationale": rationale}, (round(n / k, 4) if k > 1 else None), problems


def _attr_outcome(attr: dict[str, Any] | None, conf: float | None, problems: list[str], windows: int,
                  truncated: bool) -> Outcome:
    if attr is None or (attr.get("agent") is None and attr.get("step") is None):
        problems = problems + ["no responsible agent or step was named"]
        return Outcome(verdict="no_failure", attribution={"agent": None, "step": None, "rationale": "",
                                                          "confidence": conf},
                       problems=problems, windows=windows, truncated=truncated, confidence=conf)
    attr = dict(attr, confidence=conf)
    label = {"mode": None, "agent": attr["agent"], "evidence": [attr["step"]] if attr["step"] is not None else [],
             "rationale": attr.get("rationale", ""), "confidence": conf}
    return Outcome(verdict="failure", labels=[label] if attr["agent"] else [], attribution=attr,
                   problems=problems, windows=windows, truncated=truncated, confidence=conf)


async def attribution_all_at_once(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    facts = facts_of(view, [])
    wins = windows_for(defn, view, kind="attribution", answer="attribution")
    best, best_conf, problems = None, None, []
    for w in wins:
        samples = await ask(CallSpec("attribution", "attribution", w,
                                     lambda o: parse_attribution(o, facts, nullable=len(wins) > 1)))
        attr, conf, ps = _vote_attribution(samples)
        problems += ps
        if attr.get("step") is None and attr.get("agent") is None:
            continue
        if best is None or (attr["step"] is not None and (best["step"] is None or attr["step"] < best["step"])):
            best, best_conf = attr, conf
    return _attr_outcome(best, best_conf, problems, len(wins), any(w.truncated for w in wins))


async def _step_by_step(defn: dict[str, Any], view: RunView, ask: Ask, seqs: list[int],
                        suspect: str | None = None) -> tuple[dict[str, Any] | None, float | None, list[str], bool,
                                                             int]:
    facts = facts_of(view, [])
    problems: list[str] = []
    truncated = False
    asked = 0
    index = {s: i for i, (s, _, _) in enumerate(view.lines)}
    for seq in seqs:
        upto = view.lines[:index[seq] + 1]
        step = {"seq": seq, "actor": view.actor_of.get(seq)}
        wins = windows_for(defn, view, lines=upto, kind="step", answer="attribution_nullable", step=step,
                           suspect=suspect)
        w = wins[-1]  # the window ending at this step
        truncated |= w.truncated or len(wins) > 1
        asked += 1
        samples = await ask(CallSpec("step", "attribution_nullable", w,
                                     lambda o: parse_attribution(o, facts, nullable=True),
                                     {"step": step, "suspect": suspect}))
        attr, conf, ps = _vote_attribution(samples)
        problems += ps
        if attr.get("agent") is not None or attr.get("step") is not None:
            if attr.get("step") is None:
                attr["step"] = seq
            if attr.get("agent") is None:
                attr["agent"] = view.actor_of.get(seq)
            return attr, conf, problems, truncated, asked
    return None, None, problems, truncated, asked


async def attribution_step_by_step(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    attr, conf, problems, truncated, _ = await _step_by_step(defn, view, ask, [s for s, _, _ in view.lines])
    if truncated:
        problems.append("steps late in the trace were shown with only the last window of the trace before them")
    return _attr_outcome(attr, conf, problems, 1, truncated)


async def attribution_binary_search(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    facts = facts_of(view, [])
    lo, hi = 0, len(view.lines) - 1
    problems: list[str] = []
    truncated = False
    conf = None
    if hi < 0:
        return _attr_outcome(None, None, ["the run has no events"], 1, False)
    while lo < hi:
        segment_lines = view.lines[lo:hi + 1]
        seg = {"first_seq": segment_lines[0][0], "last_seq": segment_lines[-1][0]}
        wins = windows_for(defn, view, lines=segment_lines, kind="segment", answer="attribution", segment=seg)
        if len(wins) > 1:
            truncated = True
            problems.append(f"segment #{seg['first_seq']}-#{seg['last_seq']} did not fit; its first window "
                            f"(to #{wins[0].last_seq}) was shown")
        samples = await ask(CallSpec("segment", "attribution", wins[0],
                                     lambda o, s=seg: parse_attribution(o, facts,
                                                                        within=(s["first_seq"], s["last_seq"])),
                                     {"segment": seg}))
        attr, conf, ps = _vote_attribution(samples)
        problems += ps
        mid = (lo + hi) // 2
        if attr.get("step") is None:
            problems.append(f"no step named in #{seg['first_seq']}-#{seg['last_seq']}; kept the first half")
            hi = mid
            continue
        pos = next(i for i, (s, _, _) in enumerate(view.lines) if s == attr["step"])
        lo, hi = (lo, mid) if pos <= mid else (mid + 1, hi)
    seq = view.lines[lo][0]
    return _attr_outcome({"agent": view.actor_of.get(seq), "step": seq, "rationale": ""}, conf, problems, 1,
                         truncated)


async def attribution_hybrid(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    first = await attribution_all_at_once(defn, view, ask)
    agent = (first.attribution or {}).get("agent")
    if agent is None:
        return first
    seqs = [s for s, a, _ in view.lines if a == agent]
    attr, conf, problems, truncated, _ = await _step_by_step(defn, view, ask, seqs, suspect=agent)
    if attr is None:  # no step of the agent was confirmed: the first answer stands
        first.problems += problems + [f"no step of {agent} was confirmed step by step; the all-at-once step kept"]
        return first
    return _attr_outcome(attr, conf, first.problems + problems, first.windows, first.truncated or truncated)


STRATEGIES: dict[str, Callable[[dict[str, Any], RunView, Ask], Awaitable[Outcome]]] = {
    "all-at-once": all_at_once,
    "per-agent": per_agent,
    "per-mode": per_mode,
    "attribution-all-at-once": attribution_all_at_once,
    "attribution-step-by-step": attribution_step_by_step,
    "attribution-binary-search": attribution_binary_search,
    "attribution-hybrid": attribution_hybrid,
}


async def judge(defn: dict[str, Any], view: RunView, ask: Ask) -> Outcome:
    """Run the judge's strategy over one run."""
    return await STRATEGIES[defn["strategy"]](defn, view, ask)


class _Asked(Exception):
    def __init__(self, spec: CallSpec):
        self.spec = spec


def first_call(defn: dict[str, Any], view: RunView) -> CallSpec | None:
    """The strategy's first question about this run (it depends on no answer), without asking it;
    None when the strategy asks nothing (say, a run without events for binary search)."""
    async def ask(spec: CallSpec):
        raise _Asked(spec)

    coro = judge(defn, view, ask)
    try:
        coro.send(None)  # the fake ask raises before anything is awaited
    except _Asked as asked:
        return asked.spec
    except StopIteration:
        return None
    coro.close()  # (a strategy that awaited something else: not asked ahead)
    return None
