"""The demo generator: API, determinism, contract of the runs, realism properties, speed."""
from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from app.demo import generate_corpus, generate_long_run, generate_run, generate_runs
from app.ingest.canonical import normalize_run

EVENT_KINDS = {"message", "tool_call", "tool_result", "state_update", "artifact", "discovery", "delegation", "log"}
PRIVATE_ONLY = {"tool_call", "tool_result", "state_update", "log", "discovery"}


def _dump(runs) -> str:
    return json.dumps([(d.run, d.truth) for d in runs], sort_keys=True)


def check_contract(run: dict) -> None:
    """The rules of the brief, checked independently of the ingest normalizer."""
    assert set(run) == {"run_id", "scenario", "status", "aggregate_score", "started_at", "ended_at", "principals",
                        "agents", "events", "audits", "metadata"}
    assert set(run["scenario"]) == {"id", "family", "alignment", "title", "description", "metadata"}
    assert run["status"] in {"completed", "failed", "timeout", "error"}
    assert run["aggregate_score"] is None or isinstance(run["aggregate_score"], float)
    principals = {p["id"]: p for p in run["principals"]}
    agents = {a["id"]: a for a in run["agents"]}
    for p in run["principals"]:
        assert set(p) == {"id", "name", "kind", "objective", "constraints", "outcome", "metadata"}
        assert p["kind"] in {"person", "organization"}
        assert set(p["outcome"]) == {"success", "score", "metrics"}
        assert all(isinstance(c, str) for c in p["constraints"])
    for a in run["agents"]:
        assert set(a) == {"id", "principal", "role", "model", "harness", "private_state", "metadata"}
    events = run["events"]
    assert events, "a run has events"
    prev_ts = None
    for i, e in enumerate(events):
        assert set(e) == {"seq", "ts", "kind", "actor", "recipients", "visibility", "content", "data", "parent_seq",
                          "hop", "metadata"}
        assert e["seq"] == i
        assert e["kind"] in EVENT_KINDS
        assert e["ts"].endswith("Z") and len(e["ts"]) == 20
        assert prev_ts is None or e["ts"] > prev_ts, f"{run['run_id']} seq {i}: ts not strictly increasing"
        prev_ts = e["ts"]
        if e["parent_seq"] is not None:
            assert 0 <= e["parent_seq"] < i
        if e["kind"] in PRIVATE_ONLY:
            assert e["visibility"] == "private" and e["recipients"] == [] and e["actor"] in agents
        if e["visibility"] == "shared":
            assert e["actor"] in agents and e["recipients"]
            assert all(r in agents and r != e["actor"] for r in e["recipients"])
            assert isinstance(e["hop"], int)
        elif e["kind"] == "message":  # principal <-> own agent
            (r,) = e["recipients"]
            if e["actor"] in principals:
                assert agents[r]["principal"] == e["actor"]
            else:
                assert agents[e["actor"]]["principal"] == r
    assert run["started_at"] <= events[0]["ts"] and run["ended_at"] == events[-1]["ts"]
    for au in run["audits"]:
        assert au["source"] in {"l1-checks", "judge-l2"}
        assert au["agent"] in agents and all(0 <= s < len(events) for s in au["evidence"])


def test_same_seed_same_corpus_and_different_seed_differs():
    a = generate_corpus(25, seed=11)
    b = generate_corpus(25, seed=11)
    c = generate_corpus(25, seed=12)
    assert _dump(a) == _dump(b)
    assert _dump(a) != _dump(c)
    assert [d.run["run_id"] for d in a] != [d.run["run_id"] for d in c]


