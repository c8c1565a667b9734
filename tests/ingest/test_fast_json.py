"""The import's fast JSON (issue 14): `canonical_json_bytes` and `compact_json` give exactly the
bytes of the `json` encodings they replace, so content hashes and stored JSON text are unchanged."""
from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import struct
from pathlib import Path

import pytest

from app.core.db import json_dumps
from app.demo.generator import generate_runs
from app.ingest import iter_path
from app.ingest.canonical import (
    canonical_json,
    canonical_json_bytes,
    compact_json,
    normalize_run,
    normalize_run_checked,
)
from app.ingest.loader import _prepare

DATA = [Path(__file__).parent / "data", Path(__file__).parents[1] / "datasets" / "data"]


def old_hash(run: dict) -> str:
    """The content hash as the loader computed it before (json.dumps, sorted keys, compact)."""
    text = json.dumps(run, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def column_values(run: dict):
    """Every value the loader writes to a JSON column."""
    yield run.get("metadata") or {}
    for p in run["principals"]:
        yield from (p.get("constraints") or [], (p.get("outcome") or {}).get("metrics") or {}, p.get("metadata") or {})
    for a in run["agents"]:
        yield from (a.get("private_state") or {}, a.get("metadata") or {})
    for e in run["events"]:
        yield from (e.get("recipients") or [], e.get("data"), e.get("metadata") or {})
    for a in [*run["audits"], *(run.get("checks") or [])]:
        yield from (a.get("evidence") or [], a.get("metadata") or {})


def fixture_items() -> list:
    items = []
    for root in DATA:
        for path in sorted(root.iterdir()):
            try:
                items += [item for item in iter_path(str(path)) if item.run is not None]
            except Exception:  # noqa: BLE001 - a fixture made to fail reading holds no run to compare
                continue
    return items


def assert_same(run: dict, plain: bool) -> None:
    """Both fast paths (checked, and unchecked when `plain`) give the old bytes."""
    old = canonical_json(run).encode("utf-8")
    assert canonical_json_bytes(run) == old
    assert _prepare(run)[1] == old_hash(run)
    if plain:
        assert canonical_json_bytes(run, plain=True) == old
        assert _prepare(run, True)[1] == old_hash(run)
    for value in column_values(run):
        if value is not None:
            assert compact_json(value) == json_dumps(value), value
            if plain:
                assert compact_json(value, plain=True) == json_dumps(value), value


def test_demo_corpus_hashes_and_column_text_are_unchanged():
    runs = [normalize_run_checked(x.run) for x in generate_runs(150, 3)]
    assert len(runs) == 150
    assert all(plain for _, plain in runs)  # the demo's floats are all plain: the fast path is taken
    for run, plain in runs:
        assert_same(run, plain)


def test_fixture_runs_hashes_and_column_text_are_unchanged():
    items = fixture_items()
    assert len(items) >= 10  # the readers' fixtures: tree release, OTLP, MAD, Who&When, ...
    assert any(item.plain_floats for item in items)
    for item in items:
        assert_same(item.run, item.plain_floats)


def edge_floats() -> list[float]:
    rnd = random.Random(7)
    out = [0.0, -0.0, 1e-4, 9.999e-5, 1e-5, 1e-7, 1e15, 9.999999999999998e15, 1e16, 1.5e16, 1e22, 5e-324,
           1.7976931348623157e308, 0.1 + 0.2, 2.5, -3.0, 123456789.125]
    for exp in range(-12, 24):
        out += [rnd.random() * 10 ** exp for _ in range(30)]
    while len(out) < 5000:
        f = struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0]
        if math.isfinite(f):
            out.append(f)
    return out


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [1, 2, {"z": None, "é": "ü"}], "A": True, "": False, "\U0001f600": "x", "ﬀ": 1},
    ["tab\t", "nl\n", "ctl\x01\x1f\x7f", "quote\"", "back\\", "\u2028\u2029\ufeff", "/slash", "\x00"],
    {"big": 2**63 - 1, "bigger": 2**64, "neg": -(2**63) - 1, "huge": 10**40},
    {"text looks like a number": ":1e5,0.00001", "n": 1e-5},
    [], {}, "plain", 3, None,
])
def test_edge_values_encode_the_same(value):
    run_like = {"metadata": value, "events": [value]}
    assert canonical_json_bytes(run_like) == canonical_json(run_like).encode("utf-8")
    assert compact_json(value) == json_dumps(value)


def test_a_lone_surrogate_fails_as_before():
    value = {"lone": "\ud800"}
    with pytest.raises(UnicodeEncodeError):
        canonical_json(value).encode("utf-8")
    with pytest.raises(UnicodeEncodeError):
        canonical_json_bytes(value)
    assert compact_json(value) == json_dumps(value)


