"""Prompts (the trace as a reviewer sees it, sandboxed templates, windows) and the strategies,
with a plain async function in place of a model."""
from __future__ import annotations

import asyncio

import jinja2
import pytest

from app.judges.prompts import call_variables, render_messages, run_view, split_windows, taxonomy_vars
from app.judges.schema import parse_judge_text
from app.judges.strategies import judge
from tests.detectors_db.data import leaky_run

from .helpers import judge_file

TAX_DEF = {"name": "Tiny", "categories": [{"code": "CF", "name": "Conduct", "description": "c"},
                                          {"code": "GR", "name": "Grounding", "description": "g"}],
           "modes": [{"code": "CF1", "name": "Leak", "category": "CF", "definition": "told a secret",
                      "boundary": "asked to"},
                     {"code": "GR3", "name": "Divergent", "category": "GR", "definition": "records differ"}]}


def _view(run=None):
    run = run or leaky_run("r1", audits=[{"source": "other-judge", "mode": "CF1", "agent": "buyer_agent",
                                          "evidence": [2], "note": "AUDIT-SECRET"}])
    run["agents"][0]["private_state"] = {"budget_usd": 18500, "note": "BUYER-PRIVATE"}
    run["agents"][1]["private_state"] = {"floor": 17000, "note": "SELLER-PRIVATE"}
    return run_view(run, taxonomy_vars(TAX_DEF, "tiny", 1))


def _defn(strategy="all-at-once", extra=""):
    return parse_judge_text(judge_file("http://127.0.0.1:9/v1", strategy=strategy, extra=extra)).definition


def _prompt(view, defn, **kw):
    kw.setdefault("kind", "labels")
    kw.setdefault("answer", "labels")
    win = split_windows(view.lines, 10 ** 6, 0)[0]
    return render_messages(defn["prompts"], call_variables(view, win, **kw))[1]["content"]


def test_prompt_shows_every_lane_marked_with_seqs_and_no_truth_or_audits():
    view = _view()
    text = _prompt(view, _defn())
    assert "Lanes: buyer_agent (for Dana); seller_agent (for Lakeside)" in text
    assert "#0 [shared seller_agent -> buyer_agent] message: It is $21,000." in text
    assert "#3 [private seller_agent] state_update: order data={\"record\":{\"value\":18900}}" in text
    assert "#4 [private buyer_agent]" in text
    assert "BUYER-PRIVATE" in text and "SELLER-PRIVATE" in text
    assert "- CF1 Leak: told a secret Boundary: asked to" in text
    assert "demo_truth" not in text and "AUDIT-SECRET" not in text and "GR3\", \"agent\"" not in text
    assert view.seqs == {0, 1, 2, 3, 4} and view.agent_ids == ["buyer_agent", "seller_agent"]


def test_per_agent_prompt_shows_only_that_agents_private_state_and_its_principal():
    view = _view()
    agent = view.agents[0]
    text = _prompt(view, _defn("per-agent"), kind="agent", focus_agent=agent)
    assert "BUYER-PRIVATE" in text and "SELLER-PRIVATE" not in text
    assert "Judge one agent only: buyer_agent (acting for Dana)" in text


def test_templates_are_sandboxed_and_strict():
    from app.judges.schema import JudgeFileError

    view = _view()
    defn = _defn()
    for text, err in (("{{ run.__class__.__mro__ }}", jinja2.exceptions.SecurityError),
                      ("{{ ''.__class__.__base__.__subclasses__() }}", jinja2.exceptions.SecurityError),
                      ("{{ no_such_variable }}", jinja2.exceptions.UndefinedError)):
        with pytest.raises(err):
            _prompt(view, dict(defn, prompts={"system": "s", "user": text}))
        with pytest.raises(JudgeFileError, match="prompts.user: "):  # found when the file is checked
            _defn(extra=f"prompts: {{user: \"{text}\"}}\n")