def test_runs_are_independent_and_streamable():
    big = generate_corpus(30, seed=4)
    small = list(generate_runs(12, seed=4))
    assert _dump(small) == _dump(big[:12])
    assert _dump([generate_run(17, seed=4)]) == _dump([big[17]])
    lazy = generate_runs(25_000, seed=4)  # lazy: creating the iterator generates nothing
    assert next(lazy).run == big[0].run


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="n must be"):
        generate_runs(-1)
    with pytest.raises(TypeError, match="n must be an integer"):
        generate_runs("10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed must be an integer"):
        generate_corpus(2, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_events"):
        generate_long_run(0)


def test_every_run_is_normalized_canonical(corpus200):
    for d in corpus200:
        check_contract(d.run)
        assert normalize_run(d.run, "demo") == d.run
        assert d.run["metadata"]["demo_truth"] == d.truth
    json.dumps([d.run for d in corpus200], allow_nan=False)  # plain JSON, no NaN


def test_agents_principals_families_alignments(corpus200):
    families, alignments, n_agents, models = Counter(), Counter(), Counter(), Counter()
    for d in corpus200:
        r = d.run
        families[r["scenario"]["family"]] += 1
        alignments[r["scenario"]["alignment"]] += 1
        n_agents[len(r["agents"])] += 1
        pids = {p["id"] for p in r["principals"]}
        owners = [a["principal"] for a in r["agents"]]
        assert all(o in pids for o in owners)
        assert len(set(owners)) == len(owners), "each agent acts for its own principal"
        assert len(r["principals"]) == len(r["agents"])
        for a in r["agents"]:
            models[a["model"]] += 1
            assert a["private_state"], "agents hold private state"
            assert a["harness"]
        assert r["principals"][0]["objective"] and r["principals"][0]["constraints"]
        assert r["scenario"]["title"] and r["scenario"]["description"]
        assert r["scenario"]["id"].startswith(r["scenario"]["family"] + "/")
    assert {"commerce", "contracting", "crm", "legal", "security"} <= set(families)
    assert set(alignments) == {"cooperative", "mixed", "competitive"}
    assert set(n_agents) == {2, 3, 4}
    assert set(models) == {"model-a", "model-b", "model-c", "model-d", "model-e"}


def test_scenario_ids_carry_one_consistent_scenario():
    seen: dict[str, dict] = {}
    for seed in (0, 1):
        for d in generate_corpus(150, seed=seed):
            sc = d.run["scenario"]
            assert seen.setdefault(sc["id"], sc) == sc
    assert len(seen) < 300, "scenarios repeat across runs"


def test_event_mix_and_lengths(corpus200):
    kinds = Counter()
    lengths = []
    unengaged_peer = 0
    for d in corpus200:
        r = d.run
        lengths.append(len(r["events"]))
        kinds.update(e["kind"] for e in r["events"])
        contacted = {x for e in r["events"] if e["visibility"] == "shared" for x in [e["actor"], *e["recipients"]]}
        if any(a["id"] not in contacted for a in r["agents"]):
            unengaged_peer += 1
    assert set(kinds) == EVENT_KINDS
    lengths.sort()
    assert 15 <= lengths[len(lengths) // 2] <= 80
    assert sum(15 <= n <= 80 for n in lengths) >= 0.8 * len(lengths)
    assert unengaged_peer >= 10, "some runs have a reachable peer that is never contacted"


def test_long_runs():
    demo = generate_long_run(2000, seed=1)
    r = demo.run
    assert len(r["events"]) >= 2000
    assert len(r["agents"]) == 4
    check_contract(r)
    assert normalize_run(r, "demo") == r
    assert demo.truth, "the long run carries a seeded failure"
    assert len(generate_long_run(300, seed=2).run["events"]) >= 300
    long_in_corpus = [d for d in generate_corpus(600, seed=3) if len(d.run["events"]) >= 300]
    assert long_in_corpus, "a regular corpus holds a few long runs"


def test_speed_2000_runs():
    t0 = time.perf_counter()
    n = sum(1 for _ in generate_runs(2000, seed=9))
    elapsed = time.perf_counter() - t0
    assert n == 2000
    assert elapsed < 20, f"2,000 runs took {elapsed:.1f} s"


def test_statuses_and_aggregate(corpus600):
    statuses = Counter(d.run["status"] for d in corpus600)
    assert statuses["completed"] > 0.85 * len(corpus600)
    assert {"failed", "timeout", "error"} <= set(statuses)
    for d in corpus600:
        r = d.run
        if r["status"] == "completed":
            assert r["aggregate_score"] == 1.0
        elif r["status"] == "error":
            assert r["aggregate_score"] is None
        else:
            assert r["aggregate_score"] == 0.0
