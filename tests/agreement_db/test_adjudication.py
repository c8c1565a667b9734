"""Adjudication: unanimity pre-accepted, majority one click, add / edit / merge / undo, finish,
lock and reopen; validation naming the field; the REST API."""
from __future__ import annotations

import pytest
from sqlmodel import Session, select

from app.agreement import adjudication as adj
from app.annotations.models import GoldLabel, GoldRun, Label
from app.annotations.service import LockedError, save_annotation
from app.auth.service import get_user
from app.runs.service import get_run
from app.taxonomies.service import latest
from tests.annotations.factories import make_run, make_user

URL = "/api/v1/adjudication/"


def _label(mode, agent, ev):
    return {"mode": mode, "agent": agent, "evidence": ev}


@pytest.fixture
def setup(engine):
    """r1: a, b, c (humans) and the judge; r2: only a (one human)."""
    with Session(engine) as s:
        r1 = make_run(s, "r1", audits=[{"source": "judge-l2", "mode": "CF2", "agent": "seller_agent", "evidence": [4]}])
        r2 = make_run(s, "r2")
        users = {n: make_user(s, n, password=None) for n in ("a", "b", "c")}
        make_user(s, "rev", role="reviewer", password=None)
        tax = latest(s, "a2-failures")
        labels = {
            "a": [_label("CF1", "buyer_agent", [1]), _label("GR1", "seller_agent", [2])],
            "b": [_label("CF1", "buyer_agent", [1, 3]), _label("GR1", "seller_agent", [2])],
            "c": [_label("CF1", "buyer_agent", [0]), _label("VF1", "buyer_agent", [4])],
        }
        for n, labs in labels.items():
            save_annotation(s, users[n], r1, tax, labs, status="submitted")
        save_annotation(s, users["a"], r2, tax, [_label("CF1", "buyer_agent", [1])], status="submitted")
        s.commit()
    return engine


def _objs(s):
    tax = latest(s, "a2-failures")
    return get_run(s, "r1"), tax, get_user(s, "rev")


def test_open_preaccepts_unanimity_and_classifies_candidates(setup):
    with Session(setup) as s:
        run, tax, rev = _objs(s)
        gold = adj.open_adjudication(s, run, tax, rev)
        s.commit()
        view = adj.adjudication_view(s, run, tax)
    assert view["status"] == "open" and view["n_humans"] == 3
    assert [a["annotator"] for a in view["annotators"]] == ["a", "b", "c", "judge:judge-l2"]
    status = {(c["mode"], c["agent"]): c["status"] for c in view["candidates"]}
    assert status == {("CF1", "buyer_agent"): "unanimity", ("GR1", "seller_agent"): "majority",
                      ("VF1", "buyer_agent"): "minority", ("CF2", "seller_agent"): "judge"}
    (g,) = view["gold"]
    assert (g["mode"], g["agent"], g["origin"], g["accepted"]) == ("CF1", "buyer_agent", "unanimity", True)
    assert g["evidence"] == [0, 1, 3]  # union over the three annotators
    # opening again adds nothing; a run with one human gets no pre-accepted label
    with Session(setup) as s:
        run, tax, rev = _objs(s)
        adj.open_adjudication(s, run, tax, rev)
        adj.open_adjudication(s, get_run(s, "r2"), tax, rev)
        s.commit()
        assert len(s.exec(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id)).all()) == 1
        r2_gold = adj.adjudication_view(s, get_run(s, "r2"), tax)
    assert r2_gold["gold"] == [] and r2_gold["candidates"][0]["status"] == "majority"  # 1 of 1 is a majority


