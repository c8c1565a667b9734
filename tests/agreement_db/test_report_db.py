"""The agreement report from the database: matches the pure module on the same data and the
hand-worked values; filters; blind mode."""
from __future__ import annotations

import pytest
from sqlmodel import Session

from app.agreement import service
from app.agreement.units import agreement_report
from app.annotations.blind import set_revealed
from app.taxonomies.service import latest, mode_category, mode_codes

from . import _hand

N_BOOT = 50


@pytest.fixture
def hand(engine):
    with Session(engine) as s:
        users = _hand.build(s)
        tax = latest(s, "a2-failures")
        modes, cats = mode_codes(tax), mode_category(tax)
    return users, modes, cats


def _mode(report, code):
    return next(r for r in report["modes"] if r["mode"] == code)


def test_db_report_equals_the_pure_module_on_the_same_data(engine, hand):
    _, modes, cats = hand
    labels, subs, agents = _hand.frames()
    for level in ("run", "agent"):
        with Session(engine) as s:
            data = service.load_agreement_data(s)
        got = service.agreement_payload(data, level=level, n_boot=N_BOOT, seed=7)
        want = agreement_report(labels, subs, modes, cats, agents, level=level, n_boot=N_BOOT, seed=7)
        for key, value in want.items():
            assert got[key] == value, (level, key)
        assert got["annotators"] == ["a", "b", "c"]  # no judge, no draft-only user
        assert got["taxonomy"].startswith("a2-failures@")


def test_hand_worked_values(engine, hand):
    with Session(engine) as s:
        data = service.load_agreement_data(s)
    rep = service.agreement_payload(data, level="run", n_boot=N_BOOT, seed=1)
    cf1 = _mode(rep, "CF1")
    assert cf1["n_units"] == 4
    assert cf1["prevalence"] == pytest.approx(4 / 11)
    assert cf1["percent"]["value"] == pytest.approx(10 / 12)
    assert cf1["fleiss_kappa"]["value"] == pytest.approx(0.625)
    assert cf1["gwet_ac1"]["value"] == pytest.approx(0.7)
    assert cf1["krippendorff_alpha"]["value"] == pytest.approx(9 / 14)
    assert cf1["cohen_kappa"]["value"] == pytest.approx(19 / 30)
    for c in ("percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1"):
        lo, hi = cf1[c]["ci"]
        assert lo <= cf1[c]["value"] + 1e-9 and cf1[c]["value"] - 1e-9 <= hi, c
    assert cf1["kappa_paradox"] is False  # prevalence 0.36 is not extreme
    # a mode nobody marked: no variation -> kappa, alpha undefined with a reason; percent 1
    dd1 = _mode(rep, "DD1")
    assert dd1["percent"]["value"] == 1.0 and dd1["prevalence"] == 0.0
    for c in ("cohen_kappa", "fleiss_kappa", "krippendorff_alpha"):
        assert dd1[c]["value"] is None and "variation" in dd1[c]["reason"]
    pw = rep["pairwise_cohen"]
    assert pw["annotators"] == ["a", "b", "c"]
    # pooled over all run x mode cells: (a,b) disagree on r2 CF1 only
    assert pw["matrix"][0][0] is None and pw["n_units"][0][1] == 4 * len(rep["modes"])
    assert rep["blame_agreement"]["n_pairs"] == 4 and rep["blame_agreement"]["proportion"] == pytest.approx(0.5)
    assert rep["evidence_overlap"]["mean_jaccard"] == pytest.approx(7 / 12)
    ag = service.agreement_payload(data, level="agent", n_boot=0)
    assert ag["n_units"] == 8
    assert _mode(ag, "CF1")["percent"]["value"] == pytest.approx(6 / 8)
    assert _mode(ag, "CF1")["percent"]["ci"] is None  # n_boot=0


def test_filters_family_annotators_judges_taxonomy(engine, hand):
    _, modes, cats = hand
    with Session(engine) as s:
        fam = service.load_agreement_data(s, family="commerce")
        two = service.load_agreement_data(s, annotators="a, b")
        judges = service.load_agreement_data(s, include_judges=True)
        named = service.load_agreement_data(s, annotators=["a", "judge:judge-l2"])
        mast = service.load_agreement_data(s, taxonomy="mast")
        with pytest.raises(service.AgreementError) as e1:
            service.load_agreement_data(s, annotators="a,zed")
        with pytest.raises(service.AgreementError) as e2:
            service.load_agreement_data(s, taxonomy="a2-failures@99")
    assert e1.value.field == "annotators" and "zed" in str(e1.value)
    assert e2.value.field == "taxonomy"
    rep = service.agreement_payload(fam, n_boot=0)
    labels, subs, agents = _hand.frames(family="commerce")
    assert rep["n_runs"] == 3
    assert rep["modes"] == agreement_report(labels, subs, modes, cats, agents, n_boot=0)["modes"]
    assert service.agreement_payload(two, n_boot=0)["annotators"] == ["a", "b"]
    jr = service.agreement_payload(judges, n_boot=0)
    assert jr["annotators"] == ["a", "b", "c", "judge:judge-l2"]
    assert jr["annotator_kinds"]["judge:judge-l2"] == "judge"
    assert service.agreement_payload(named, n_boot=0)["annotators"] == ["a", "judge:judge-l2"]
    # under MAST only a's one annotation: nothing is pairable
    mr = service.agreement_payload(mast, n_boot=0)
    assert mr["annotators"] == ["a"] and mr["overall"]["fleiss_kappa"]["value"] is None


