"""Degenerate data, input validation, result serialisation and bootstrap behaviour."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from app.agreement import AgreementResult, compute, compute_coded, encode_ratings, pairwise_cohen_kappa
from app.agreement.coefficients import (
    COEFFICIENTS,
    R_NO_PAIRABLE,
    R_NO_RATINGS,
    R_NO_SHARED,
    R_NO_VARIATION,
    R_ONE_CATEGORY,
    R_ONE_RATER,
    jaccard_distance,
    masi_distance,
)

from ._data import random_ratings


def _all(ratings, **kw):
    return {c: compute(c, ratings, n_boot=kw.pop("n_boot", 0), **kw) for c in COEFFICIENTS}


# --- degenerate data --------------------------------------------------------------------------


def test_no_variation():
    ratings = [["a", "a", "a"], ["a", "a", None], ["a", None, "a"]]
    res = _all(ratings)
    assert res["percent"].value == 1.0
    for c in ("cohen_kappa", "fleiss_kappa", "krippendorff_alpha"):
        assert res[c].value is None, c
        assert res[c].reason.startswith("no") and "variation" in res[c].reason, c
    assert res["gwet_ac1"].value is None and res["gwet_ac1"].reason == R_ONE_CATEGORY
    # with a second known category AC1 is defined: p_e = 0, so AC1 = p_a = 1
    assert compute("gwet_ac1", ratings, categories=["a", "b"], n_boot=0).value == 1.0
    assert compute("fleiss_kappa", ratings, categories=["a", "b"], n_boot=0).reason == R_NO_VARIATION


def test_single_rater_and_unpairable_units():
    for c, r in _all([[1], [2], [1]]).items():
        assert r.value is None and r.reason == R_ONE_RATER and r.n_units == 0, c
    for c, r in _all([[1, None], [None, 2], [None, 1]]).items():
        assert r.value is None and r.reason == R_NO_PAIRABLE and r.n_units == 0, c


def test_no_ratings():
    for ratings in ([], [[None, None], [None, None]], [[], []]):
        for c, r in _all(ratings).items():
            assert r.value is None and r.reason == R_NO_RATINGS, (c, ratings)


def test_single_unit():
    ratings = [[1, 2, 1]]
    res = _all(ratings)
    assert res["percent"].value == pytest.approx(1 / 3)
    # alpha: D_o = 2 * 2 * 1 / (3 - 1) = 2, n = 3, sum n_c n_k delta = 4 -> 1 - 2 * 2 / 4 = 0
    assert res["krippendorff_alpha"].value == pytest.approx(0.0)
    boot = compute("krippendorff_alpha", ratings, n_boot=50)
    assert boot.ci == pytest.approx((0.0, 0.0))  # every resample is the same unit
    assert compute("percent", [[1, 1]], n_boot=10).to_dict() == {"value": 1.0, "n_units": 1, "ci": [1.0, 1.0]}


def test_cohen_pairs_without_shared_units():
    ratings = [[1, 2, None], [2, 1, None], [None, None, 1], [1, 1, None], [2, 2, None]]
    out = pairwise_cohen_kappa(ratings)
    assert out["matrix"][0][2] is None and out["n_units"][0][2] == 0
    reasons = {(p["a"], p["b"]): p.get("reason") for p in out["pairs"]}
    assert reasons[(0, 2)] == R_NO_SHARED and reasons[(1, 2)] == R_NO_SHARED
    # the mean is over the one defined pair: p_o = 0.5, p_e = 0.5 -> kappa 0
    assert out["mean"]["value"] == pytest.approx(0.0)
    assert out["matrix"][0][0] is None  # diagonal not measured
    two = compute("cohen_kappa", [[1, None], [None, 2], [1, 1], [2, None]], n_boot=0)
    assert two.value is None and two.n_units == 1 and two.reason == R_NO_VARIATION
    assert compute("cohen_kappa", [[1, None], [None, 2]], n_boot=0).reason == R_NO_PAIRABLE


def test_cohen_when_each_rater_constant_but_different():
    # p_o = 0 and p_e = 0: kappa = 0, defined (sklearn agrees)
    assert compute("cohen_kappa", [[1, 2]] * 5, n_boot=0).value == pytest.approx(0.0)


# --- results ----------------------------------------------------------------------------------


def test_to_dict_shape_and_no_nan():
    ok = AgreementResult(0.5, 10, (0.1, 0.9)).to_dict()
    assert ok == {"value": 0.5, "n_units": 10, "ci": [0.1, 0.9]}
    none = AgreementResult(None, 0, None, "why").to_dict()
    assert none == {"value": None, "n_units": 0, "ci": None, "reason": "why"}
    nan = AgreementResult(float("nan"), 3, (float("nan"), 1.0)).to_dict()
    assert nan["value"] is None and nan["ci"] is None and nan["reason"]
    json.dumps(nan, allow_nan=False)


def test_every_degenerate_result_is_json_clean():
    cases = [[], [[1]], [[1, 1]], [[1, None]], [["x", "x"], ["x", "x"]], [[1, 2]], [[[], []], [[], ["a"]]]]
    for ratings in cases:
        for c in COEFFICIENTS:
            d = compute(c, ratings, n_boot=20).to_dict()
            json.dumps(d, allow_nan=False)
            assert ("reason" in d) == (d["value"] is None)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"coefficient": "kappa"}, "coefficient"),
        ({"level": "nominalish"}, "level"),
        ({"weights": "cubic"}, "weights"),
        ({"distance": "hamming"}, "distance"),
        ({"coefficient": "fleiss_kappa", "weights": "linear"}, "weights"),
        ({"coefficient": "percent", "distance": "masi"}, "distance"),
        ({"coefficient": "gwet_ac1", "level": "ordinal"}, "level"),
        ({"n_boot": -1}, "n_boot"),
        ({"confidence": 1.5}, "confidence"),
        ({"categories": [1, 1, 2]}, "categories"),
    ],
)
def test_bad_parameters_name_the_parameter(kwargs, name):
    kw = {"coefficient": "krippendorff_alpha", "ratings": [[1, 2], [2, 2]], "n_boot": 0}
    kw.update(kwargs)
    with pytest.raises(ValueError, match=name):
        compute(kw.pop("coefficient"), kw.pop("ratings"), **kw)


def test_bad_cells_name_the_location():
    with pytest.raises(ValueError, match=r"ratings\[1\]\[0\].*not in categories"):
        compute("percent", [[1, 2], [3, 1]], categories=[1, 2], n_boot=0)
    with pytest.raises(ValueError, match=r"ratings\[0\]\[1\]"):
        compute("percent", [[1, {"a": 1}]], n_boot=0)
    with pytest.raises(ValueError, match=r"ratings\[1\]"):
        compute("percent", [[1, 2], 3], n_boot=0)
    with pytest.raises(ValueError, match="ratings"):
        compute("percent", "abc", n_boot=0)
    with pytest.raises(ValueError, match="level"):
        compute("krippendorff_alpha", [[["a"], ["a", "b"]]], level="interval", n_boot=0)


def test_ragged_rows_are_padded_and_nan_is_missing():
    a = compute("krippendorff_alpha", [[1, 2, 2], [1], [2, 2, float("nan")], [1, 1]], n_boot=0)
    b = compute("krippendorff_alpha", [[1, 2, 2], [1, None, None], [2, 2, None], [1, 1, None]], n_boot=0)
    assert a.value == b.value and a.n_units == 3


# --- sets -------------------------------------------------------------------------------------


def test_set_distances_hand_values():
    assert masi_distance(frozenset(), frozenset()) == 0.0
    assert jaccard_distance(frozenset(), frozenset()) == 0.0
    assert masi_distance(frozenset(), frozenset({"a"})) == 1.0
    assert masi_distance(frozenset({1, 2}), frozenset({1, 2, 3, 4})) == pytest.approx(1 - 0.5 * 2 / 3)
    assert masi_distance(frozenset({1, 2}), frozenset({2, 3})) == pytest.approx(1 - (1 / 3) * (1 / 3))
    assert jaccard_distance(frozenset({1, 2}), frozenset({2, 3})) == pytest.approx(2 / 3)


def test_vectorised_set_distance_matrix_matches_pairwise_functions():
    from app.agreement.coefficients import _set_distances

    rng = np.random.default_rng(0)
    domain = tuple({frozenset(x for x in range(5) if rng.random() < 0.4) for _ in range(60)})
    assert frozenset() in domain
    for name, fn in (("masi", masi_distance), ("jaccard", jaccard_distance)):
        expected = np.array([[fn(a, b) for b in domain] for a in domain])
        assert np.abs(_set_distances(domain, name) - expected).max() < 1e-12


def test_set_alpha_hand_worked():
    # units: ({a}, {a}), ({a}, {a,b}), ({}, {b}); MASI d({a},{a,b}) = 1 - 1/2 * 2/3 = 2/3
    ratings = [[["a"], ["a"]], [["a"], ["a", "b"]], [[], ["b"]]]
    # n_c: {a}:3, {a,b}:1, {}:1, {b}:1, n = 6; D_o numerator = 2*(2/3) + 2*1 = 10/3
    # pairs of distinct values, d({a,b},{b}) = 2/3 as well:
    # sum n_c n_k d = 2*[3*1*2/3 + 3*1*1 + 3*1*1 + 1*1*1 + 1*1*2/3 + 1*1*1] = 64/3
    got = compute("krippendorff_alpha", ratings, distance="masi", n_boot=0).value
    assert got == pytest.approx(1 - 5 * (10 / 3) / (64 / 3))
    # a scalar cell is the one-element set
    same = compute(
        "krippendorff_alpha", [["a", "a"], ["a", ["a", "b"]], [[], "b"]], distance="masi", n_boot=0
    )
    assert same.value == pytest.approx(got)
    # percent on sets: exact equality
    assert compute("percent", ratings, n_boot=0).value == pytest.approx(1 / 3)


# --- bootstrap --------------------------------------------------------------------------------


@pytest.mark.parametrize("coefficient", COEFFICIENTS)
def test_bootstrap_deterministic_and_seeded(coefficient):
    ratings = random_ratings(5, 60, 3, (1, 2, 3), 0.2)
    a = compute(coefficient, ratings, n_boot=200, seed=7)
    b = compute(coefficient, ratings, n_boot=200, seed=7)
    c = compute(coefficient, ratings, n_boot=200, seed=8)
    assert a.ci == b.ci and a.ci is not None
    assert a.ci != c.ci
    assert a.ci[0] <= a.value <= a.ci[1]
    assert compute(coefficient, ratings, n_boot=0).ci is None


def test_bootstrap_interval_width_shrinks_with_confidence_and_data():
    small = random_ratings(9, 40, 3, (0, 1), 0.1)
    big = random_ratings(9, 1000, 3, (0, 1), 0.1)
    def w(r):
        return r.ci[1] - r.ci[0]

    a95 = compute("krippendorff_alpha", small, n_boot=300)
    a80 = compute("krippendorff_alpha", small, n_boot=300, confidence=0.8)
    assert w(a80) < w(a95)
    assert w(compute("krippendorff_alpha", big, n_boot=300)) < w(a95) / 3


def test_bootstrap_standard_error_matches_naive_resampling():
    """The pattern-weight bootstrap has the same spread as resampling units by index."""
    ratings = random_ratings(21, 150, 3, (1, 2, 3), 0.15)
    rng = np.random.default_rng(0)
    naive = []
    for _ in range(300):
        idx = rng.integers(0, len(ratings), len(ratings))
        naive.append(compute("fleiss_kappa", [ratings[i] for i in idx], n_boot=0).value)
    from app.agreement.bootstrap import bootstrap_values
    from app.agreement.coefficients import _ChanceStat, _patterns

    coded = encode_ratings(ratings)
    pat = _patterns(coded.codes[(coded.codes >= 0).any(axis=1)], len(coded.domain))
    reps = bootstrap_values(_ChanceStat(pat, "fleiss"), pat.counts, 2000, np.random.default_rng(1))
    assert np.std(reps) == pytest.approx(np.std(naive), rel=0.2)
    assert np.mean(reps) == pytest.approx(np.mean(naive), abs=0.02)


def test_cluster_bootstrap():
    ratings = random_ratings(3, 40, 3, (0, 1), 0.0)
    coded = encode_ratings(ratings)
    plain = compute_coded("fleiss_kappa", coded, n_boot=100, seed=1)
    singletons = compute_coded("fleiss_kappa", coded, n_boot=100, seed=1, clusters=np.arange(40))
    assert plain.ci == singletons.ci
    # four identical clusters of 10 units: every resample equals the data
    dup = encode_ratings(ratings[:10] * 4)
    collapsed = compute_coded("fleiss_kappa", dup, n_boot=100, seed=1, clusters=np.repeat(np.arange(4), 10))
    assert collapsed.ci == pytest.approx((collapsed.value, collapsed.value))
    with pytest.raises(ValueError, match="clusters"):
        compute_coded("percent", coded, n_boot=10, clusters=np.arange(3))


def test_ci_from_defined_replicates_only():
    # 1 disagreeing unit among 30 agreeing ones: many resamples have no variation -> dropped
    ratings = [[1, 1]] * 30 + [[1, 2]]
    r = compute("krippendorff_alpha", ratings, n_boot=300)
    assert r.value is not None and r.ci is not None
    assert all(math.isfinite(x) for x in r.ci)
