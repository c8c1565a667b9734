"""The runner's pure pieces: the cache key and reading an answer body."""
from __future__ import annotations

import hashlib
import json

from app.judges.runner import Endpoint, request_key


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
