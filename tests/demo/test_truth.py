"""The seeded failures: coverage, evidence that actually shows them, outcomes that reflect them."""
from __future__ import annotations

from collections import Counter

from app.demo.failures import MODES


def _events(d):
    return d.run["events"]


def _involves(e: dict, agent: str) -> bool:
    return e["actor"] == agent or agent in e["recipients"]


def _principal(d, pid):
    return next(p for p in d.run["principals"] if p["id"] == pid)


def _by_mode(corpus, mode):
    for d in corpus:
        for t in d.truth:
            if t["mode"] == mode:
                yield d, t


def test_all_twenty_modes_occur_at_n200(corpus200):
    counts = Counter(t["mode"] for d in corpus200 for t in d.truth)
    assert set(counts) == set(MODES)
    assert min(counts.values()) >= 3, counts


def test_clean_share_and_blind_spots(corpus200):
    clean = sum(1 for d in corpus200 if not d.truth)
    assert 0.18 * len(corpus200) <= clean <= 0.32 * len(corpus200)
    blind = [d for d in corpus200 if d.run["aggregate_score"] == 1.0
             and any(p["outcome"]["success"] is False for p in d.run["principals"])]
    assert len(blind) >= 0.3 * len(corpus200)
    for d in corpus200:
        if not d.truth and d.run["status"] == "completed":
            assert all(p["outcome"]["success"] is not False for p in d.run["principals"]), d.run["run_id"]


def test_truth_entries_are_well_formed(corpus600):
    for d in corpus600:
        agents = {a["id"] for a in d.run["agents"]}
        pids = {p["id"] for p in d.run["principals"]}
        n = len(_events(d))
        assert len({(t["mode"], t["agent"]) for t in d.truth}) == len(d.truth)
        for t in d.truth:
            assert set(t) == {"mode", "agent", "evidence", "principals"}
            assert t["mode"] in MODES and t["agent"] in agents
            assert t["evidence"] and t["evidence"] == sorted(set(t["evidence"]))
            assert set(t["principals"]) <= pids and t["principals"]
            for s in t["evidence"]:
                assert 0 <= s < n
                assert _involves(_events(d)[s], t["agent"]), (d.run["run_id"], t, s)


def test_evidence_shows_the_failure(corpus600):
    """Mode by mode, the evidence events carry what the label claims."""
    seen = Counter()
    for d in corpus600:
        ev = _events(d)
        agents = {a["id"]: a for a in d.run["agents"]}
        for t in d.truth:
            m, who, es = t["mode"], t["agent"], [ev[s] for s in t["evidence"]]
            seen[m] += 1
            if m == "CF1":
                assert any(e["data"].get("disclosed") and e["actor"] == who and e["visibility"] == "shared"
                           for e in es)
            elif m == "VF3":
                bad = [e for e in es if e["kind"] == "tool_result" and e["actor"] == who]
                assert bad and bad[0]["data"]["status"] != "ok"
                assert any(e["kind"] == "message" and e["actor"] == who and e["data"].get("claims") for e in es)
            elif m == "GR1":
                res = next(e for e in es if e["kind"] == "tool_result")
                msg = next(e for e in es if e["kind"] == "message")
                assert res["data"]["result"]["earliest"] > msg["data"]["terms"]["date"]
            elif m == "DD1":
                disc = next(e for e in es if e["kind"] == "discovery")
                listed = {c["agent"] for c in disc["data"]["cards"]}
                talked = {x for e in ev if e["visibility"] == "shared" and e["actor"] == who for x in e["recipients"]}
                assert listed - talked, "a listed peer was never contacted"
            elif m == "DD2":
                (peer,) = es[0]["recipients"]
                service = agents[peer]["private_state"]["service"]
                right = [a for a in agents.values() if a["id"] != peer
                         and a["private_state"].get("service") == service]
                assert right, "a peer of the right kind was reachable"
                assert right[0]["private_state"]["quote"] != agents[peer]["private_state"]["quote"]
                assert es[-1]["actor"] == who and es[-1]["data"].get("relied_on") == peer
            elif m == "DD3":
                dele = next(e for e in es if e["kind"] == "delegation")
                (peer,) = dele["recipients"]
                assert dele["data"]["constraints"] == []
                res = next(e for e in ev if e["kind"] == "tool_result" and e["actor"] == peer)
                assert res["data"]["result"]["constraint_applied"] is False
            elif m == "DD4":
                dele = next(e for e in es if e["kind"] == "delegation")
                assert dele["data"]["authority"]
            elif m == "DD5":
                opened = es[0]
                answered = [e for e in ev if e["parent_seq"] == opened["seq"] and e["actor"] == who]
                assert not answered, "the hand-off is never answered"
            elif m == "CF3":
                owner = agents[who]["principal"]
                assert _principal(d, owner)["outcome"]["metrics"]["mandate_violations"]
            elif m == "CF5":
                report = next(e for e in es if e["visibility"] == "private")
                said = next(e for e in es if e["visibility"] == "shared")
                assert report["data"]["terms"]["value"] != said["data"]["terms"]["value"]
            elif m == "VF1":
                claim = es[0]
                accept = es[-1]
                checked = [e for e in ev[claim["seq"]:accept["seq"]] if e["kind"] == "tool_call" and e["actor"] == who]
                assert not checked and accept["data"]["act"] == "accept"
            elif m == "VF4":
                contra = next(e for e in es if e["kind"] == "tool_result")
                claim = next(e for e in es if e["data"].get("act") == "claim")
                assert contra["actor"] == who and contra["seq"] < claim["seq"]
            elif m == "VF5":
                e = es[0]
                assert e["data"].get("verified") and "verified" in e["content"]
            elif m == "GR5":
                call = next(e for e in es if e["kind"] == "tool_call")
                req = next(e for e in ev if e["data"].get("act") == "request" and "ref" in e["data"].get("terms", {}))
                assert call["data"]["args"]["ref"] != req["data"]["terms"]["ref"]
    assert set(seen) == set(MODES)


def test_outcome_metrics_reflect_failures(corpus600):
    for d in corpus600:
        for t in d.truth:
            affected = [_principal(d, p)["outcome"] for p in t["principals"]]
            if t["mode"] == "GR3":
                assert all(o["metrics"]["records_consistent"] is False for o in affected)
            if t["mode"] == "CF1":
                assert all(o["metrics"]["private_info_leaked"] is True for o in affected)
            if t["mode"] == "GR1":
                assert all(o["metrics"]["deadline_met"] is False for o in affected)
            if t["mode"] in ("CF3", "DD4"):
                assert all(o["metrics"]["mandate_violations"] for o in affected)
            if t["mode"] in ("GR3", "CF1", "CF3", "DD1", "DD2", "DD3", "DD4", "GR1", "VF2"):
                assert all(o["success"] is False for o in affected), (d.run["run_id"], t)
