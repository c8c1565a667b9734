"""The vectorised first-compute paths (issue 14) give what the implementations they replaced
give: whole reports old vs new, and each rewritten piece against its old version
(``_oracle``, kept verbatim)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

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
    _blame_and_evidence_fast,
    _blame_and_evidence_loop,
    _submitted_labels,
    agreement_report,
    build_matrices,
    mode_sets,
)
from bench.bench_agreement import synthetic

from . import _oracle


def _messy(n_runs: int, seed: int):
    """Synthetic labels plus what real data has: labels naming no agent, labels without evidence,
    unsorted / repeated evidence, labels of unsubmitted pairs, a submitted annotator with none."""
    labels, subs, modes, cats, agents = synthetic(n_runs, seed=seed)
    rng = np.random.default_rng(seed)
    labels = labels.copy()
    n = len(labels)
    no_agent = rng.random(n) < 0.1
    labels["agent"] = labels["agent"].where(~no_agent, None)
    ev = list(labels["evidence"])
    for i in np.nonzero(rng.random(n) < 0.15)[0]:
        ev[i] = [] if rng.random() < 0.5 else [int(x) for x in rng.integers(0, 9, 4)]
    labels["evidence"] = ev
    stray = labels.sample(min(5, n), random_state=seed).assign(annotator="ghost")
    labels = pd.concat([labels, stray], ignore_index=True)
    subs = pd.concat([subs, pd.DataFrame({"annotator": ["silent"] * 3, "run_id": list(subs["run_id"][:3])})],
                     ignore_index=True)
    return labels, subs, modes, cats, agents


def _assert_same(new, old, path="", approx_under="set_alpha"):
    """Equal everywhere; floats under ``approx_under`` within 1e-12 (the set-valued alpha's
    expected disagreement is summed in another order)."""
    if isinstance(old, dict):
        assert isinstance(new, dict) and new.keys() == old.keys(), path
        for k in old:
            _assert_same(new[k], old[k], f"{path}.{k}", approx_under)
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), path
        for i, (a, b) in enumerate(zip(new, old)):
            _assert_same(a, b, f"{path}[{i}]", approx_under)
    elif isinstance(old, float) and approx_under in path:
        assert new == pytest.approx(old, abs=1e-12, rel=0), path
    else:
        assert type(new) is type(old) and (new == old or (new != new and old != old)), (path, new, old)


@pytest.mark.parametrize(("n_runs", "seed", "level", "n_boot"), [
    (40, 0, "run", 0), (40, 1, "agent", 0), (300, 2, "run", 0), (60, 3, "run", 30), (60, 4, "agent", 30),
])
def test_report_equals_the_old_implementation(n_runs, seed, level, n_boot):
    labels, subs, modes, cats, agents = _messy(n_runs, seed)
    new = agreement_report(labels, subs, modes, cats, agents, level=level, n_boot=n_boot, seed=seed)
    with _oracle.old_implementation():
        old = agreement_report(labels, subs, modes, cats, agents, level=level, n_boot=n_boot, seed=seed)
    # with a bootstrap both take the matrix path for the set-valued alpha: bit for bit
    _assert_same(new, old, approx_under="set_alpha" if n_boot == 0 else "(nothing)")
    assert _blame_and_evidence_fast(_submitted_labels(labels, subs)[0]) is not None  # the new path ran
    assert new["blame_agreement"]["n_pairs"] > 0 and new["evidence_overlap"]["n_pairs"] > 0


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
    old = _point(_AlphaStat(pat, _oracle.set_distances(coded.domain, distance)), pat)
    new = _set_alpha_point(pat, coded.domain, distance)
    assert new is not None
    assert new == pytest.approx(old, abs=1e-12, rel=0)
    assert compute("krippendorff_alpha", ratings, distance=distance, n_boot=0).value == new


def test_set_alpha_point_leaves_what_it_cannot_do_to_the_matrix_path():
    wide = [[list(range(70)), list(range(1, 70))], [[0], [0, 1]], [[2, 3], [3]]]  # 70 distinct labels
    coded = encode_ratings(wide, as_sets=True)
    pat = _patterns(coded.codes, len(coded.domain))
    assert _set_alpha_point(pat, coded.domain, "masi") is None
    want = _point(_AlphaStat(pat, _oracle.set_distances(coded.domain, "masi")), pat)
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
        _AlphaStat(pat, _oracle.set_distances(coded.domain, distance)), pat) == 0.0


def test_set_alpha_on_the_mode_sets_of_the_bench_data():
    labels, subs, modes, cats, _ = synthetic(400, seed=9)
    sets = mode_sets(build_matrices(labels, subs, modes, cats))
    old_sets = _oracle.mode_sets(build_matrices(labels, subs, modes, cats))
    assert sets.domain == old_sets.domain
    np.testing.assert_array_equal(sets.codes, old_sets.codes)
    m = (sets.codes >= 0).sum(axis=1)
    pat = _patterns(sets.codes[m >= 2], len(sets.domain))
    for d in ("masi", "jaccard"):
        old = _point(_AlphaStat(pat, _oracle.set_distances(sets.domain, d)), pat)
        assert _set_alpha_point(pat, sets.domain, d) == pytest.approx(old, abs=1e-12, rel=0)


@pytest.mark.parametrize("distance", ["masi", "jaccard"])
def test_set_distance_matrix_is_unchanged(distance):
    ratings = _random_sets(11, 120, 3, 10, 0.3)
    domain = encode_ratings(ratings, as_sets=True).domain
    np.testing.assert_array_equal(coefficients._set_distances(domain, distance),
                                  _oracle.set_distances(domain, distance))


def _random_labels(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(int(rng.integers(1, 80))):
        agent = [None, "x", "y", "z", "", float("nan")][int(rng.integers(6))]
        ev = [None, float("nan"), [], *[None] * 0][int(rng.integers(3))] if rng.random() < 0.25 else \
            [int(v) for v in rng.integers(0, 6, int(rng.integers(0, 4)))]
        rows.append((f"a{rng.integers(4)}", f"r{rng.integers(6)}", f"M{rng.integers(3)}", agent, ev))
    return pd.DataFrame(rows, columns=["annotator", "run_id", "mode", "agent", "evidence"])


@pytest.mark.parametrize("seed", range(60))
def test_blame_and_evidence_fast_path_equals_the_loop(seed):
    labels = _random_labels(seed)
    fast = _blame_and_evidence_fast(labels)
    assert fast is not None
    assert fast == _blame_and_evidence_loop(labels)
    assert _blame_and_evidence(labels) == _oracle.blame_and_evidence(labels)


@pytest.mark.parametrize("change", [
    lambda df: df.assign(run_id=range(len(df))),  # integer run ids: still the fast path
    lambda df: df.assign(annotator=[i % 3 for i in range(len(df))]),
    lambda df: df.drop(columns=["agent"]),
    lambda df: df.drop(columns=["evidence"]),
])
def test_blame_and_evidence_fast_path_other_columns(change):
    labels = change(_random_labels(7))
    assert _blame_and_evidence_fast(labels) is not None
    assert _blame_and_evidence(labels) == _oracle.blame_and_evidence(labels)


@pytest.mark.parametrize("change", [
    lambda df: df.assign(agent=[1] * len(df)),  # agents that are not strings
    lambda df: df.assign(evidence=[(1, 2)] * len(df)),  # tuples
    lambda df: df.assign(evidence=[[1.0, 2.0]] * len(df)),  # floats
    lambda df: df.assign(evidence=[["1"]] * len(df)),  # strings
    lambda df: df.assign(evidence=[[True]] * len(df)),  # booleans only
    lambda df: df.assign(run_id=[("r", i % 2) for i in range(len(df))]),  # tuples as run ids
    lambda df: df.assign(annotator=["a" if i % 2 else 1 for i in range(len(df))]),  # mixed names
    lambda df: df.assign(agent=[pd.NA] * len(df)),
    lambda df: df.assign(evidence=[[2**70]] * len(df)),
])
def test_blame_and_evidence_other_input_takes_the_loop(change):
    labels = change(_random_labels(3).head(12))
    assert _blame_and_evidence_fast(labels) is None
    assert _blame_and_evidence(labels) == _oracle.blame_and_evidence(labels)


@pytest.mark.parametrize("seed", range(10))
def test_submitted_labels_equal_the_multiindex_way(seed):
    labels = _random_labels(seed)
    rng = np.random.default_rng(seed)
    subs = pd.DataFrame({"annotator": [f"a{i}" for i in rng.integers(0, 5, 12)],
                         "run_id": [f"r{i}" for i in rng.integers(0, 7, 12)]})
    got, n_got = _submitted_labels(labels, subs)
    want, n_want = _oracle.submitted_labels(labels, subs)
    pd.testing.assert_frame_equal(got, want)
    assert n_got == n_want
    mixed = subs.assign(run_id=[1, *subs["run_id"][1:]])  # not all strings: the MultiIndex
    pd.testing.assert_frame_equal(_submitted_labels(labels, mixed)[0], _oracle.submitted_labels(labels, mixed)[0])


@pytest.mark.parametrize(("n", "width", "n_values"), [(0, 3, 3), (1, 1, 2), (500, 3, 3), (50, 4, 5),
                                                      (2000, 5, 4), (300, 8, 6)])
def test_unique_rows_by_counting_equals_the_sort(n, width, n_values):
    rng = np.random.default_rng(n + width)
    codes = rng.integers(-1, n_values - 1, size=(n, width))
    for got, want in zip(_unique_rows(codes, n_values), _oracle.unique_rows(codes, n_values)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


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


@pytest.mark.parametrize("rows", [
    [np.array([1, 2, 2]), np.array([2, 2, 1])],
    [np.array([1.0, np.nan]), np.array([2.5, 1.0])],
    [(1, None), ("a", 1)],  # mixed types: the domain sorts by type name
    [[np.int64(3), 3], [3.0, None]],  # equal values of different types
])
def test_flat_cell_encoding_equals_the_per_cell_path(rows):
    from app.agreement.coefficients import _encode_cells, _encode_scalar_fast

    fast = _encode_scalar_fast(list(rows), None)
    slow = _encode_cells(list(rows), None, False)
    if fast is not None:
        assert fast.domain == slow.domain and [type(v) for v in fast.domain] == [type(v) for v in slow.domain]
        np.testing.assert_array_equal(fast.codes, slow.codes)
    enc = encode_ratings(list(rows))
    assert enc.domain == slow.domain
    np.testing.assert_array_equal(enc.codes, slow.codes)
