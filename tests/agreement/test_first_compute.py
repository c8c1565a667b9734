"""The vectorised first-compute pieces (issue 14) against what they must equal: the set-valued
alpha's closed form against the k x k distance-matrix path the bootstrap uses, blame / evidence
counts against hand-worked pairs and their invariants, the submitted-label filter against its
definition, the packed unique rows against ``np.unique``."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.agreement import coefficients
from app.agreement.coefficients import (
    COEFFICIENTS,
    CodedRatings,
    _AlphaStat,
    _patterns,
    _point,
    _set_alpha_point,
    _unique_rows,
    compute,
    compute_coded,
    compute_coded_many,
    encode_ratings,
)
from app.agreement.units import (
    _blame_and_evidence,
    _blame_and_evidence_counts,
    _submitted_labels,
    build_matrices,
    mode_sets,
)
from bench.bench_agreement import synthetic


def _random_sets(seed: int, n_units: int, n_raters: int, n_labels: int, p: float, p_missing: float = 0.15):
    rng = np.random.default_rng(seed)
    latent = [frozenset(np.nonzero(rng.random(n_labels) < p)[0].tolist()) for _ in range(n_units)]
    out = []
    for u in range(n_units):
        row = []
        for _ in range(n_raters):
            if rng.random() < p_missing:
                row.append(None)
            elif rng.random() < 0.6:
                row.append(list(latent[u]))
            else:
                row.append(np.nonzero(rng.random(n_labels) < p)[0].tolist())
        out.append(row)
    return out


@pytest.mark.parametrize("distance", ["masi", "jaccard"])
@pytest.mark.parametrize(("seed", "n_units", "n_raters", "n_labels", "p"), [
    (0, 40, 2, 3, 0.4), (1, 200, 3, 8, 0.3), (2, 150, 5, 12, 0.2), (3, 80, 4, 20, 0.5), (4, 30, 3, 1, 0.5),
    (5, 300, 3, 60, 0.05),
])
def test_set_alpha_point_equals_the_matrix_path(distance, seed, n_units, n_raters, n_labels, p):
    ratings = _random_sets(seed, n_units, n_raters, n_labels, p)
    coded = encode_ratings(ratings, as_sets=True)
    m = (coded.codes >= 0).sum(axis=1)
    pat = _patterns(coded.codes[m >= 2], len(coded.domain))
    old = _point(_AlphaStat(pat, coefficients._set_distances(coded.domain, distance)), pat)
    new = _set_alpha_point(pat, coded.domain, distance)
    assert new is not None
    assert new == pytest.approx(old, abs=1e-12, rel=0)
    assert compute("krippendorff_alpha", ratings, distance=distance, n_boot=0).value == new


def test_set_alpha_point_leaves_what_it_cannot_do_to_the_matrix_path():
    wide = [[list(range(70)), list(range(1, 70))], [[0], [0, 1]], [[2, 3], [3]]]  # 70 distinct labels
    coded = encode_ratings(wide, as_sets=True)
    pat = _patterns(coded.codes, len(coded.domain))
    assert _set_alpha_point(pat, coded.domain, "masi") is None
    want = _point(_AlphaStat(pat, coefficients._set_distances(coded.domain, "masi")), pat)
    assert compute("krippendorff_alpha", wide, distance="masi", n_boot=0).value == want


@pytest.mark.parametrize("distance", ["masi", "jaccard"])
def test_set_alpha_without_expected_disagreement_is_undefined_both_ways(distance):
    # every pairable rating the empty set but one unit with two different sets is data; all the
    # same set is "no variation"; an empty and a non-empty set once each gives alpha 0
    same = [[[1, 2], [1, 2]], [[1, 2], [1, 2]]]
    assert compute("krippendorff_alpha", same, distance=distance, n_boot=0).value is None
    two = [[[], [1]]]
    coded = encode_ratings(two, as_sets=True)
    pat = _patterns(coded.codes, len(coded.domain))
    assert _set_alpha_point(pat, coded.domain, distance) == _point(
        _AlphaStat(pat, coefficients._set_distances(coded.domain, distance)), pat) == 0.0


def test_set_alpha_on_the_mode_sets_of_the_bench_data():
    labels, subs, modes, cats, _ = synthetic(400, seed=9)
    sets = mode_sets(build_matrices(labels, subs, modes, cats))
    m = (sets.codes >= 0).sum(axis=1)
    pat = _patterns(sets.codes[m >= 2], len(sets.domain))
    for d in ("masi", "jaccard"):
        old = _point(_AlphaStat(pat, coefficients._set_distances(sets.domain, d)), pat)
        assert _set_alpha_point(pat, sets.domain, d) == pytest.approx(old, abs=1e-12, rel=0)


def _random_labels(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(int(rng.integers(1, 80))):
        agent = [None, "x", "y", "z", "", float("nan")][int(rng.integers(6))]
        ev = [None, float("nan"), [], *[None] * 0][int(rng.integers(3))] if rng.random() < 0.25 else \
            [int(v) for v in rng.integers(0, 6, int(rng.integers(0, 4)))]
        rows.append((f"a{rng.integers(4)}", f"r{rng.integers(6)}", f"M{rng.integers(3)}", agent, ev))
    return pd.DataFrame(rows, columns=["annotator", "run_id", "mode", "agent", "evidence"])


def test_blame_and_evidence_by_hand():
    # the hand corpus of tests/agreement_db/_hand.py: r1 CF1 a buyer [1, 2], b buyer [2],
    # c seller [2, 3]; r4 GR1 a seller [3], b seller [3]; r2 CF1 only a (no pair)
    labels = pd.DataFrame([
        ("a", "r1", "CF1", "buyer_agent", [1, 2]), ("b", "r1", "CF1", "buyer_agent", [2]),
        ("c", "r1", "CF1", "seller_agent", [2, 3]), ("a", "r2", "CF1", "buyer_agent", [1]),
        ("c", "r2", "GR1", "seller_agent", [4]), ("a", "r4", "GR1", "seller_agent", [3]),
        ("b", "r4", "GR1", "seller_agent", [3]),
    ], columns=["annotator", "run_id", "mode", "agent", "evidence"])
    # pairs in (run, mode) order of first appearance, annotators sorted: (a,b) (a,c) (b,c) then r4 (a,b)
    assert _blame_and_evidence_counts(labels) == ([1 / 2, 1 / 3, 1 / 2, 1.0], 2, 4, 0, 0)
    blame, evidence = _blame_and_evidence(labels)
    assert blame == {"n_pairs": 4, "n_same_agent": 2, "proportion": 0.5, "n_pairs_unattributed": 0}
    assert evidence == {"n_pairs": 4, "mean_jaccard": pytest.approx(7 / 12, abs=1e-15), "n_pairs_without_evidence": 0}


def test_blame_and_evidence_sets_gaps_and_other_values():
    rows = [
        # r1 M: a names x and y in two labels, b names x: attributed, not the same set
        ("a", "r1", "M", "x", [1]), ("a", "r1", "M", "y", [2]), ("b", "r1", "M", "x", [2, 2]),
        # r2 M: b names no agent (None / NaN) and has no evidence, nor has c: unattributed, no evidence
        ("b", "r2", "M", None, None), ("c", "r2", "M", math.nan, math.nan),
        # r3 M: evidence as a single step and as a tuple; pd.NA is an agent of its own on both sides
        ("a", "r3", "M", pd.NA, 4), ("c", "r3", "M", pd.NA, (4, 5)),
    ]
    labels = pd.DataFrame(rows, columns=["annotator", "run_id", "mode", "agent", "evidence"])
    assert _blame_and_evidence_counts(labels) == ([1 / 2, 1 / 2], 1, 2, 1, 1)
    assert _blame_and_evidence_counts(labels.drop(columns=["agent"])) == ([1 / 2, 1 / 2], 0, 0, 3, 1)
    assert _blame_and_evidence_counts(labels.drop(columns=["evidence"])) == ([], 1, 2, 1, 3)
    assert _blame_and_evidence_counts(labels.head(0)) == ([], 0, 0, 0, 0)
    assert _blame_and_evidence(labels.head(1))[1] == {"n_pairs": 0, "mean_jaccard": None,
                                                      "n_pairs_without_evidence": 0}


_NAMES = st.sampled_from(["a0", "a1", "a2", "a3"])
_LABEL_ROWS = st.lists(st.tuples(
    _NAMES, st.sampled_from(["r0", "r1", "r2"]), st.sampled_from(["M0", "M1"]),
    st.sampled_from([None, math.nan, "x", "y", "z", ""]),
    st.one_of(st.none(), st.just(math.nan), st.lists(st.integers(0, 5), max_size=4), st.integers(0, 5)),
), max_size=40)


def _labels_frame(rows):
    return pd.DataFrame(rows, columns=["annotator", "run_id", "mode", "agent", "evidence"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_LABEL_ROWS, st.randoms(use_true_random=False))
def test_blame_and_evidence_invariants(rows, rnd):
    labels = _labels_frame(rows)
    jac, same, attributed, unattributed, no_ev = _blame_and_evidence_counts(labels)
    # every pair of annotators of one (run, mode) is counted once in each tally
    groups: dict = {}
    for ann, run, mode, *_ in rows:
        groups.setdefault((run, mode), set()).add(ann)
    pairs = sum(len(g) * (len(g) - 1) // 2 for g in groups.values())
    assert attributed + unattributed == len(jac) + no_ev == pairs
    assert 0 <= same <= attributed and all(0.0 <= j <= 1.0 for j in jac)
    # the row order, repeated rows and other names of the same values change no count
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    for other in (_labels_frame(shuffled), _labels_frame(rows + rows)):
        j2, *rest = _blame_and_evidence_counts(other)
        assert rest == [same, attributed, unattributed, no_ev] and sorted(j2) == pytest.approx(sorted(jac))
    renamed = labels.assign(annotator=[int(a[1]) for a in labels["annotator"]],
                            run_id=[("run", r) for r in labels["run_id"]],
                            agent=[{"x": 1, "y": 2, "z": 3, "": 0}.get(a, a) if isinstance(a, str) else a
                                   for a in labels["agent"]])
    assert _blame_and_evidence_counts(renamed) == (jac, same, attributed, unattributed, no_ev)


@pytest.mark.parametrize("seed", range(10))
def test_submitted_labels_are_those_of_submitted_pairs(seed):
    labels = _random_labels(seed)
    rng = np.random.default_rng(seed)
    subs = pd.DataFrame({"annotator": [f"a{i}" for i in rng.integers(0, 5, 12)],
                         "run_id": [f"r{i}" for i in rng.integers(0, 7, 12)]})
    mixed = subs.assign(run_id=[1, *subs["run_id"][1:]])  # not all strings
    for s in (subs, mixed):
        pairs = set(zip(s["annotator"], s["run_id"]))
        keep = [(a, r) in pairs for a, r in zip(labels["annotator"], labels["run_id"])]
        got, n_other = _submitted_labels(labels, s)
        pd.testing.assert_frame_equal(got, labels[keep])
        assert n_other == len(labels) - sum(keep)


@pytest.mark.parametrize(("n", "width", "n_values"), [(0, 3, 3), (1, 1, 2), (500, 3, 3), (50, 4, 5),
                                                      (2000, 5, 4), (300, 8, 6)])
def test_unique_rows_by_counting_equals_the_sort(n, width, n_values):
    rng = np.random.default_rng(n + width)
    codes = rng.integers(-1, n_values - 1, size=(n, width))
    rows, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    for got, want in zip(_unique_rows(codes, n_values), (rows, np.asarray(inverse).reshape(-1), counts)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype.kind == want.dtype.kind


@pytest.mark.parametrize("n_boot", [0, 40])
def test_compute_coded_many_equals_separate_calls(n_boot):
    rng = np.random.default_rng(5)
    codes = np.where(rng.random((300, 3)) < 0.1, -1, (rng.random((300, 3)) < 0.2).astype(np.int64))
    coded = CodedRatings(codes, (0, 1))
    clusters = np.repeat(np.arange(100), 3)
    many = compute_coded_many(COEFFICIENTS, coded, n_boot=n_boot, seed=3, clusters=clusters)
    for c in COEFFICIENTS:
        one = compute_coded(c, coded, n_boot=n_boot, seed=3, clusters=clusters)
        assert many[c] == one, c
        assert not (isinstance(one.value, float) and math.isnan(one.value))
