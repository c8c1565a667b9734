"""``encode_ratings``: hand-worked codes and errors, and properties on generated matrices.

The rules (see its docstring): a gap is None or NaN; values are told apart by Python equality;
numpy scalars become Python ones; a collection is a set of labels and then every cell is a set;
short rows end in gaps; the error names the first bad row or cell, row by row.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.agreement.coefficients import encode_ratings

NAN = math.nan


def _decoded(coded):
    return [[None if c < 0 else coded.domain[c] for c in row] for row in coded.codes.tolist()]


def test_scalars_by_hand():
    coded = encode_ratings([["b", "a"], [None, "b"], [NAN, np.float64("nan")]])
    assert coded.domain == ("a", "b") and not coded.is_set
    assert coded.codes.tolist() == [[1, 0], [-1, 1], [-1, -1]]
    # 1, 1.0, True and np.int64(1) are one value (the first seen); numpy scalars become Python ones
    coded = encode_ratings([[np.int64(1), 1.0], [True, np.float32(2.5)], [0, False]])
    assert coded.domain == (0, 1, 2.5) and [type(v) for v in coded.domain] == [int, int, float]
    assert coded.codes.tolist() == [[1, 1], [1, 2], [0, 0]]
    # pd.NA and NaT are values, not gaps; mixed types sort by type name then repr
    coded = encode_ratings([[pd.NA, 1], ["x", None]])
    assert len(coded.domain) == 3 and coded.domain[0] is pd.NA and coded.domain[1:] == (1, "x")  # NAType, int, str
    assert coded.codes.tolist() == [[0, 1], [2, -1]]
    # ragged rows end in gaps; tuples and arrays are rows too
    coded = encode_ratings([(1,), np.array([2, 1]), []])
    assert coded.codes.tolist() == [[0, -1], [1, 0], [-1, -1]]
    assert encode_ratings([]).codes.shape == (0, 0)


def test_categories_fix_the_domain_and_its_order():
    coded = encode_ratings([[2, 1], [None, 2]], categories=[2, 1, 3])
    assert coded.domain == (2, 1, 3) and coded.codes.tolist() == [[0, 1], [-1, 0]]
    with pytest.raises(ValueError, match=r"^ratings\[1\]\[0\]: value 5 is not in categories$"):
        encode_ratings([[1, 2], [5, 7], [7, 7]], categories=[1, 2])


def test_sets_by_hand():
    coded = encode_ratings([[[1, 2], (2, 1)], [{3}, None], [1, []]])
    assert coded.is_set and coded.domain == (frozenset(), frozenset({1}), frozenset({3}), frozenset({1, 2}))
    assert coded.codes.tolist() == [[3, 3], [2, -1], [1, 0]]
    coded = encode_ratings([["a", "b"]], as_sets=True)  # every cell a set of one label
    assert coded.domain == (frozenset({"a"}), frozenset({"b"})) and coded.is_set
    coded = encode_ratings([[[1, 2], [2]]], categories=[2, 1])  # sets sort by size, then category order
    assert coded.domain == (frozenset({2}), frozenset({1, 2}))
    with pytest.raises(ValueError, match=r"^ratings\[0\]\[1\]: label 9 is not in categories$"):
        encode_ratings([[[1], [2, 9]], [[9], 1]], categories=[1, 2])


@pytest.mark.parametrize(("ratings", "message"), [
    ("ab", r"^ratings must be a list of units"),
    ([[1, 2], "xy"], r"^ratings\[1\] must be a list of rater cells$"),
    ([[1, {"a": 1}], "xy"], r"^ratings\[0\]\[1\]: a rating must be a scalar, a list of labels or null, got a mapping$"),
    ([[1, 2], [3, [4, [5]]], [{"a": 1}]], r"^ratings\[1\]\[1\]: a set-valued rating must hold scalar labels"),
    ([[(1, (2,))], [[[3]]]], r"^ratings\[0\]\[0\]: a set-valued rating must hold scalar labels"),
    ([[1, [2]], [[], [[3]]]], r"^ratings\[1\]\[1\]: a set-valued rating"),
    ([[1], [bytearray(b"x")]], r"^ratings\[1\]\[0\]: rating bytearray\(b'x'\) is not a hashable value$"),
])
def test_the_first_bad_row_or_cell_is_named(ratings, message):
    with pytest.raises(ValueError, match=message):
        encode_ratings(ratings)


def test_a_normalisation_error_comes_before_a_category_error():
    with pytest.raises(ValueError, match=r"^ratings\[2\]\[0\]: a set-valued rating"):
        encode_ratings([[7, 1], [1, 1], [[[1]], 1]], categories=[1])


_SCALARS = st.one_of(st.integers(-2, 3), st.sampled_from(["a", "b", "é"]), st.sampled_from([0.5, 1.0, -0.0]),
                     st.booleans(), st.sampled_from([np.int64(2), np.float64(0.5), np.bool_(True)]))
_GAPS = st.sampled_from([None, NAN, np.float64("nan")])
_CELLS = st.one_of(_SCALARS, _GAPS, st.lists(_SCALARS, max_size=3), st.frozensets(st.integers(0, 3), max_size=3))
_MATRICES = st.lists(st.lists(st.one_of(_SCALARS, _GAPS), min_size=0, max_size=4), max_size=8)
_SET_MATRICES = st.lists(st.lists(_CELLS, min_size=0, max_size=4), max_size=8)
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _normalised(x, as_set: bool):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    if isinstance(x, (list, tuple, set, frozenset)):
        return frozenset(v.item() if isinstance(v, np.generic) else v for v in x)
    x = x.item() if isinstance(x, np.generic) else x
    return frozenset([x]) if as_set else x


@SETTINGS
@given(_SET_MATRICES, st.booleans())
def test_codes_decode_to_the_cells(rows, as_sets):
    coded = encode_ratings(rows, as_sets=as_sets)
    any_set = as_sets or any(isinstance(c, (list, frozenset)) for row in rows for c in row)
    width = max(map(len, rows), default=0)
    assert coded.is_set == any_set and coded.codes.shape == (len(rows), width)
    want = [[_normalised(c, any_set) for c in row] + [None] * (width - len(row)) for row in rows]
    assert _decoded(coded) == want
    # the domain is the distinct values seen, each once, every one used
    assert len(set(coded.domain)) == len(coded.domain)
    assert set(coded.codes[coded.codes >= 0].tolist()) == set(range(len(coded.domain)))


@SETTINGS
@given(_MATRICES, st.randoms(use_true_random=False))
def test_storage_and_unit_order_do_not_change_the_coding(rows, rnd):
    coded = encode_ratings(rows)
    assert encode_ratings([tuple(r) for r in rows]).codes.tolist() == coded.codes.tolist()
    assert encode_ratings([np.array(r, dtype=object) for r in rows]).domain == coded.domain
    order = list(range(len(rows)))
    rnd.shuffle(order)
    shuffled = encode_ratings([rows[i] for i in order])
    # the same values (the one kept of 0 / False / 0.0 is the first seen, which may sort elsewhere)
    assert set(shuffled.domain) == set(coded.domain)
    assert _decoded(shuffled) == [_decoded(coded)[i] for i in order]
    if coded.domain:
        cats = list(coded.domain)[::-1]
        with_cats = encode_ratings(rows, categories=cats)
        assert with_cats.domain == tuple(cats) and _decoded(with_cats) == _decoded(coded)
