"""What a judge sends for one call (pure): the chat messages, the request's parameters, its JSON
body and its cache key, and a call prepared ahead of time.

The runner (`app.judges.runner`) makes these on its event loop when a worker asks a call. The
prep process (`app.judges.prep`) makes the first call of each run ahead of time, beside the loop:
a strategy's first call never depends on an answer, so `prepare_first` drives the strategy up to
its first question and keeps that call, made the same way, in the run's `RunView.memo`, where
`prepared` finds it. The bytes sent and the cache keys are the same either way
(tests/judges_db/test_prep.py).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import orjson

from app.judges.parse import SCHEMAS
from app.judges.prompts import RunView, call_variables, estimate_tokens, memo_key, render_messages
from app.judges.strategies import CallSpec, first_call


def request_key(payload: dict[str, Any]) -> str:
    """The cache key of a request: the sha256 of its JSON with sorted keys (orjson; the same bytes as
    ``json.dumps(sort_keys=True, ensure_ascii=False, separators=(",", ":"))`` for the strings,
    integers and plain floats a request holds)."""
    try:
        data = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    except TypeError:
        data = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(data).hexdigest()


def request_params(defn: dict[str, Any], answer: str) -> dict[str, Any]:
    """Everything of a Chat Completions request but its messages: model, sampling, and the answer's
    shape as the judge's output mode asks for it (a JSON schema, a tool, or nothing: text)."""
    s, out = defn["sampling"], defn["output"]
    p: dict[str, Any] = {"model": defn["endpoint"]["model"], "temperature": s["temperature"],
                         "max_tokens": s["max_tokens"]}
    if s.get("top_p") is not None:
        p["top_p"] = s["top_p"]
    if s.get("seed") is not None:
        p["seed"] = s["seed"]
    if out == "json_schema":
        p["response_format"] = {"type": "json_schema",
                                "json_schema": {"name": "judge_answer", "schema": SCHEMAS[answer], "strict": True}}
    elif out == "tools":
        p["tools"] = [{"type": "function", "function": {"name": "answer", "description": "Give the answer.",
                                                        "parameters": SCHEMAS[answer]}}]
        p["tool_choice"] = {"type": "function", "function": {"name": "answer"}}
    return p


def call_messages(defn: dict[str, Any], view: RunView, spec: CallSpec) -> list[dict[str, str]]:
    """The chat messages of one call: the judge's templates rendered for this run and question."""
    variables = call_variables(view, spec.window, kind=spec.kind, answer=spec.answer, strategy=defn["strategy"],
                               **spec.extras)
    return render_messages(defn["prompts"], variables)


@dataclass(frozen=True)
class PreparedCall:
    """One call made ahead: its messages, the JSON body every sample sends (the sample number is
    not in it), the input tokens estimated with the answer's budget, and each sample's cache key."""

    messages: list[dict[str, str]]
    body: bytes
    est_tokens: int
    keys: tuple[str, ...]


def prepare_call(defn: dict[str, Any], messages: list[dict[str, str]], answer: str) -> PreparedCall:
    params = request_params(defn, answer)
    k = int(defn["sampling"]["samples"])
    return PreparedCall(
        messages=messages, body=orjson.dumps({**params, "messages": messages}),
        est_tokens=sum(estimate_tokens(m["content"]) for m in messages) + int(params["max_tokens"]),
        keys=tuple(request_key({"params": params, "messages": messages, "sample": i}) for i in range(k)))


def call_key(spec: CallSpec) -> tuple[Any, ...]:
    """What makes a call's messages within one run and judge: the question, its answer's shape and
    its window (a window is a span of the run's lines, cut only where its budget says)."""
    w = spec.window
    return ("call", spec.kind, spec.answer, w.index, w.count, w.first_seq, w.last_seq, w.truncated,
            memo_key(spec.extras) if spec.extras else b"")


def prepare_first(defn: dict[str, Any], view: RunView) -> None:
    """Make the run's first call ahead (its windows, messages, body and keys) into ``view.memo``,
    where the strategy's `windows_for` and the runner (`prepared`) find them."""
    if view.memo is None:
        view.memo = {}
    spec = first_call(defn, view)
    if spec is not None:
        view.memo[call_key(spec)] = prepare_call(defn, call_messages(defn, view, spec), spec.answer)


def prepared(view: RunView, spec: CallSpec) -> PreparedCall | None:
    """The call made ahead for this run and question, if any."""
    return view.memo.get(call_key(spec)) if view.memo else None