def test_split_windows_rule():
    lines = [(i, "a", f"#{i} " + "x" * 36) for i in range(10)]  # 40 chars + newline each
    assert len(split_windows(lines, 1000, 2)) == 1
    wins = split_windows(lines, 41 * 4 // 4, 1)  # budget 41 tokens = 164 chars: 4 lines a window
    assert [(w.first_seq, w.last_seq) for w in wins] == [(0, 3), (3, 6), (6, 9)]
    assert all(w.count == 3 and not w.truncated for w in wins)
    long = [(0, "a", "#0 " + "y" * 500), (1, "a", "#1 short")]
    wins = split_windows(long, 20, 0)
    assert wins[0].truncated and "[cut:" in wins[0].lines[0] and len(wins[0].lines[0]) < 200
    assert not wins[1].truncated and wins[1].lines == ("#1 short",)


def _fake(answers):
    """An asker answering from a function of the call, recording each call's spec."""
    calls = []

    async def ask(spec):
        calls.append(spec)
        out = answers(spec)
        return [spec.parse(o) for o in (out if isinstance(out, list) else [out])]

    return ask, calls


def test_all_at_once_windows_merge_and_keep_private_state():
    view = _view()
    defn = _defn(extra="context: {max_tokens: 512, window_overlap: 1}\nsampling: {max_tokens: 16}\n")
    seen = []

    def answers(spec):
        seen.append(render_messages(defn["prompts"], call_variables(view, spec.window, kind=spec.kind,
                                                                    answer=spec.answer))[1]["content"])
        w = spec.window
        return {"verdict": "failure", "labels": [{"mode": "CF1", "agent": "buyer_agent",
                                                  "evidence": [w.first_seq, w.last_seq]}]}

    # a fixed part near the budget forces several windows
    defn["context"]["max_tokens"] = 16 + sum(len(m["content"]) for m in render_messages(
        defn["prompts"], call_variables(view, split_windows([], 1, 0)[0], kind="labels", answer="labels"))) // 4 + 60
    ask, calls = _fake(answers)
    out = asyncio.run(judge(defn, view, ask))
    assert out.windows == len(calls) > 1
    assert all("BUYER-PRIVATE" in t and "SELLER-PRIVATE" in t for t in seen)
    assert out.labels[0]["mode"] == "CF1" and out.labels[0]["evidence"] == sorted(
        {s for c in calls for s in (c.window.first_seq, c.window.last_seq)})
    assert "part 1 of" in seen[0]


def test_samples_vote_with_fraction_as_confidence():
    view = _view()
    defn = _defn(extra="sampling: {samples: 3}\n")
    lab = {"mode": "CF1", "agent": "buyer_agent", "evidence": [2]}
    other = {"mode": "GR3", "agent": "seller_agent", "evidence": [3]}
    ask, _ = _fake(lambda spec: [{"verdict": "failure", "labels": [lab]},
                                 {"verdict": "failure", "labels": [lab, other]},
                                 {"verdict": "no_failure", "labels": []}])
    out = asyncio.run(judge(defn, view, ask))
    assert [(x["mode"], x["confidence"]) for x in out.labels] == [("CF1", 0.6667)]
    assert any("GR3 by seller_agent: 1 of 3 samples" in p for p in out.problems)


def test_per_mode_one_call_per_mode():
    view = _view()
    ask, calls = _fake(lambda spec: {"present": spec.extras["focus_mode"]["code"] == "GR3", "agent": "seller_agent",
                                     "evidence": [3, 4]})
    out = asyncio.run(judge(_defn("per-mode"), view, ask))
    assert [c.extras["focus_mode"]["code"] for c in calls] == ["CF1", "GR3"]
    assert out.labels == [{"mode": "GR3", "agent": "seller_agent", "evidence": [3, 4], "rationale": "",
                           "confidence": None}]


def test_attribution_strategies():
    view = _view()  # seqs 0..4; the error is at #2 by buyer_agent
    ask, calls = _fake(lambda spec: {"agent": "buyer_agent", "step": 2, "rationale": "leak"}
                       if spec.kind in ("attribution", "segment") or spec.extras.get("step", {}).get("seq") == 2
                       else {"agent": None, "step": None})
    for strategy, n_calls in (("attribution-all-at-once", 1), ("attribution-step-by-step", 3),
                              ("attribution-binary-search", 2), ("attribution-hybrid", 3)):
        calls.clear()
        out = asyncio.run(judge(_defn(strategy), view, ask))
        assert out.attribution["agent"] == "buyer_agent" and out.attribution["step"] == 2, strategy
        assert out.labels == [{"mode": None, "agent": "buyer_agent", "evidence": [2], "rationale": out.labels[0][
            "rationale"], "confidence": None}]
        assert len(calls) == n_calls, (strategy, [c.kind for c in calls])
    # hybrid asks step by step only about the named agent's steps (#1, #2 and #4 are buyer_agent's)
    assert [c.extras["step"]["seq"] for c in calls if c.kind == "step"] == [1, 2]