def test_actions_undo_accept_add_edit_merge_finish_lock_reopen(setup):
    with Session(setup) as s:
        run, tax, rev = _objs(s)
        gold = adj.open_adjudication(s, run, tax, rev)
        unanimity = s.exec(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id)).one()
        adj.apply_action(s, run, tax, rev, "undo", {"gold_label_id": unanimity.id})
        assert unanimity.accepted is False
        adj.open_adjudication(s, run, tax, rev)  # reopening the page keeps the undo
        assert len(s.exec(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id)).all()) == 1
        msg = adj.apply_action(s, run, tax, rev, "accept", {"mode": "GR1", "agent": "seller_agent"})
        assert "majority" in msg
        adj.apply_action(s, run, tax, rev, "accept", {"mode": "VF1", "agent": "buyer_agent"})
        added = adj.add_label(s, gold, run, tax, _label("DD2", "seller_agent", [3]), rev, "seen in event 3")
        assert (added.origin, added.rationale, added.created_by) == ("adjudication", "seen in event 3", rev.id)
        edited = adj.edit_label(s, gold, run, tax, added.id, _label("DD3", "seller_agent", [3, 4]), rev)
        assert (edited.mode, edited.evidence, edited.origin) == ("DD3", [3, 4], "adjudication")
        ids = [lab.id for lab in s.exec(select(Label).where(Label.mode == "CF1")).all()
               if lab.evidence in ([1], [1, 3])][:2]
        merged = adj.merge_labels(s, gold, run, tax, ids, rev, {"agent": "seller_agent"})
        assert (merged.mode, merged.agent, merged.evidence) == ("CF1", "seller_agent", [1, 3])
        adj.remove_label(s, gold, run, merged.id)
        with pytest.raises(adj.AdjudicationError) as e:
            adj.remove_label(s, gold, run, unanimity.id)
        assert e.value.field == "gold_label_id"
        with pytest.raises(adj.AdjudicationError) as e:
            adj.finish(s, gold, run, rev, "  ")
        assert e.value.field == "rationale"
        adj.finish(s, gold, run, rev, "GR1 by majority; VF1 confirmed in the trace")
        s.commit()
        rows = {(g.mode, g.origin, g.accepted) for g in s.exec(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id))}
        assert rows == {("CF1", "unanimity", False), ("GR1", "majority", True), ("VF1", "adjudication", True),
                        ("DD3", "adjudication", True)}
        g = s.get(GoldRun, gold.id)
        assert (g.status, g.no_failure, g.reviewer_id) == ("adjudicated", False, rev.id)
        assert g.rationale.startswith("GR1 by majority")
        # locked: no gold changes, no annotation changes, until reopened
        with pytest.raises(adj.AdjudicationLocked):
            adj.apply_action(s, run, tax, rev, "accept", {"mode": "CF1", "agent": "buyer_agent"})
        with pytest.raises(LockedError):
            save_annotation(s, get_user(s, "a"), run, tax, [], no_failure=True, status="submitted")
        adj.apply_action(s, run, tax, rev, "reopen", {})
        assert g.status == "open"
        # undo everything -> finishing records "no failure"
        for gl in s.exec(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id, GoldLabel.accepted.is_(True))).all():
            adj.set_accepted(s, gold, run, gl.id, False)
        adj.finish(s, gold, run, rev, "nothing holds up")
        s.commit()
        assert s.get(GoldRun, gold.id).no_failure is True


def test_validation_names_the_field(setup):
    with Session(setup) as s:
        run, tax, rev = _objs(s)
        gold = adj.open_adjudication(s, run, tax, rev)
        cases = [
            (_label("ZZ9", "buyer_agent", [1]), "label.mode"),
            (_label("CF3", "nobody", [1]), "label.agent"),
            (_label("CF3", "buyer_agent", [99]), "label.evidence[0]"),
            (_label("CF3", "buyer_agent", []), "label.evidence"),
            ({"mode": "CF3", "agent": "buyer_agent", "evidence": [1], "principals": ["mars"]}, "label.principals[0]"),
            ({"mode": "CF3", "agent": "buyer_agent", "evidence": [1], "colour": 1}, "label.colour"),
            (_label("CF1", "buyer_agent", [1]), "label.mode"),  # an accepted gold label has this pair
        ]
        for label, field in cases:
            with pytest.raises(adj.AdjudicationError) as e:
                adj.add_label(s, gold, run, tax, label, rev)
            assert e.value.field == field, (label, str(e.value))
        with pytest.raises(adj.AdjudicationError) as e:
            adj.apply_action(s, run, tax, rev, "accept", {"mode": "DD1", "agent": "buyer_agent"})
        assert e.value.field == "mode"
        with pytest.raises(adj.AdjudicationError) as e:
            adj.merge_labels(s, gold, run, tax, [999999], rev)
        assert e.value.field == "label_ids[0]"
        r1_ids = [lab["id"] for a in adj.submitted_labels(s, run, tax) for lab in a["labels"]]
        with pytest.raises(adj.AdjudicationError) as e:  # CF1, GR1, VF1 ... differ in mode
            adj.merge_labels(s, gold, run, tax, r1_ids, rev)
        assert e.value.field == "label.mode"
        r2_ids = [lab["id"] for a in adj.submitted_labels(s, get_run(s, "r2"), tax) for lab in a["labels"]]
        with pytest.raises(adj.AdjudicationError) as e:  # a label of another run
            adj.merge_labels(s, gold, run, tax, r1_ids[:1] + r2_ids, rev)
        assert e.value.field == "label_ids[1]"
        with pytest.raises(adj.AdjudicationError) as e:
            adj.apply_action(s, run, tax, rev, "explode", {})
        assert e.value.field == "action"


