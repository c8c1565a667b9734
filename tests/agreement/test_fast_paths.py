"""The vectorised pieces against their definitions: packed unique rows and mode-set bitmasks
against ``np.unique``, alpha against the krippendorff package, the set-distance matrix against
the pairwise distance functions."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from app.agreement import compute
from app.agreement.coefficients import _unique_rows, encode_ratings
from app.agreement.units import mode_sets

from ._data import random_ratings, to_float_matrix


def test_encoding_names_the_cell_outside_categories():
    with pytest.raises(ValueError, match=r"ratings\[1\]\[0\]: value 5 is not in categories"):
        encode_ratings([[1, 2], [5, 1], [7, 7]], categories=[1, 2])


@pytest.mark.parametrize("seed", range(5))
def test_packed_row_keys_equal_numpy_unique_rows(seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, 4, size=(500, int(rng.integers(1, 8))))
    rows, inv, counts = _unique_rows(codes, 5)
    r2, i2, c2 = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(rows, r2)
    np.testing.assert_array_equal(inv, np.asarray(i2).reshape(-1))
    np.testing.assert_array_equal(counts, c2)


def test_mode_set_bitmask_matches_unique_rows():
    from app.agreement.units import build_matrices
    from bench.bench_agreement import synthetic

    labels, submissions, modes, mode_category, agents = synthetic(120, seed=3)
    mx = build_matrices(labels, submissions, modes, mode_category)
    sets = mode_sets(mx)
    n_u, n_m, n_a = mx.presence.shape
    flat = np.transpose(mx.presence, (0, 2, 1)).reshape(n_u * n_a, n_m)
    kept = mx.submitted.reshape(-1)
    rows, inverse = np.unique(flat[kept] == 1, axis=0, return_inverse=True)
    assert sets.domain == tuple(frozenset(mx.modes[j] for j in np.nonzero(r)[0]) for r in rows)
    np.testing.assert_array_equal(sets.codes.reshape(-1)[kept], np.asarray(inverse).reshape(-1))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_own_alpha_point_equals_package(seed, level):
    ratings = random_ratings(seed + 500, 200, 4, (1, 2, 3, 5), 0.2)
    expected = krippendorff.alpha(reliability_data=to_float_matrix(ratings).T, level_of_measurement=level)
    assert compute("krippendorff_alpha", ratings, level=level, n_boot=0).value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("distance", ["masi", "jaccard"])
def test_set_distance_matrix_equals_the_pairwise_functions(distance):
    from app.agreement.coefficients import _set_distances, jaccard_distance, masi_distance

    rng = np.random.default_rng(4)
    domain = {frozenset()} | {frozenset(int(x) for x in np.nonzero(rng.random(8) < 0.3)[0]) for _ in range(700)}
    domain = tuple(sorted(domain, key=lambda s: (len(s), sorted(s))))
    fn = masi_distance if distance == "masi" else jaccard_distance
    got = _set_distances(domain, distance)
    want = np.array([[fn(a, b) for b in domain] for a in domain])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    assert got[0, 0] == 0.0 and (got[0, 1:] == 1.0).all()  # the empty set
