"""Writers -> readers round trip: every shape reads back equal to the runs written."""
from __future__ import annotations

import json

import pytest

from app.ingest import (
    content_hash,
    iter_path,
    normalize_run,
    write_files,
    write_json_array,
    write_jsonl,
    write_tree,
    write_wire,
)

from .factory import make_runs


def _edge_runs():
    base = {"scenario": {"id": "edge", "family": "edge"}}
    return [normalize_run(r) for r in (
        {**base, "run_id": "no-events"},
        {**base, "run_id": "private-only", "agents": [{"id": "a"}],
         "events": [{"kind": "tool_call", "actor": "a", "data": {"x": 1}}]},
        {**base, "run_id": "empty-message", "agents": [{"id": "a"}, {"id": "b"}],
         "events": [{"kind": "message", "actor": "a", "recipients": ["b"]},
                    {"kind": "message", "actor": "b", "recipients": ["a"], "content": "", "data": []}]},
        {**base, "run_id": "same-second", "agents": [{"id": "a"}, {"id": "b"}],
         "events": [{"kind": "message", "actor": "a", "recipients": ["b"], "ts": "2026-01-01T00:00:00Z", "content": "1"},
                    {"kind": "log", "actor": "system", "ts": "2026-01-01T00:00:00Z", "content": "2"},
                    {"kind": "message", "actor": "a", "recipients": ["b"], "ts": "2026-01-01T00:00:00Z", "content": "3"}]},
    )]


RUNS = make_runs(8, seed=11) + _edge_runs()


def _read(path):
    items = list(iter_path(path))
    assert [str(i.error) for i in items if i.error] == []
    assert [u for i in items for u in i.unused_files] == []
    return [i.run for i in items if i.run]


def _by_id(run):
    return run["run_id"]


def _assert_same(got, expected):
    assert got == expected
    assert [content_hash(r) for r in got] == [content_hash(r) for r in expected]


def test_fixture_is_rich():
    kinds = {e["kind"] for r in RUNS for e in r["events"]}
    assert kinds == {"message", "tool_call", "tool_result", "state_update", "artifact", "discovery", "delegation", "log"}
    assert {e["visibility"] for r in RUNS for e in r["events"]} == {"shared", "private"}
    assert all(2 <= len(r["agents"]) <= 4 for r in RUNS[:8])
    assert any(r["audits"] for r in RUNS) and any("unknown_top_level" in r["metadata"] for r in RUNS)
    assert any(not e["content"].isascii() for r in RUNS for e in r["events"] if e["content"])


def test_json_array(tmp_path):
    assert write_json_array(iter(RUNS), tmp_path / "runs.json") == len(RUNS)
    _assert_same(_read(tmp_path / "runs.json"), RUNS)


def test_jsonl(tmp_path):
    assert write_jsonl(iter(RUNS), tmp_path / "runs.jsonl") == len(RUNS)
    _assert_same(_read(tmp_path / "runs.jsonl"), RUNS)


def test_one_file_per_run(tmp_path):
    assert write_files(iter(RUNS), tmp_path / "runs") == len(RUNS)
    assert len(list((tmp_path / "runs").iterdir())) == len(RUNS)
    _assert_same(_read(tmp_path / "runs"), RUNS)


def test_tree(tmp_path):
    assert write_tree(iter(RUNS), tmp_path / "tree") == len(RUNS)
    # the tree reads back in directory order
    _assert_same(sorted(_read(tmp_path / "tree"), key=_by_id), sorted(RUNS, key=_by_id))
    # the layout really is spread over several recognised files
    names = {p.name for p in (tmp_path / "tree").rglob("*") if p.is_file()}
    assert {"run.json", "scenario.json", "scenario.md", "principals.json", "agents.json", "metrics.json",
            "conversation.jsonl", "events.jsonl", "hops.jsonl", "audits.jsonl"} <= names
    assert list((tmp_path / "tree").rglob("trajectories/*.jsonl")) and list((tmp_path / "tree").rglob("artifacts/*"))


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_wire(tmp_path, protocol):
    assert write_wire(iter(RUNS), tmp_path / "wire.jsonl", protocol=protocol) == len(RUNS)
    _assert_same(_read(tmp_path / "wire.jsonl"), RUNS)
    methods, roles = set(), set()
    with open(tmp_path / "wire.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if "body" in rec:
                body = rec["body"]
                methods.add(body.get("method"))
                msg = body["params"]["message"] if "params" in body else (
                    body["result"]["message"] if protocol == "1.0" else body["result"])
                roles.add(msg["role"])
    assert methods == ({"SendMessage", None} if protocol == "1.0" else {"message/send", None})
    assert roles == ({"ROLE_USER", "ROLE_AGENT"} if protocol == "1.0" else {"user", "agent"})


def test_wire_sidecar_only_overrides_what_the_wire_cannot_say(tmp_path):
    write_wire(RUNS, tmp_path / "wire.jsonl")
    overridden = set()
    with open(tmp_path / "wire.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "run_context":
                for e in rec["run"]["events"]:
                    if "wire_message" in e:
                        overridden |= set(e) - {"wire_message"}
    assert overridden == {"hop", "parent_seq"}


def test_writers_reject_unknown_protocol(tmp_path):
    with pytest.raises(ValueError, match="protocol"):
        write_wire(RUNS, tmp_path / "w.jsonl", protocol="2.0")
