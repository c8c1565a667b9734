"""Precision / recall / F1 with intervals."""
from __future__ import annotations

import pytest
from statsmodels.stats.proportion import proportion_confint

from app.detectors.scoring import score_source, wilson


@pytest.mark.parametrize("k,n", [(0, 5), (3, 7), (20, 20), (41, 97)])
def test_wilson_matches_statsmodels(k, n):
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert wilson(k, n) == pytest.approx([lo, hi])
    assert wilson(0, 0) is None


def test_counts_per_mode_at_run_and_agent_level():
    ref = {"r1": {("CF1", "a")}, "r2": {("CF1", "b")}, "r3": set(), "r4": {("GR3", "a")}}
    units = {"r1": ("r1", {("CF1", "a")}), "r2": ("r2", {("CF1", "a")}), "r3": ("r3", {("CF1", "a")}),
             "r4": ("r4", set()), "r9": ("r9", {("CF1", "a")})}  # r9 has no reference: left out
    rep = score_source(units, ref, ["CF1", "GR3"], level="run", n_boot=200, seed=1)
    cf1, gr3 = rep["modes"]
    assert rep["n_units"] == 4
    assert (cf1["tp"], cf1["fp"], cf1["fn"]) == (2, 1, 0)
    assert cf1["precision"] == pytest.approx(2 / 3) and cf1["recall"] == 1.0 and cf1["f1"] == pytest.approx(0.8)
    assert cf1["precision_ci"][0] < 2 / 3 < cf1["precision_ci"][1]
    lo, hi = cf1["f1_ci"]
    assert 0 <= lo <= 0.8 <= hi <= 1
    assert (gr3["tp"], gr3["fn"], gr3["precision"], gr3["recall"]) == (0, 1, None, 0.0)
    agent = score_source(units, ref, ["CF1"], level="agent", n_boot=0)["modes"][0]
    assert (agent["tp"], agent["fp"], agent["fn"], agent["f1_ci"]) == (1, 2, 1, None)  # wrong agent on r2
    assert rep["overall"]["tp"] == 2 and rep["overall"]["fn"] == 1
    with pytest.raises(ValueError):
        score_source(units, ref, ["CF1"], level="event")
