"""A call made ahead (`app.judges.request`, what the prep process does) is the call the runner would
make itself: the strategy's first question, the same messages, body, token estimate and per-sample
cache keys, and the same windows; later questions are made as before."""
from __future__ import annotations

import asyncio
import copy
import pickle

import orjson
import pytest

from app.judges.prompts import fixed_tokens
from app.judges.request import (
    call_messages,
    prepare_call,
    prepare_first,
    prepared,
    request_key,
    request_params,
)
from app.judges.strategies import STRATEGIES, first_call, judge, windows_for

from .test_prompts_strategies import _defn, _view

#: (a context so small that the trace is split into several windows: `_small`)
SMALL = "context: {max_tokens: 100000, window_overlap: 1}\nsampling: {max_tokens: 16}\n"


def _small(defn, view):
    """The context made so small that the first call's trace fits only in several windows."""
    spec = first_call(defn, copy.deepcopy(view))
    fixed = fixed_tokens(defn["prompts"], view, kind=spec.kind, answer=spec.answer, **spec.extras)
    defn["context"]["max_tokens"] = fixed + 16 + 60
    return defn


def _answer(spec):
    if spec.answer == "labels":
        return {"verdict": "no_failure", "labels": []}
    if spec.answer == "present":
        return {"present": False, "agent": None, "evidence": []}
    return {"agent": "buyer_agent", "step": spec.window.last_seq, "rationale": ""}


def _run(defn, view):
    """Judge with a fake model; each call's spec, the call made ahead for it, and the call made
    the runner's own way (on a view that keeps nothing)."""
    plain = copy.deepcopy(view)
    plain.memo = None
    seen = []

    async def ask(spec):
        own = call_messages(defn, plain, spec)
        seen.append((spec, prepared(view, spec), own))
        return [spec.parse(_answer(spec)) for _ in range(int(defn["sampling"]["samples"]))]

    asyncio.run(judge(defn, view, ask))
    return seen


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("extra", ["", "sampling: {samples: 3}\n", SMALL], ids=["one", "k3", "windows"])
def test_the_call_made_ahead_is_the_runners_own(strategy, extra):
    defn = _defn(strategy, extra)
    view = _view()
    if extra == SMALL:
        _small(defn, view)
    spec = first_call(defn, copy.deepcopy(view))
    prepare_first(defn, view)
    # what the prep process sends back: pickled, the taxonomy taken out (the runner puts it back)
    tax = view.base["taxonomy"]
    view.base["taxonomy"] = {"modes": []}
    view = pickle.loads(pickle.dumps(view))
    view.base["taxonomy"], view.modes = tax, tax["modes"]

    seen = _run(defn, view)
    first, ahead, own = seen[0]
    assert (first.kind, first.answer, first.window, first.extras) == (spec.kind, spec.answer, spec.window, spec.extras)
    assert ahead is not None and ahead.messages == own
    params = request_params(defn, first.answer)
    k = int(defn["sampling"]["samples"])
    assert ahead.keys == tuple(request_key({"params": params, "messages": own, "sample": i}) for i in range(k))
    assert orjson.loads(ahead.body) == {**params, "messages": own}
    assert ahead == prepare_call(defn, own, first.answer)
    # later calls are made by the runner (or, the same question again, from the one made ahead)
    assert all(a is None or a.messages == o for _, a, o in seen[1:])
    if extra == SMALL and strategy in ("all-at-once", "per-agent", "per-mode", "attribution-all-at-once"):
        assert first.window.count > 1  # (the case is one of several windows)


def test_windows_kept_ahead_are_the_windows_made_here():
    view = _view()
    defn = _small(_defn("per-agent", SMALL), view)
    prepare_first(defn, view)
    plain = _view()
    agent = view.agents[0]
    wins = windows_for(defn, view, kind="agent", answer="labels", focus_agent=agent)
    assert len(wins) > 1 and wins == windows_for(defn, plain, kind="agent", answer="labels", focus_agent=agent)
    assert plain.memo is None  # a view that keeps nothing gets nothing kept


def test_a_strategy_that_asks_nothing_has_no_call_ahead():
    defn = _defn("attribution-binary-search")
    view = _view()
    view.lines = []
    assert first_call(defn, view) is None
    prepare_first(defn, view)
    assert view.memo == {}
