"""The runner's pure pieces: the cache key and reading an answer body."""
from __future__ import annotations

import hashlib
import json

import pytest

from app.judges.runner import PARALLEL_MIN_RUNS, Endpoint, processes_for, request_key, share_limits


def _json_key(payload):
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def test_request_key_is_the_sorted_json_sha256():
    payload = {"sample": 2, "params": {"model": "m", "temperature": 0.0, "max_tokens": 800, "top_p": 0.95},
               "messages": [{"role": "system", "content": "Ünïcode “quotes” \u2028 tab\t nl\n ctrl\x01 \\ \""},
                            {"role": "user", "content": "# Run r-1: x\n#3 [shared a -> b] message: hi 😀"}]}
    assert request_key(payload) == _json_key(payload)
    assert request_key(payload) != request_key({**payload, "sample": 3})
    reordered = {"messages": payload["messages"], "params": dict(reversed(payload["params"].items())), "sample": 2}
    assert request_key(reordered) == request_key(payload)


def _endpoint(output):
    ep = Endpoint.__new__(Endpoint)
    ep.defn = {"output": output}
    return ep


def test_answer_text_from_the_body():
    body = {"choices": [{"message": {"content": "{\"verdict\": \"no_failure\", \"labels\": []}"},
                         "finish_reason": "stop"}]}
    assert _endpoint("json_schema")._content(body) == ("{\"verdict\": \"no_failure\", \"labels\": []}", False)
    tool = {"choices": [{"message": {"content": None, "tool_calls": [
        {"function": {"name": "answer", "arguments": "{\"agent\": \"a\"}"}}]}, "finish_reason": "length"}]}
    assert _endpoint("tools")._content(tool) == ("{\"agent\": \"a\"}", True)
    assert _endpoint("text")._content(tool) == ("", True)
    for empty in ({}, {"choices": []}, {"choices": None}, [], {"choices": ["x"]}):
        assert _endpoint("text")._content(empty) == ("", False)


def test_fewer_collections_while_judge_runs_go_and_restored_by_the_last():
    import gc

    from app.judges.runner import _fewer_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        outer, inner = _fewer_collections(), _fewer_collections()
        outer.__enter__()
        assert gc.get_threshold() == (50_000, 10, 10)
        inner.__enter__()
        outer.__exit__(None, None, None)  # another judge run still going: still raised
        assert gc.get_threshold() == (50_000, 10, 10)
        inner.__exit__(None, None, None)
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def _defn(**limits):
    return {"limits": {"concurrency": 16, "requests_per_minute": 0, "tokens_per_minute": 0, "cost_cap": None,
                       "processes": None, **limits}}


def test_processes_for_the_selection(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert processes_for(_defn(), PARALLEL_MIN_RUNS - 1) == 1  # small: one process
    assert processes_for(_defn(), PARALLEL_MIN_RUNS) == 2  # large: min(2, CPUs)
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert processes_for(_defn(), PARALLEL_MIN_RUNS) == 1
    assert processes_for(_defn(processes=4), 100) == 4  # the judge file's choice
    assert processes_for(_defn(processes=4), 100, requested=3) == 3  # --processes wins
    assert processes_for(_defn(processes=4), 2) == 2  # never more than the runs
    assert processes_for(_defn(concurrency=3, processes=8), 100) == 3  # nor the concurrency
    assert processes_for(_defn(processes=4), 0) == 1


@pytest.mark.parametrize("n", [2, 3, 5])
def test_shares_add_up_to_the_limits(n):
    lim = {"concurrency": 16, "requests_per_minute": 601, "tokens_per_minute": 0, "cost_cap": 1.0}
    shares = [share_limits(lim, n, i) for i in range(n)]
    assert sum(s["concurrency"] for s in shares) == 16
    assert sum(s["requests_per_minute"] for s in shares) == 601
    assert all("tokens_per_minute" not in s for s in shares)  # 0: unlimited stays unlimited
    assert sum(s["cost_cap"] for s in shares) == pytest.approx(1.0)  # together at most the cap
    assert all(s["cost_cap_total"] == 1.0 for s in shares)
    assert max(s["concurrency"] for s in shares) - min(s["concurrency"] for s in shares) <= 1
