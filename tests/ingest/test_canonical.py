"""normalize_run / content_hash / RunFormatError, against hand-worked expectations."""
from __future__ import annotations

import copy
import hashlib

import pytest

from app.ingest.canonical import Location, RunFormatError, content_hash, normalize_run

from .factory import make_runs


def minimal(**over):
    run = {"run_id": "r1", "scenario": {"id": "s/1", "family": "legal"},
           "agents": [{"id": "a"}, {"id": "b"}],
           "events": [{"kind": "message", "actor": "a", "recipients": ["b"], "content": "hi"}]}
    run.update(over)
    return run


def test_minimal_run_gets_every_default():
    assert normalize_run(minimal()) == {
        "run_id": "r1",
        "scenario": {"id": "s/1", "family": "legal", "alignment": None, "title": None, "description": None,
                     "metadata": {}},
        "status": "completed", "aggregate_score": None, "started_at": None, "ended_at": None,
        "principals": [],
        "agents": [
            {"id": "a", "principal": None, "role": None, "model": None, "harness": None, "private_state": {},
             "metadata": {}},
            {"id": "b", "principal": None, "role": None, "model": None, "harness": None, "private_state": {},
             "metadata": {}},
        ],
        "events": [{"seq": 0, "ts": None, "kind": "message", "actor": "a", "recipients": ["b"],
                    "visibility": "shared", "content": "hi", "data": {}, "parent_seq": None, "hop": None,
                    "metadata": {}}],
        "audits": [],
        "metadata": {},
    }


def test_unknown_fields_go_to_the_owning_metadata():
    raw = minimal(benchmark="A2F", metadata={"k": 1})
    raw["scenario"]["difficulty"] = "hard"
    raw["agents"][0]["temperature"] = 0.5
    raw["events"][0]["tokens"] = 12
    raw["principals"] = [{"id": "p", "budget": 5, "outcome": {"success": True, "surplus": -3.5}}]
    raw["audits"] = [{"source": "j", "mode": "VF1", "confidence": 0.8}]
    run = normalize_run(raw)
    assert run["metadata"] == {"k": 1, "benchmark": "A2F"}
    assert run["scenario"]["metadata"] == {"difficulty": "hard"}
    assert run["agents"][0]["metadata"] == {"temperature": 0.5}
    assert run["events"][0]["metadata"] == {"tokens": 12}
    assert run["principals"][0]["metadata"] == {"budget": 5}
    assert run["principals"][0]["outcome"] == {"success": True, "score": None, "metrics": {"surplus": -3.5}}
    assert run["audits"][0]["metadata"] == {"confidence": 0.8}
    assert "benchmark" not in run


def test_unknown_field_clashing_with_metadata_is_an_error_not_a_silent_drop():
    with pytest.raises(RunFormatError) as exc:
        normalize_run(minimal(benchmark="x", metadata={"benchmark": "y"}))
    assert exc.value.field == "benchmark"


def test_seq_assigned_by_timestamp_when_missing_stable_and_untimed_events_follow_predecessor():
    events = [
        {"kind": "log", "actor": "a", "content": "c", "ts": "2026-05-01T10:00:03Z"},
        {"kind": "log", "actor": "a", "content": "d"},  # no ts: stays right after "c"
        {"kind": "log", "actor": "a", "content": "a", "ts": "2026-05-01T10:00:01Z"},
        {"kind": "log", "actor": "a", "content": "b1", "ts": "2026-05-01T12:00:02+02:00"},  # = 10:00:02Z
        {"kind": "log", "actor": "a", "content": "b2", "ts": "2026-05-01T10:00:02Z"},  # tie: keeps order
    ]
    run = normalize_run(minimal(events=events))
    assert [e["content"] for e in run["events"]] == ["a", "b1", "b2", "c", "d"]
    assert [e["seq"] for e in run["events"]] == [0, 1, 2, 3, 4]


def test_given_seqs_are_sorted():
    events = [{"seq": 1, "kind": "log", "actor": "a", "content": "second"},
              {"seq": 0, "kind": "log", "actor": "a", "content": "first"}]
    run = normalize_run(minimal(events=events))
    assert [e["content"] for e in run["events"]] == ["first", "second"]


@pytest.mark.parametrize("seqs, field", [([0, 2], "events[1].seq"), ([0, 0], "events[1].seq"),
                                         ([0, None], "events[1].seq"), ([-1, 0], "events[0].seq")])
def test_non_dense_or_partial_seq_is_an_error(seqs, field):
    events = [{"seq": s, "kind": "log", "actor": "a"} for s in seqs]
    with pytest.raises(RunFormatError) as exc:
        normalize_run(minimal(events=events))
    assert exc.value.field == field


