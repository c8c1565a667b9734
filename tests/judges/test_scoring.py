"""Calibration maths on numbers worked out by hand (see the comments)."""
from __future__ import annotations

import pytest

from app.judges.scoring import score_judge


def _u(pk, labels, attribution=None, tokens=100, cost=0.01):
    return {"run_pk": pk, "run_id": f"r{pk}", "labels": [{"mode": m, "agent": a, "evidence": ev} for m, a, ev in labels],
            "attribution": attribution, "tokens": tokens, "cost": cost}


REFS = {1: {"source": "gold", "labels": {("A", "a1"): {1, 2}}},
        2: {"source": "gold", "labels": {("A", "a1"): {5}}},
        3: {"source": "human majority", "labels": {}},
        4: {"source": "gold", "labels": {("B", "a2"): {1}}}}
UNITS = [_u(1, [("A", "a1", [2, 3])], {"agent": "a1", "step": 1}),
         _u(2, [], {"agent": "a1", "step": 6}),
         _u(3, [("A", "a2", [0])], {"agent": "a2", "step": 0}),
         _u(4, [("B", "a1", [12])], {"agent": "a2", "step": 12}),
         _u(5, [("A", "a1", [1])])]  # no reference: left out


def test_score_by_hand():
    rep = score_judge(UNITS, REFS, ["A", "B"], {"A": "X", "B": "Y"}, attribution=True, k=1, n_boot=200)
    assert rep["n_runs"] == 4 and rep["n_judged"] == 5 and rep["reference"] == {"gold": 3, "human majority": 1}
    a, b = rep["modes"]
    # mode A: r1 tp, r2 fn, r3 fp, r4 tn
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (1, 1, 1, 1)
    assert a["precision"] == 0.5 and a["recall"] == 0.5 and a["f1"] == 0.5
    assert a["kappa"]["value"] == pytest.approx(0.0)  # po .5, pe .5*.5 + .5*.5 = .5
    # mode B: only r4, both say B (the agents differ: run level still agrees)
    assert (b["tp"], b["fp"], b["fn"], b["tn"]) == (1, 0, 0, 3) and b["kappa"]["value"] == pytest.approx(1.0)
    o = rep["overall"]
    assert (o["tp"], o["fp"], o["fn"], o["tn"]) == (2, 1, 1, 4)
    assert o["precision"] == pytest.approx(2 / 3) and o["recall"] == pytest.approx(2 / 3)
    # pooled 8 cells: po = 6/8, pe = (3/8)^2 + (5/8)^2 = 34/64, kappa = (48/64 - 34/64) / (30/64) = 14/30
    assert o["kappa"]["value"] == pytest.approx(14 / 30)
    assert o["kappa"]["ci"] is not None and o["precision_ci"][0] < 2 / 3 < o["precision_ci"][1]
    assert [c["category"] for c in rep["categories"]] == ["X", "Y"] and rep["categories"][0]["tp"] == 1
    assert rep["agent_accuracy"] == {"value": 0.5, "correct": 1, "n": 2}  # r1 right agent, r4 wrong
    assert rep["evidence_overlap"] == {"value": pytest.approx(1 / 3), "n": 1}  # {1,2} vs {2,3}
    labels, matrix = rep["confusion"]["labels"], rep["confusion"]["matrix"]
    cell = {(labels[i], labels[j]): n for i, row in enumerate(matrix) for j, n in enumerate(row) if n}
    assert cell == {("A", "A"): 1, ("A", "(none)"): 1, ("(none)", "A"): 1, ("B", "B"): 1}
    at = rep["attribution"]
    # reference points: r1 (a1, #1), r2 (a1, #5), r4 (a2, #1); the judge: #1, #6, #12
    assert at["n"] == 3 and at["agent_accuracy"] == 1.0
    assert at["step_accuracy"] == pytest.approx(1 / 3)  # "12" is not "1": steps compare as numbers
    assert at["step_accuracy_within_k"] == pytest.approx(2 / 3)  # #6 is within ±1 of #5
    assert [d["run_id"] for d in rep["disagreements"]] == ["r2", "r3", "r4"]
    assert rep["disagreements"][0]["missing"] == ["A by a1"] and rep["disagreements"][1]["extra"] == ["A by a2"]
    assert rep["cost"]["correct_labels"] == 2 and rep["cost"]["cost_per_correct_label"] == pytest.approx(0.04 / 2)
    assert rep["cost"]["tokens_per_correct_label"] == pytest.approx(200)


def test_within_k_widens():
    rep = score_judge(UNITS, REFS, ["A", "B"], {"A": "X", "B": "Y"}, attribution=True, k=11, n_boot=0)
    assert rep["attribution"]["step_accuracy_within_k"] == 1.0 and rep["overall"]["kappa"]["ci"] is None


def test_no_reference():
    rep = score_judge(UNITS, {}, ["A"], {"A": "X"}, n_boot=0)
    assert rep["n_runs"] == 0 and rep["overall"]["kappa"]["value"] is None and rep["disagreements"] == []
