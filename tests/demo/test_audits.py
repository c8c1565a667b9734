"""Machine audits: the deterministic L1 checker (hand-built runs and the corpus) and the noisy L2 judge."""
from __future__ import annotations

import random

from app.demo.audits import L1_MODES, l1_checks, l2_judge


def _ev(seq, kind, actor, recipients=(), data=None, visibility=None):
    vis = visibility or ("shared" if recipients and not actor.startswith("p_") else "private")
    return {"seq": seq, "ts": f"2026-01-01T00:00:{seq:02d}Z", "kind": kind, "actor": actor,
            "recipients": list(recipients), "visibility": vis, "content": None, "data": data or {},
            "parent_seq": None, "hop": None, "metadata": {}}


def _run(events, buyer_mandate=None):
    return {
        "run_id": "hand", "events": events,
        "agents": [
            {"id": "buyer", "principal": "p_buyer", "private_state": {
                "mandate": buyer_mandate or {"term": "price", "max": 100, "requires_approval": True}}},
            {"id": "seller", "principal": "p_seller", "private_state": {
                "mandate": {"term": "price", "min": 80}}},
        ],
    }


def _found(run):
    return {(a["mode"], a["agent"]): a["evidence"] for a in l1_checks(run)}


def test_l1_hand_built_run_with_four_failures():
    events = [
        _ev(0, "message", "buyer", ["seller"], {"act": "request", "terms": {"ref": "R1"}}),
        _ev(1, "message", "seller", ["buyer"], {"act": "offer", "terms": {"value": 95}}),
        _ev(2, "message", "buyer", ["seller"], {"act": "accept", "terms": {"value": 95}}),
        _ev(3, "message", "seller", ["buyer"], {"act": "confirm", "terms": {"value": 95}}),
        _ev(4, "message", "buyer", ["seller"], {"act": "sign"}),                      # no approval asked
        _ev(5, "state_update", "seller", data={"record": {"ref": "R1", "value": 105}}),  # said 95
        _ev(6, "tool_call", "seller", data={"tool": "ship", "args": {}}),
        _ev(7, "tool_result", "seller", data={"tool": "ship", "status": "error", "result": {}}),
        _ev(8, "message", "seller", ["buyer"], {"act": "done", "claims": [{"action": "ship", "status": "success"}]}),
        _ev(9, "artifact", "seller", ["buyer"], {"document": {"ref": "R1", "value": 105}}),
        _ev(10, "state_update", "buyer", data={"record": {"ref": "R1", "value": 95}}),
    ]
    assert _found(_run(events)) == {
        ("CF3", "buyer"): [4],
        ("GR2", "seller"): [3, 5],
        ("GR3", "seller"): [5, 9],   # the conversation agreed 95: the seller's record is the odd one out
        ("VF3", "seller"): [7, 8],
    }


def test_l1_clean_exchange_finds_nothing():
    events = [
        _ev(0, "message", "buyer", ["seller"], {"act": "request", "terms": {"ref": "R1"}}),
        _ev(1, "message", "seller", ["buyer"], {"act": "offer", "terms": {"value": 90}}),
        _ev(2, "message", "buyer", ["seller"], {"act": "accept", "terms": {"value": 90}}),
        _ev(3, "message", "p_buyer", ["buyer"], {"act": "approve"}, visibility="private"),
        _ev(4, "message", "buyer", ["seller"], {"act": "sign"}),
        _ev(5, "state_update", "seller", data={"record": {"ref": "R1", "value": 90}}),
        _ev(6, "tool_result", "seller", data={"tool": "ship", "status": "error", "result": {}}),
        _ev(7, "tool_result", "seller", data={"tool": "ship", "status": "ok", "result": {}}),   # retried
        _ev(8, "message", "seller", ["buyer"], {"act": "done", "claims": [{"action": "ship", "status": "success"}]}),
        _ev(9, "state_update", "buyer", data={"record": {"ref": "R1", "value": 90}}),
    ]
    assert _found(_run(events)) == {}


def test_l1_limits_and_undocumented_fields():
    events = [
        _ev(0, "message", "seller", ["buyer"], {"act": "offer", "terms": {"value": 120}}),
        _ev(1, "message", "buyer", ["seller"], {"act": "accept", "terms": {"value": 120}}),   # above max 100
        _ev(2, "message", "seller", ["buyer"], {"act": "confirm", "terms": {"value": 70}}),   # below min 80
        _ev(3, "artifact", "seller", ["buyer"], {"document": {"date": "2026-02-10"}}),
        _ev(4, "state_update", "seller", data={"record": {"date": "2026-02-10"}}),
        _ev(5, "state_update", "buyer", data={"record": {"date": "2026-02-03"}}),  # date never stated in talk
    ]
    found = _found(_run(events, {"term": "price", "max": 100}))
    assert found == {("CF3", "buyer"): [1], ("CF3", "seller"): [2], ("GR3", "buyer"): [3, 5]}


def test_l1_audits_agree_with_seeded_truth(corpus600):
    shipped = 0
    for d in corpus600:
        expected = {(t["mode"], t["agent"]) for t in d.truth if t["mode"] in L1_MODES}
        got = l1_checks(d.run)
        assert {(a["mode"], a["agent"]) for a in got} == expected, d.run["run_id"]
        in_run = [a for a in d.run["audits"] if a["source"] == "l1-checks"]
        if in_run:
            assert in_run == got
        shipped += bool(in_run)
        truth_ev = {(t["mode"], t["agent"]): set(t["evidence"]) for t in d.truth}
        for a in got:
            assert set(a["evidence"]) & truth_ev[(a["mode"], a["agent"])], "L1 points at the truth's events"
    assert shipped > 50


def test_l2_judge_is_noisy_but_informative(corpus600):
    hits = misses = wrong_agent = false_pos = l2_total = runs_with_l2 = 0
    for d in corpus600:
        l2 = [a for a in d.run["audits"] if a["source"] == "judge-l2"]
        if not l2:
            continue
        runs_with_l2 += 1
        got = {(a["mode"], a["agent"]) for a in l2}
        truth = {(t["mode"], t["agent"]) for t in d.truth}
        l2_total += len(got)
        for mode, agent in truth:
            if (mode, agent) in got:
                hits += 1
            else:
                misses += 1
                if any(m == mode and a != agent for m, a in got):
                    wrong_agent += 1
        false_pos += len({(m, a) for m, a in got if (m, a) not in truth})
        for a in l2:
            assert a["level"] == "L2" and 0.5 <= a["metadata"]["confidence"] <= 1.0
    assert runs_with_l2 > 150
    recall = hits / (hits + misses)
    assert 0.45 <= recall <= 0.8, recall
    assert wrong_agent > 0
    assert 0.05 <= false_pos / l2_total <= 0.4


def test_l2_judge_is_deterministic_in_its_rng(corpus200):
    d = next(d for d in corpus200 if len(d.truth) >= 2)
    a = l2_judge(d.run, d.truth, random.Random(5))
    b = l2_judge(d.run, d.truth, random.Random(5))
    assert a == b
