"""units.py on a small hand-built label set; expected numbers are worked out by hand below.

Annotators A, B and "judge:gpt" (J). Runs r1..r4. Modes M1, M2 (category X) and M3 (category Y).
A and B submitted r1..r4, J submitted r1, r2 (missing on r3, r4).

    run  A          B           J
    r1   M1 (a1)    M1 (a1)     M1 (a2)
    r2   -          M2 (no agent)  -
    r3   M1, M3     M1, M3      (not submitted; its label there is ignored)
    r4   -          -

M1 (runs x A,B,J): r1 1,1,1  r2 0,0,0  r3 1,1,.  r4 0,0,.   -> perfect agreement
M2:                r1 0,0,0  r2 0,1,0  r3 0,0,.  r4 0,0,.
  percent = (1 + 1/3 + 1 + 1) / 4 = 5/6
  Fleiss: pi_1 = (0 + 1/3 + 0 + 0) / 4 = 1/12, p_e = (1/12)^2 + (11/12)^2 = 122/144,
          kappa = (120/144 - 122/144) / (22/144) = -1/11
  AC1: p_e = 2 (1/12)(11/12) = 22/144, AC1 = (120 - 22) / (144 - 22) = 98/122
  alpha: n = 10 (n_0 = 9, n_1 = 1); D_o sum = 2*2*1/(3-1) = 2; sum n_c n_k d = 18;
         alpha = 1 - 9 * 2 / 18 = 0
  Cohen: A-B kappa 0 (p_o = 3/4 = p_e), A-J undefined (no variation), B-J 0 -> mean 0
  prevalence = 1/10 (not < 0.1: no kappa-paradox flag at the boundary)
Category X (M1 or M2): r1 1,1,1  r2 0,1,0  r3 1,1,.  r4 0,0,.  -> percent 5/6, prevalence 6/10
Overall (12 run x mode units): percent = (11 + 1/3)/12 = 17/18;
  Fleiss: pi_1 = (2 + 1/3 + 1) / 12 = 10/36, p_e = (100 + 676)/1296, kappa = 448/520
Sets of modes per run: r1 {M1}x3; r2 {}, {M2}, {}; r3 {M1,M3}x2; r4 {}, {}.
  n = 10, D_o sum = 2 * 2 * 1 * 1 / 2 = 2 (MASI and Jaccard of {} vs {M2} are 1)
  MASI: d({M1},{M1,M3}) = 1 - 1/2 * 2/3 = 2/3; sum n_c n_k d = 2*(12 + 3 + 4 + 4 + 8 + 2) = 66
        alpha = 1 - 9 * 2 / 66 = 8/11
  Jaccard: d({M1},{M1,M3}) = 1/2; sum = 2*(12 + 3 + 3 + 4 + 8 + 2) = 64; alpha = 1 - 18/64
Blame: (r1,M1) AB same, AJ differ, BJ differ; (r3,M1) AB same; (r3,M3) AB same -> 3/5
Evidence: (r1,M1) AB {1,2}/{2,3} = 1/3, AJ {1,2}/{2} = 1/2, BJ 1/2; (r3,M1) both empty
  (excluded); (r3,M3) {7}/{7} = 1 -> mean (1/3 + 1/2 + 1/2 + 1)/4 = 7/12
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from app.agreement.units import (
    agreement_report,
    agreement_with_reference,
    build_matrices,
    disagreement_ranking,
    mode_sets,
)

MODES = ["M1", "M2", "M3"]
MODE_CATEGORY = {"M1": "X", "M2": "X", "M3": "Y"}
J = "judge:gpt"


@pytest.fixture()
def data():
    labels = pd.DataFrame(
        [
            ("A", "r1", "M1", "X", "a1", [1, 2]),
            ("B", "r1", "M1", "X", "a1", [2, 3]),
            (J, "r1", "M1", "X", "a2", [2]),
            ("B", "r2", "M2", "X", None, []),
            ("A", "r3", "M1", "X", "a1", None),
            ("A", "r3", "M3", "Y", "a2", [7]),
            ("B", "r3", "M1", "X", "a1", []),
            ("B", "r3", "M3", "Y", "a2", [7]),
            (J, "r3", "M2", "X", "a1", [1]),  # J did not submit r3: ignored
        ],
        columns=["annotator", "run_id", "mode", "category", "agent", "evidence"],
    )
    submissions = pd.DataFrame(
        [(a, r) for a in ("A", "B") for r in ("r1", "r2", "r3", "r4")] + [(J, "r1"), (J, "r2")],
        columns=["annotator", "run_id"],
    )
    agents = pd.DataFrame(
        [(r, a) for r in ("r1", "r2", "r3", "r4") for a in ("a1", "a2")], columns=["run_id", "agent_id"]
    )
    return labels, submissions, agents


def _by(rows, key, value):
    return next(r for r in rows if r[key] == value)


def test_build_matrices(data):
    labels, submissions, _ = data
    mx = build_matrices(labels, submissions, MODES, MODE_CATEGORY)
    assert mx.annotators == ["A", "B", J] and mx.runs == ["r1", "r2", "r3", "r4"]
    assert mx.presence[:, 0, :].tolist() == [[1, 1, 1], [0, 0, 0], [1, 1, -1], [0, 0, -1]]
    assert mx.presence[:, 1, :].tolist() == [[0, 0, 0], [0, 1, 0], [0, 0, -1], [0, 0, -1]]
    assert mx.category_presence[:, 0, :].tolist() == [[1, 1, 1], [0, 1, 0], [1, 1, -1], [0, 0, -1]]
    assert mx.ignored_labels == 1
    sets = mode_sets(mx)
    r2 = [None if c < 0 else sets.domain[c] for c in sets.codes[1]]
    assert r2 == [frozenset(), frozenset({"M2"}), frozenset()]


def test_report_run_level(data):
    labels, submissions, agents = data
    rep = agreement_report(labels, submissions, MODES, MODE_CATEGORY, agents, n_boot=0)
    json.dumps(rep, allow_nan=False)
    assert rep["annotators"] == ["A", "B", J] and rep["n_runs"] == 4 and rep["ignored_labels"] == 1

    m1 = _by(rep["modes"], "mode", "M1")
    assert m1["category"] == "X" and m1["n_units"] == 4 and m1["prevalence"] == pytest.approx(0.5)
    for c in ("percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1"):
        assert m1[c]["value"] == pytest.approx(1.0), c

    m2 = _by(rep["modes"], "mode", "M2")
    assert m2["prevalence"] == pytest.approx(0.1)
    assert m2["percent"]["value"] == pytest.approx(5 / 6)
    assert m2["fleiss_kappa"]["value"] == pytest.approx(-1 / 11)
    assert m2["gwet_ac1"]["value"] == pytest.approx(98 / 122)
    assert m2["krippendorff_alpha"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert m2["cohen_kappa"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert m2["kappa_paradox"] is False and m2["advice"] is None

    x = _by(rep["categories"], "category", "X")
    assert x["modes"] == ["M1", "M2"]
    assert x["percent"]["value"] == pytest.approx(5 / 6) and x["prevalence"] == pytest.approx(0.6)

    ov = rep["overall"]
    assert ov["n_units"] == 12 and ov["prevalence"] == pytest.approx(8 / 30)
    assert ov["percent"]["value"] == pytest.approx(17 / 18)
    assert ov["fleiss_kappa"]["value"] == pytest.approx(448 / 520)
    assert ov["set_alpha"]["masi"]["value"] == pytest.approx(8 / 11)
    assert ov["set_alpha"]["jaccard"]["value"] == pytest.approx(1 - 18 / 64)

    pw = rep["pairwise_cohen"]
    assert pw["annotators"] == ["A", "B", J]
    assert pw["n_units"][0][1] == 12 and pw["n_units"][0][2] == 6
    assert pw["matrix"][1][1] is None

    assert rep["blame_agreement"] == {
        "n_pairs": 5,
        "n_same_agent": 3,
        "proportion": pytest.approx(0.6),
        "n_pairs_unattributed": 0,
    }
    ev = rep["evidence_overlap"]
    assert ev["n_pairs"] == 4 and ev["n_pairs_without_evidence"] == 1
    assert ev["mean_jaccard"] == pytest.approx(7 / 12)


def test_report_agent_level(data):
    labels, submissions, agents = data
    rep = agreement_report(labels, submissions, MODES, MODE_CATEGORY, agents, level="agent", n_boot=0)
    assert rep["n_units"] == 8 and rep["unattributed_labels"] == 1  # B's r2 label names no agent
    m1 = _by(rep["modes"], "mode", "M1")
    # (r1,a1) 1,1,0 and (r1,a2) 0,0,1 agree on 1/3 of pairs; the other 6 units agree fully
    assert m1["percent"]["value"] == pytest.approx((6 + 2 / 3) / 8)
    m2 = _by(rep["modes"], "mode", "M2")
    assert m2["prevalence"] == 0.0 and m2["krippendorff_alpha"]["value"] is None
    assert "variation" in m2["krippendorff_alpha"]["reason"]
    with pytest.raises(ValueError, match="agents"):
        agreement_report(labels, submissions, MODES, MODE_CATEGORY, None, level="agent", n_boot=0)


def test_kappa_paradox_flag():
    # 40 runs, two annotators; mode rare: both mark it on 1 run, one of them on 1 more
    runs = [f"r{i:02d}" for i in range(40)]
    labels = pd.DataFrame(
        [("A", "r00", "M1"), ("B", "r00", "M1"), ("A", "r01", "M1"), ("B", "r02", "M1")],
        columns=["annotator", "run_id", "mode"],
    )
    subs = pd.DataFrame([(a, r) for a in "AB" for r in runs], columns=["annotator", "run_id"])
    rep = agreement_report(labels, subs, ["M1"], {"M1": "X"}, n_boot=0)
    row = rep["modes"][0]
    # prevalence 4/80 = 0.05; percent 38/40 = 0.95; Fleiss: pi_1 = 0.05, p_e = 0.905,
    # kappa = (0.95 - 0.905) / 0.095 = 0.4737 -> not < 0.4: no flag yet
    assert row["prevalence"] == pytest.approx(0.05)
    assert row["fleiss_kappa"]["value"] == pytest.approx(0.045 / 0.095)
    assert row["kappa_paradox"] is False
    labels2 = labels.iloc[1:]  # now they never agree on the mode: percent 37/40, kappa < 0
    row2 = agreement_report(labels2, subs, ["M1"], {"M1": "X"}, n_boot=0)["modes"][0]
    assert row2["percent"]["value"] == pytest.approx(37 / 40)
    assert row2["fleiss_kappa"]["value"] < 0.4
    assert row2["kappa_paradox"] is True and "AC1" in row2["advice"]
    assert row2["gwet_ac1"]["value"] > 0.9


def test_report_bootstrap_is_deterministic(data):
    labels, submissions, agents = data
    a = agreement_report(labels, submissions, MODES, MODE_CATEGORY, agents, n_boot=50, seed=3)
    b = agreement_report(labels, submissions, MODES, MODE_CATEGORY, agents, n_boot=50, seed=3)
    assert a == b
    assert a["overall"]["percent"]["ci"] is not None
    only = agreement_report(labels, submissions, MODES, MODE_CATEGORY, n_boot=0, coefficients=("percent",))
    assert "fleiss_kappa" not in only["modes"][0] and "percent" in only["modes"][0]
    with pytest.raises(ValueError, match="coefficient"):
        agreement_report(labels, submissions, MODES, MODE_CATEGORY, n_boot=0, coefficients=("kappa",))


def test_disagreement_ranking(data):
    labels, submissions, _ = data
    rows = disagreement_ranking(labels, submissions, MODES)
    assert [r["run_id"] for r in rows] == ["r2", "r1", "r3", "r4"]
    r2 = rows[0]
    assert r2["n_disagreements"] == 1 and r2["disputed_modes"] == ["M2"] and r2["n_annotators"] == 3
    # Jaccard distances: A-B 1, A-J 0 (both empty), B-J 1
    assert r2["mean_set_distance"] == pytest.approx(2 / 3)
    assert r2["annotator_modes"] == {"A": [], "B": ["M2"], J: []}
    assert rows[2]["annotator_modes"] == {"A": ["M1", "M3"], "B": ["M1", "M3"]}


def test_agreement_with_reference(data):
    labels, submissions, _ = data
    gold = pd.DataFrame([("r1", "M1"), ("r3", "M1")], columns=["run_id", "mode"])
    out = agreement_with_reference(labels, submissions, gold, ["r1", "r2", "r3"], MODES)
    json.dumps(out, allow_nan=False)
    assert out["n_reference_runs"] == 3
    a = _by(out["annotators"], "annotator", "A")
    # A on r1..r3: 9 cells, 8 match; 2x2: both yes 2, A-only 1, both no 6
    # p_e = (3/9)(2/9) + (6/9)(7/9) = 48/81, kappa = (72 - 48)/(81 - 48) = 24/33
    assert a["kind"] == "human" and a["n_runs"] == 3
    assert a["percent"]["value"] == pytest.approx(8 / 9)
    assert a["cohen_kappa"]["value"] == pytest.approx(24 / 33)
    m1 = _by(a["per_mode"], "mode", "M1")
    m3 = _by(a["per_mode"], "mode", "M3")
    assert (m1["tp"], m1["fp"], m1["fn"], m1["f1"]) == (2, 0, 0, 1.0)
    assert (m3["tp"], m3["fp"], m3["precision"], m3["recall"], m3["f1"]) == (0, 1, 0.0, None, 0.0)
    assert a["micro"]["precision"] == pytest.approx(2 / 3) and a["micro"]["f1"] == pytest.approx(0.8)
    j = _by(out["annotators"], "annotator", J)
    assert j["kind"] == "judge" and j["n_runs"] == 2
    assert j["percent"]["value"] == 1.0 and j["cohen_kappa"]["value"] == 1.0


def test_bad_frames_name_the_problem(data):
    labels, submissions, _ = data
    with pytest.raises(ValueError, match="submissions: missing column"):
        agreement_report(labels, submissions.drop(columns=["run_id"]), MODES, MODE_CATEGORY, n_boot=0)
    bad = labels.copy()
    bad.loc[2, "mode"] = "ZZ9"
    with pytest.raises(ValueError, match=r"labels row 2: mode 'ZZ9'"):
        agreement_report(bad, submissions, MODES, MODE_CATEGORY, n_boot=0)
    with pytest.raises(ValueError, match="mode_category.*M3"):
        agreement_report(labels, submissions, MODES, {"M1": "X", "M2": "X"}, n_boot=0)
    with pytest.raises(ValueError, match="level"):
        agreement_report(labels, submissions, MODES, MODE_CATEGORY, n_boot=0, level="principal")
    empty = agreement_report(labels.iloc[0:0], submissions.iloc[0:0], MODES, MODE_CATEGORY, n_boot=10)
    assert empty["n_runs"] == 0 and empty["overall"]["percent"]["value"] is None
    json.dumps(empty, allow_nan=False)


def test_set_alpha_too_large_is_a_reason_not_a_memory_error(data, monkeypatch):
    """When the k x k set distances would pass MAX_SET_DISTANCE_BYTES (the bootstrap's path here),
    the set-valued alpha is None with the reason and the rest of the report is computed; under the
    bound the same report gives the values by hand (test_report_run_level)."""
    from app.agreement import coefficients

    labels, submissions, agents = data
    monkeypatch.setattr(coefficients, "MAX_SET_DISTANCE_BYTES", 8)  # a 1 x 1 matrix at most
    rep = agreement_report(labels, submissions, MODES, MODE_CATEGORY, agents, n_boot=20)
    ov = rep["overall"]
    for d in ("masi", "jaccard"):
        assert ov["set_alpha"][d]["value"] is None
        assert "distinct label sets" in ov["set_alpha"][d]["reason"] and "MAX_SET_DISTANCE_BYTES" in \
            ov["set_alpha"][d]["reason"]
    assert ov["fleiss_kappa"]["value"] == pytest.approx(448 / 520)
    # with no bootstrap the matrix-free point path still gives the value
    rep0 = agreement_report(labels, submissions, MODES, MODE_CATEGORY, agents, n_boot=0)
    assert rep0["overall"]["set_alpha"]["masi"]["value"] == pytest.approx(8 / 11)