def test_floats_encode_the_same():
    floats = edge_floats()
    for f in floats:
        assert compact_json([f]) == json_dumps([f]), f
        assert compact_json({"x": f}) == json_dumps({"x": f}), f
    assert canonical_json_bytes({"v": floats}) == canonical_json({"v": floats}).encode("utf-8")


def test_plain_floats_encode_the_same_without_the_check():
    plain = [f for f in edge_floats() if f == 0 or 1e-4 <= abs(f) < 1e16]
    assert len(plain) > 500
    for f in plain:
        assert compact_json([f], plain=True) == json_dumps([f]), f
    assert canonical_json_bytes({"v": plain}, plain=True) == canonical_json({"v": plain}).encode("utf-8")


ODD = {"run_id": "r", "scenario": {"id": "s", "family": "f"},
       "principals": [{"id": "p", "outcome": {"score": 0.5, "metrics": {"m": 2**70}}}],
       "agents": [{"id": "a", "principal": "p"}],
       "events": [{"kind": "message", "actor": "a", "data": {"x": [0.25, 0.5, -0.0]}, "metadata": {"t": "é\x01"}}]}


@pytest.mark.parametrize("where", ["aggregate_score", "data", "metadata", "metrics", "score", "big int"])
def test_a_run_with_odd_numbers_is_not_plain_and_keeps_its_hash(where):
    raw = copy.deepcopy(ODD)
    assert normalize_run_checked(raw)[1] is True
    if where == "aggregate_score":
        raw["aggregate_score"] = 1e-7
    elif where == "data":
        raw["events"][0]["data"]["x"].append(1e-5)
    elif where == "metadata":
        raw["metadata"] = {"deep": [{"v": -2.5e16}]}
    elif where == "metrics":
        raw["principals"][0]["outcome"]["metrics"]["tiny"] = 3e-9
    elif where == "score":
        raw["principals"][0]["outcome"]["score"] = 10**17
    else:
        raw["events"][0]["data"]["n"] = 10**30  # orjson refuses it: falls back, plain or not
    run, plain = normalize_run_checked(raw)
    assert run == normalize_run(raw)
    assert plain is (where == "big int")
    assert_same(run, plain)


EVENT_CASES = [
    {"kind": "message", "actor": "a", "recipients": "b", "ts": "2026-01-01T00:00:00Z", "seq": 0},
    {"kind": "message", "actor": "a", "recipients": ["b"], "visibility": "private", "content": "hi", "data": None},
    {"kind": "log", "actor": "system", "metadata": {"x": [1, {"y": 0.5}]}, "data": [1, "2"], "hop": 3, "parent_seq": 0},
    {"kind": "tool_call", "actor": "a", "extra_field": 1},
    {"kind": "tool_call", "actor": "a", "seq": 1.0},
    {"kind": "tool_call", "actor": "a", "seq": True},
    {"kind": "tool_call", "actor": "a", "ts": 1700000000},
    {"kind": "tool_call", "actor": "a", "ts": "yesterday"},
    {"kind": "tool_call", "actor": "a", "ts": 5},
    {"kind": "nope", "actor": "a"},
    {"kind": ["message"], "actor": "a"},
    {"kind": "message", "actor": " "},
    {"kind": "message", "actor": "a", "recipients": [1]},
    {"kind": "message", "actor": "a", "recipients": {"b": 1}},
    {"kind": "message", "actor": "a", "visibility": ["shared"]},
    {"kind": "message", "actor": "a", "visibility": "public"},
    {"kind": "message", "actor": "a", "content": 3},
    {"kind": "message", "actor": "a", "metadata": []},
    {"kind": "message", "actor": "a", "metadata": {"n": float("nan")}},
    {"kind": "message", "actor": "a", "data": {"tiny": 1e-9}},
    {"kind": "message", "actor": "a", "data": {1: 2}},
    {"kind": "message", "actor": "a", "data": {"s": {1, 2}}},
]


@pytest.mark.parametrize("raw", EVENT_CASES)
def test_the_fast_event_path_gives_the_checked_result_or_defers(raw):
    from app.ingest.canonical import RunFormatError, _Normalizer

    def outcome(method):
        n = _Normalizer("f.jsonl")
        try:
            return ("ok", method(n)(copy.deepcopy(raw), "events[0]"), n.odd_floats)
        except RunFormatError as exc:
            return ("error", str(exc), n.odd_floats)

    fast = _Normalizer("f.jsonl").event_fast(copy.deepcopy(raw))
    checked = outcome(lambda n: n.event_checked)
    assert outcome(lambda n: n.event) == checked
    if fast is not None:
        assert checked[0] == "ok" and fast == checked[1] and not checked[2]


def test_the_fast_event_path_is_taken_for_the_demo_corpus():
    from app.ingest.canonical import _Normalizer

    raw = generate_runs(5, 4)
    n = _Normalizer(None)
    events = [e for x in raw for e in x.run["events"]]
    assert events and all(n.event_fast(copy.deepcopy(e)) is not None for e in events)