def test_rest_api(setup, client, token_for):
    rev = token_for("rev")
    r = client.get(URL + "r1", headers=rev)
    assert r.status_code == 200, r.text
    view = r.json()
    assert [g["origin"] for g in view["gold"]] == ["unanimity"]
    gid = view["gold"][0]["id"]
    assert client.get(URL + "r1", headers=token_for("a")).status_code == 403  # annotators may not adjudicate
    assert client.get(URL + "nope", headers=rev).status_code == 404
    r = client.post(URL + "r1", json={"action": "accept", "mode": "GR1", "agent": "seller_agent"}, headers=rev)
    assert r.status_code == 200 and "majority" in r.json()["message"]
    r = client.post(URL + "r1", json={"action": "undo", "gold_label_id": gid}, headers=rev)
    assert [g["accepted"] for g in r.json()["gold"] if g["id"] == gid] == [False]
    r = client.post(URL + "r1", json={"action": "add", "label": _label("CF3", "buyer_agent", [77])}, headers=rev)
    assert r.status_code == 422 and r.json()["detail"].startswith("label.evidence[0]: 77 is not an event seq")
    r = client.post(URL + "r1", json={"action": "add", "label": _label("CF3", "buyer_agent", ["x"])}, headers=rev)
    assert r.status_code == 422 and r.json()["detail"].startswith("label.evidence[0]")
    r = client.post(URL + "r1", json={"action": "add", "label": _label("CF3", "buyer_agent", [2]),
                                      "rationale": "buyer misstated the record"}, headers=rev)
    assert r.status_code == 200
    assert {(g["mode"], g["origin"]) for g in r.json()["gold"]} == {
        ("CF1", "unanimity"), ("GR1", "majority"), ("CF3", "adjudication")}
    r = client.post(URL + "r1", json={"action": "finish"}, headers=rev)
    assert r.status_code == 422 and r.json()["detail"].startswith("rationale")
    r = client.post(URL + "r1", json={"action": "finish", "rationale": "checked"}, headers=rev)
    assert r.status_code == 200 and r.json()["status"] == "adjudicated" and r.json()["reviewer"] == "rev"
    r = client.post(URL + "r1", json={"action": "accept", "mode": "VF1", "agent": "buyer_agent"}, headers=rev)
    assert r.status_code == 409
    r = client.post(URL + "r1", json={"action": "fly"}, headers=rev)
    assert r.status_code == 422 and r.json()["detail"].startswith("action")
    # gold agreement: r1 is the one adjudicated run; gold marks CF3, GR1 (CF1 undone)
    g = client.get("/api/v1/agreement/gold", params={"n_boot": 0}, headers=rev).json()
    assert g["n_reference_runs"] == 1 and g["gold_origins"] == {"unanimity": 0, "majority": 1, "adjudication": 1}
    rows = {a["annotator"]: a for a in g["annotators"]}
    # a marked CF1, GR1: tp GR1, fp CF1, fn CF3
    assert rows["a"]["micro"]["tp"] == 1 and rows["a"]["micro"]["fp"] == 1 and rows["a"]["micro"]["fn"] == 1
    assert rows["a"]["micro"]["precision"] == 0.5 and rows["a"]["micro"]["recall"] == 0.5
    assert rows["judge:judge-l2"]["kind"] == "judge" and rows["judge:judge-l2"]["micro"]["tp"] == 0
    assert rows["a"]["n_runs"] == 1  # r2 is not adjudicated