@pytest.mark.parametrize("patch, field", [
    (lambda r: r["events"][0].update(actor="mallory"), "events[0].actor"),
    (lambda r: r["events"][0].update(recipients=["b", "zed"]), "events[0].recipients[1]"),
    (lambda r: r["events"][0].update(kind="chat"), "events[0].kind"),
    (lambda r: r["events"][0].update(visibility="public"), "events[0].visibility"),
    (lambda r: r["events"][0].update(parent_seq=5), "events[0].parent_seq"),
    (lambda r: r["events"][0].update(parent_seq=0), "events[0].parent_seq"),
    (lambda r: r["events"][0].pop("kind"), "events[0].kind"),
    (lambda r: r["events"][0].pop("actor"), "events[0].actor"),
    (lambda r: r["events"][0].update(ts="yesterday"), "events[0].ts"),
    (lambda r: r["events"][0].update(data={"x": float("nan")}), "events[0].data.x"),
    (lambda r: r.update(status="done"), "status"),
    (lambda r: r.update(aggregate_score="high"), "aggregate_score"),
    (lambda r: r["scenario"].update(alignment="friendly"), "scenario.alignment"),
    (lambda r: r["scenario"].pop("family"), "scenario.family"),
    (lambda r: r.pop("scenario"), "scenario"),
    (lambda r: r.pop("run_id"), "run_id"),
    (lambda r: r.update(run_id=""), "run_id"),
    (lambda r: r["agents"][0].update(principal="nobody"), "agents[0].principal"),
    (lambda r: r["agents"].append({"id": "a"}), "agents[2].id"),
    (lambda r: r.update(audits=[{"source": "j", "mode": "VF1", "evidence": [3]}]), "audits[0].evidence[0]"),
    (lambda r: r.update(audits=[{"source": "j"}]), "audits[0].mode"),
    (lambda r: r.update(audits=[{"mode": "VF1"}]), "audits[0].source"),
    (lambda r: r.update(audits=[{"source": "j", "mode": "VF1", "agent": "zed"}]), "audits[0].agent"),
    (lambda r: r.update(principals=[{"id": "p", "kind": "robot"}]), "principals[0].kind"),
])
def test_invalid_field_is_named(patch, field):
    raw = minimal()
    patch(raw)
    with pytest.raises(RunFormatError) as exc:
        normalize_run(raw, Location("runs.jsonl", 3))
    assert exc.value.field == field
    assert str(exc.value).startswith("runs.jsonl:3: ")
    assert f"field {field}: " in str(exc.value)


def test_error_string_and_location_format():
    raw = minimal()
    raw["events"][0]["actor"] = "mallory"
    with pytest.raises(RunFormatError) as exc:
        normalize_run(raw, Location("runs.jsonl", 3))
    err = exc.value
    assert str(err) == ("runs.jsonl:3: run r1: field events[0].actor: "
                        "'mallory' is not an agent id, a principal id or 'system'")
    assert err.location == "runs.jsonl:3: run r1: field events[0].actor"
    assert err.to_dict() == {"location": err.location, "message": err.message}
    assert str(RunFormatError(Location("a.json", pointer="[4]"), "boom")) == "a.json:[4]: boom"


def test_not_an_object():
    with pytest.raises(RunFormatError, match="must be a JSON object"):
        normalize_run([1, 2], "x.json")


def test_principals_and_system_may_act_and_evidence_and_parents_resolve():
    raw = minimal(principals=[{"id": "dana"}], events=[
        {"kind": "message", "actor": "dana", "recipients": ["a"]},
        {"kind": "log", "actor": "system", "parent_seq": 0},
    ], audits=[{"source": "judge", "mode": "VF1", "agent": "dana", "evidence": [0, 1]}])
    run = normalize_run(raw)
    assert run["events"][0]["visibility"] == "shared"
    assert run["events"][1]["visibility"] == "private"
    assert run["audits"][0]["evidence"] == [0, 1]


def test_conveniences_epoch_ts_int_score_single_string_lists():
    raw = minimal(aggregate_score=1, started_at=0)
    raw["events"][0]["recipients"] = "b"
    raw["principals"] = [{"id": "p", "constraints": "Be nice"}]
    run = normalize_run(raw)
    assert run["aggregate_score"] == 1.0 and isinstance(run["aggregate_score"], float)
    assert run["started_at"] == "1970-01-01T00:00:00Z"
    assert run["events"][0]["recipients"] == ["b"]
    assert run["principals"][0]["constraints"] == ["Be nice"]


def test_explicit_null_data_is_kept_and_missing_data_is_empty_object():
    raw = minimal()
    raw["events"].append({"kind": "log", "actor": "a", "data": None})
    run = normalize_run(raw)
    assert run["events"][0]["data"] == {}
    assert run["events"][1]["data"] is None


def test_normalization_is_idempotent_and_does_not_alias_input():
    for run in make_runs(4, seed=3):
        again = normalize_run(copy.deepcopy(run))
        assert again == run
        assert content_hash(again) == content_hash(run)
    raw = minimal()
    raw["events"][0]["data"] = {"nested": [1]}
    run = normalize_run(raw)
    raw["events"][0]["data"]["nested"].append(2)
    assert run["events"][0]["data"] == {"nested": [1]}


def test_content_hash_is_sha256_of_sorted_compact_json():
    run = normalize_run({"run_id": "é", "scenario": {"id": "s", "family": "f"}})
    text = ('{"agents":[],"aggregate_score":null,"audits":[],"ended_at":null,"events":[],"metadata":{},'
            '"principals":[],"run_id":"é","scenario":{"alignment":null,"description":null,"family":"f",'
            '"id":"s","metadata":{},"title":null},"started_at":null,"status":"completed"}')
    assert content_hash(run) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    reordered = dict(reversed(list(run.items())))
    assert content_hash(reordered) == content_hash(run)
    changed = copy.deepcopy(run)
    changed["scenario"]["title"] = "t"
    assert content_hash(changed) != content_hash(run)