def test_api_report_and_blind_mode(engine, hand, client, token_for):
    rev, ann = token_for("rev"), token_for("ann")
    r = client.get("/api/v1/agreement", params={"n_boot": N_BOOT, "seed": 3, "level": "run"}, headers=rev)
    assert r.status_code == 200, r.text
    body = r.json()
    cf1 = _mode(body, "CF1")
    assert cf1["fleiss_kappa"]["value"] == pytest.approx(0.625)
    for c in ("percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1"):
        assert set(cf1[c]) >= {"value", "n_units", "ci"} and len(cf1[c]["ci"]) == 2
    assert {"modes", "categories", "overall", "pairwise_cohen", "blame_agreement", "evidence_overlap"} <= set(body)
    assert "prevalence" in body["overall"] and "kappa_paradox" in body["categories"][0]
    # the same request twice gives the same intervals (seeded)
    assert client.get("/api/v1/agreement", params={"n_boot": N_BOOT, "seed": 3}, headers=rev).json() == body
    # blank values mean the defaults (as in `?family=&n_boot=&seed=`)
    r = client.get("/api/v1/agreement", params={"family": "", "annotators": "", "taxonomy": "", "n_boot": "",
                                                 "seed": "", "include_judges": "false"}, headers=rev)
    assert r.status_code == 200, r.text
    assert r.json()["settings"]["n_boot"] == client.app.state.settings.bootstrap_resamples
    assert r.json()["settings"]["seed"] == 0 and r.json()["n_runs"] == 4
    r = client.get("/api/v1/agreement", params={"family": "commerce", "annotators": "a,b", "n_boot": 0}, headers=rev)
    assert r.json()["annotators"] == ["a", "b"] and r.json()["n_runs"] == 3
    # bad parameters: 422 naming the field
    for params, field in (({"level": "unit"}, "level"), ({"taxonomy": "nope@3"}, "taxonomy"),
                          ({"annotators": "zed"}, "annotators"), ({"n_boot": -1}, "n_boot")):
        r = client.get("/api/v1/agreement", params=params, headers=rev)
        assert r.status_code == 422 and r.json()["detail"].startswith(field), (params, r.text)
    # blind mode: annotators get 403 until an admin reveals labels
    for path in ("/api/v1/agreement", "/api/v1/agreement/gold", "/api/v1/agreement/judges",
                 "/api/v1/agreement/disagreements"):
        r = client.get(path, headers=ann)
        assert r.status_code == 403 and "blind mode" in r.json()["detail"], path
    assert client.get("/api/v1/agreement").status_code == 401
    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert client.get("/api/v1/agreement", params={"n_boot": 0}, headers=ann).status_code == 200


def test_disagreements_and_judges_api(engine, hand, client, token_for):
    rev = token_for("rev")
    r = client.get("/api/v1/agreement/disagreements", headers=rev)
    assert r.status_code == 200
    runs = r.json()["runs"]
    # r1: CF1 marked by all three (agreed); r2: CF1 and GR1 disputed; r3, r4 unanimous
    # r2 disputed; r1, r3, r4 unanimous at the run level (ties: set distance 0, then run id)
    assert [x["run_id"] for x in runs] == ["r2", "r1", "r3", "r4"]
    assert runs[0]["disputed_modes"] == ["GR1", "CF1"]  # taxonomy order
    assert runs[0]["labels"]["a"] == [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}]
    assert runs[0]["no_failure"] == ["b"]
    from app.results.service import COMPUTATIONS

    n = COMPUTATIONS["agreement_disagreements"]
    again = client.get("/api/v1/agreement/disagreements", headers=rev)  # the stored result, not recomputed
    assert again.json()["runs"] == runs and again.json()["computed_at"] == r.json()["computed_at"]
    assert again.json()["stale"] is False and COMPUTATIONS["agreement_disagreements"] == n
    other = client.get("/api/v1/agreement/disagreements", params={"page_size": 2}, headers=rev).json()
    assert [x["run_id"] for x in other["runs"]] == ["r2", "r1"] and other["total"] == 4  # a page: its own key
    j = client.get("/api/v1/agreement/judges", params={"n_boot": 0}, headers=rev).json()
    assert j["pairwise_cohen"]["annotators"] == ["a", "b", "c", "judge:judge-l2"]
    assert j["pairwise_cohen"]["kinds"][-1] == "judge"
    assert [x["judge"] for x in j["judges"]] == ["judge:judge-l2"]
    # the judge submitted only r1 (CF1 buyer); human majority on r1 marks CF1 -> one true positive
    (vm,) = j["vs_human_majority"]["annotators"]
    assert vm["annotator"] == "judge:judge-l2" and vm["n_runs"] == 1
    assert vm["micro"]["tp"] == 1 and vm["micro"]["fp"] == 0 and vm["micro"]["fn"] == 0
    cf1 = next(p for p in vm["per_mode"] if p["mode"] == "CF1")
    assert cf1["precision"] == 1.0 and cf1["recall"] == 1.0
