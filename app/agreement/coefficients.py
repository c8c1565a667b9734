"""Inter-annotator agreement coefficients on a ratings matrix, with bootstrap intervals.

Input
-----
``ratings[u][r]`` is the rating rater ``r`` gave unit ``u``: a hashable scalar, ``None`` (or a
float NaN) for a missing rating, or a list/tuple/set/frozenset for a set-valued label (an empty
collection is the empty set, i.e. data, not a gap).  Rows shorter than the longest row are
padded with ``None``.  If any cell is a collection (or ``distance`` is given), the whole matrix is
set-valued and scalar cells become one-element sets.

``categories`` lists the possible values in their order (positions are used for Cohen weights,
for the ordinal level, and as values 1..k for interval/ratio when the values are not numbers).
Default: the sorted distinct values observed.  For set-valued data it lists the allowed labels.
Every observed value must be in ``categories`` (else ``ValueError`` naming the cell).

Definitions (``m_u`` = number of ratings of unit ``u``, ``n_uk`` = how many of them are ``k``)
-----------------------------------------------------------------------------------------------
* ``percent``: mean, over units with ``m_u >= 2``, of the share of agreeing rater pairs in the
  unit, ``sum_k n_uk (n_uk - 1) / (m_u (m_u - 1))``.  Set-valued cells agree when equal.
* ``cohen_kappa``: Cohen (1960/1968) for two raters over the units both rated,
  ``1 - sum(d * O) / sum(d * E)`` with disagreement weights ``d`` on category positions
  (unweighted ``i != j``, linear ``|i - j|``, quadratic ``(i - j)^2``) — the same as
  scikit-learn's ``cohen_kappa_score``.  With more than two raters ``compute`` returns the mean
  of the pairwise kappas over the rater pairs whose kappa is defined (Light's kappa);
  :func:`pairwise_cohen_kappa` also gives the pair table.
* ``fleiss_kappa``: Fleiss (1971) generalised to missing ratings as in Gwet (2014) / irrCAC
  ``CAC.fleiss()``: ``p_a`` is the mean per-unit pair agreement over units with ``m_u >= 2``;
  ``pi_k`` is the mean of ``n_uk / m_u`` over units with ``m_u >= 1``; ``p_e = sum_k pi_k^2``.
  With the same number of raters on every unit this is exactly Fleiss' kappa.
* ``krippendorff_alpha``: coincidence-based alpha, ``1 - D_o / D_e``, over units with
  ``m_u >= 2``; nominal / ordinal / interval / ratio distances for scalar data (the
  ``krippendorff`` package's definition; the cross-check tests compare the two), MASI or
  Jaccard distance for set-valued cells (written here;
  distance of two empty sets is 0, of an empty and a non-empty set 1).  Set-valued cells with
  no ``distance`` use the nominal distance (exact set equality).
* ``gwet_ac1``: Gwet's AC1 (unweighted), as irrCAC ``CAC.gwet()``: the same ``p_a`` and
  ``pi_k`` as Fleiss above, ``p_e = sum_k pi_k (1 - pi_k) / (q - 1)`` with ``q`` the number of
  categories (``len(categories)`` if given, else the number of distinct observed values).

``n_units`` is the number of units the coefficient pairs ratings on: units with ``m_u >= 2``
(for two-rater Cohen, the units both raters rated).

Bootstrap
---------
Units (those with ``m_u >= 2``; for Fleiss and AC1 those with ``m_u >= 1``; for two-rater
Cohen those rated by both) are resampled with replacement ``n_boot`` times from
``numpy.random.default_rng(seed)``; the interval is the percentile interval of the replicates
in which the coefficient is defined.  The category set (``q`` of AC1, weights, positions) is
held fixed across replicates.  ``n_boot = 0`` gives ``ci = None``.  See :mod:`.bootstrap`.

Degenerate data (never an exception; ``value = None`` with a ``reason``)
-------------------------------------------------------------------------
* no units / no ratings at all: ``None``, "no ratings".
* a single rater, or no unit with two or more ratings (every unit rated once): ``None``,
  "no pairable unit" (every coefficient).
* two raters who share no unit (Cohen): ``None``; in the pairwise table the pair is ``None``.
* no variation (every pairable rating is the same category): ``cohen_kappa``, ``fleiss_kappa``
  and ``krippendorff_alpha`` are undefined (zero expected disagreement) -> ``None``.
  ``percent`` is still defined (1.0).  ``gwet_ac1`` is ``None`` when only one category is known
  (``q = 1``); with ``categories`` naming two or more it is defined (1.0 when all agree), as in
  irrCAC.  In a bootstrap, replicates without variation are dropped from the interval.
* a single unit: computed like any other data (e.g. alpha is 0 when its ratings differ, ``None``
  when they agree); every replicate equals the data, so the interval collapses to a point.
* a coefficient that would be NaN/inf for any other reason -> ``None`` with a reason;
  NaN never appears in :meth:`AgreementResult.to_dict`.

Unknown ``coefficient`` / ``level`` / ``weights`` / ``distance`` values, ``level`` other than
nominal for a coefficient other than alpha, ``weights`` other than unweighted for a coefficient
other than Cohen's kappa, and ``distance`` for a coefficient other than alpha raise
``ValueError`` naming the parameter.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from itertools import chain, combinations, repeat
from typing import Any

import numpy as np
from scipy import sparse

from .bootstrap import bootstrap_values, percentile_ci

__all__ = [
    "COEFFICIENTS",
    "DISTANCES",
    "LEVELS",
    "WEIGHTS",
    "AgreementResult",
    "CodedRatings",
    "cohen_kappa",
    "compute",
    "compute_coded",
    "compute_coded_many",
    "encode_ratings",
    "fleiss_kappa",
    "gwet_ac1",
    "jaccard_distance",
    "krippendorff_alpha",
    "masi_distance",
    "pairwise_cohen_coded",
    "pairwise_cohen_kappa",
    "percent_agreement",
]

COEFFICIENTS = ("percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1")
LEVELS = ("nominal", "ordinal", "interval", "ratio")
WEIGHTS = ("unweighted", "linear", "quadratic")
DISTANCES = ("masi", "jaccard")

_EPS = 1e-12

R_NO_RATINGS = "no ratings: the matrix has no rated unit"
R_ONE_RATER = "a single rater: agreement needs at least two raters"
R_NO_PAIRABLE = "no pairable unit: no unit has ratings from at least two raters"
R_NO_VARIATION = "no variation: every pairable rating is the same category, so chance agreement is 1"
R_NO_SHARED = "the raters share no rated unit"
R_ONE_CATEGORY = "a single category: AC1 needs at least two categories"
R_NON_FINITE = "the coefficient is undefined for these data (zero expected disagreement)"
R_TOO_MANY_SETS = ("{k:,} distinct label sets: their {k:,} x {k:,} MASI / Jaccard distances would take {gib:.1f} GiB "
                   "(more than MAX_SET_DISTANCE_BYTES); the set-valued alpha is not computed")


# --------------------------------------------------------------------------------------------
# result type


@dataclass
class AgreementResult:
    """An agreement coefficient: value (None when undefined), units used, interval, reason."""

    value: float | None
    n_units: int
    ci: tuple[float, float] | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"value", "n_units", "ci"}`` plus ``"reason"`` when value is None.

        ``ci`` is a 2-list or None; a non-finite value becomes None with a reason.
        """
        value = self.value
        reason = self.reason
        if value is not None and not math.isfinite(value):
            value, reason = None, reason or R_NON_FINITE
        ci = None
        if value is not None and self.ci is not None:
            lo, hi = self.ci
            if math.isfinite(lo) and math.isfinite(hi):
                ci = [float(lo), float(hi)]
        out: dict[str, Any] = {
            "value": None if value is None else float(value),
            "n_units": int(self.n_units),
            "ci": ci,
        }
        if value is None:
            out["reason"] = reason or R_NON_FINITE
        return out


# --------------------------------------------------------------------------------------------
# encoding


@dataclass(frozen=True)
class CodedRatings:
    """A ratings matrix coded as category indices.

    ``codes``: int64 array (n_units, n_raters), ``-1`` for missing; ``domain[i]`` is the
    category value of code ``i`` (a scalar, or a frozenset when ``is_set``).
    """

    codes: np.ndarray
    domain: tuple
    is_set: bool = False

    @property
    def n_raters(self) -> int:
        return int(self.codes.shape[1])


def _sort_key_fallback(x: Any) -> tuple:
    return (type(x).__name__, repr(x))


def _sorted_values(values: set) -> list:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=_sort_key_fallback)


def _normalise_scalar(x: Any, where: str) -> Any:
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, dict):
        raise ValueError(f"{where}: a rating must be a scalar, a list of labels or null, got a mapping")  # noqa: TRY004
    try:
        hash(x)
    except TypeError:
        raise ValueError(f"{where}: rating {x!r} is not a hashable value") from None
    return x


def _is_missing(x: Any) -> bool:
    if x is None:
        return True
    return bool(isinstance(x, (float, np.floating)) and math.isnan(float(x)))


def _normalise_cell(x: Any, where: str) -> Any:
    """None for missing, frozenset for a collection, else the hashable scalar."""
    if _is_missing(x):
        return None
    if isinstance(x, (list, tuple, set, frozenset, np.ndarray)):
        items = x.tolist() if isinstance(x, np.ndarray) else list(x)
        out = []
        for item in items:
            if isinstance(item, (list, tuple, set, frozenset, dict, np.ndarray)):
                raise ValueError(f"{where}: a set-valued rating must hold scalar labels, got {item!r}")  # noqa: TRY004
            out.append(_normalise_scalar(item, where))
        return frozenset(out)
    return _normalise_scalar(x, where)


def _set_key(s: frozenset, pos: dict | None) -> tuple:
    if pos is not None:
        return (len(s), sorted(pos[e] for e in s))
    return (len(s), sorted(_sort_key_fallback(e) for e in s))


def _check_categories(categories: Any) -> list | None:
    if categories is None:
        return None
    if isinstance(categories, (str, bytes, dict)) or not hasattr(categories, "__iter__"):
        raise ValueError("categories must be a list of category values")
    cats = [_normalise_scalar(c, f"categories[{i}]") for i, c in enumerate(categories)]
    seen: set = set()
    for i, c in enumerate(cats):
        if c in seen:
            raise ValueError(f"categories[{i}]: duplicate category {c!r}")
        seen.add(c)
    if not cats:
        raise ValueError("categories must not be empty")
    return cats


#: cell types that are hashable scalars as they are (a set-valued cell of these needs no checks)
_PLAIN_SCALARS = frozenset({int, float, str, bool, bytes, type(None)})
#: the types of gaps (None, NaN)
_GAP_TYPES = frozenset({type(None), float, np.float64, np.float32, np.float16})


def _is_row(row: Any) -> bool:
    return isinstance(row, (list, tuple, np.ndarray)) and not isinstance(row, (str, bytes, dict))


class _CellError(Exception):
    """The first bad cell seen so far: ``(position, message)``, the lowest position winning."""


def _first_error(found: tuple[int, str] | None, position: int, message: str) -> tuple[int, str]:
    return (position, message) if found is None or position < found[0] else found


def _distinct_cells(rows: list, width: int) -> tuple[np.ndarray, list, list[int]]:
    """The cells of ``rows`` (row-major, ragged rows padded with gaps) coded by distinct
    normalised value: ``(codes, values, first)``, code -1 a gap (None or NaN), ``values[c]`` the
    normalised value (scalar or frozenset) as it first appears, ``first[c]`` where it first
    appears.  Values are told apart by Python equality, as a ``set`` does; a cell that does not
    normalise raises the error of the first such cell."""
    import pandas as pd

    n = len(rows)
    if set(map(len, rows)) <= {width}:
        cells = chain.from_iterable(rows)
    else:
        cells = chain.from_iterable(chain(row, repeat(None, width - len(row))) for row in rows)
    flat = np.fromiter(cells, dtype=object, count=n * width)  # a collection cell stays one object

    def where(i: int) -> str:
        return f"ratings[{i // width}][{i % width}]"

    error: tuple[int, str] | None = None
    try:
        fcodes, uniques = pd.factorize(flat, use_na_sentinel=False)
    except TypeError:  # unhashable cells (lists, sets, mappings, arrays): normalise those first
        flat = flat.copy()
        for i, x in enumerate(flat):
            t = type(x)
            if t in _PLAIN_SCALARS:
                continue
            if t is list or t is np.ndarray:  # the common set-valued cells: lists of scalars
                items = x.tolist() if t is np.ndarray else x
                types = set(map(type, items))
                if types <= _PLAIN_SCALARS:
                    flat[i] = frozenset(items)
                    continue
                if all(u in _PLAIN_SCALARS or (issubclass(u, np.generic) and u is not np.void) for u in types):
                    flat[i] = frozenset([v.item() if isinstance(v, np.generic) else v for v in items])
                    continue
            try:
                hash(x)
                continue
            except TypeError:
                pass
            try:
                flat[i] = _normalise_cell(x, where(i))
            except ValueError as exc:
                error = (i, str(exc))
                flat[i:] = None  # nothing after the first bad cell matters
                break
        fcodes, uniques = pd.factorize(flat, use_na_sentinel=False)
    fcodes = np.asarray(fcodes, dtype=np.int64)
    uniques = list(uniques)
    first = np.unique(fcodes, return_index=True)[1].tolist() if len(fcodes) else []
    # pandas puts every NA-like value in one group: only None and NaN are gaps, the others
    # (pd.NA, NaT, ...) are values of their own, as the cell rules say
    na = [k for k, v in enumerate(uniques) if pd.isna(v) is True]
    if na:
        at = np.flatnonzero(fcodes == na[0])
        odd = [] if set(map(type, flat[at])) <= _GAP_TYPES else [i for i in at.tolist() if not _is_missing(flat[i])]
        if odd:
            extra: dict[Any, int] = {}
            for i in odd:  # ascending: each new value at its first cell
                code = extra.get(flat[i])
                if code is None:
                    code = extra[flat[i]] = len(uniques) + len(extra)
                    first.append(i)
                fcodes[i] = code
            uniques += list(extra)
        uniques[na[0]] = None
    # normalise each distinct value once, then merge the ones Python calls equal (1 and 1.0)
    values: list = []
    index: dict[Any, int] = {}
    lookup = np.full(len(uniques) + 1, -1, dtype=np.int64)
    value_first: list[int] = []
    for k, v in enumerate(uniques):
        if v is None:
            continue
        try:
            v = _normalise_cell(v, where(first[k]))
        except ValueError as exc:
            error = _first_error(error, first[k], str(exc))
            continue
        if v is None:
            continue
        code = index.get(v)
        if code is None:
            code = index[v] = len(values)
            values.append(v)
            value_first.append(first[k])
        elif first[k] < value_first[code]:
            values[code], value_first[code] = v, first[k]
        lookup[k] = code
    if error is not None:
        raise _CellError(*error)
    return lookup[fcodes], values, value_first


def encode_ratings(ratings: Any, categories: list | None = None, *, as_sets: bool = False) -> CodedRatings:
    """Validate a ratings matrix and code it; returns a :class:`CodedRatings`.

    A cell is None or NaN (a gap), a hashable scalar (numpy scalars become Python ones) or a
    list / tuple / set of scalar labels (a set-valued rating); values are told apart by Python
    equality.  Rows may be ragged (short rows end in gaps).  With any set-valued cell, or
    ``as_sets``, every cell is a set.  Raises ``ValueError`` naming ``ratings``, ``ratings[u]``
    or ``ratings[u][r]`` (the first bad one, row by row) on bad input.
    """
    if isinstance(ratings, (str, bytes, dict)) or not hasattr(ratings, "__iter__"):
        raise ValueError("ratings must be a list of units, each a list of rater cells")
    rows = list(ratings)
    cats = _check_categories(categories)
    bad_row = None
    if not set(map(type, rows)) <= {list, tuple, np.ndarray}:
        bad_row = next((u for u, row in enumerate(rows) if not _is_row(row)), None)
    good = rows if bad_row is None else rows[:bad_row]
    width = max(map(len, good), default=0)
    try:
        codes, values, first = _distinct_cells(good, width)
    except _CellError as exc:
        raise ValueError(exc.args[1]) from None
    if bad_row is not None:
        raise ValueError(f"ratings[{bad_row}] must be a list of rater cells")
    any_set = as_sets or any(isinstance(v, frozenset) for v in values)
    if any_set:  # every cell a set: a scalar is the set of one label (and may meet a set)
        merged: dict[frozenset, int] = {}
        remap = np.empty(len(values) + 1, dtype=np.int64)
        remap[-1] = -1
        sets: list[frozenset] = []
        set_first: list[int] = []
        for k, (v, f) in enumerate(zip(values, first)):
            s = v if isinstance(v, frozenset) else frozenset([v])
            code = merged.get(s)
            if code is None:
                code = merged[s] = len(sets)
                sets.append(s)
                set_first.append(f)
            elif f < set_first[code]:
                sets[code], set_first[code] = s, f
            remap[k] = code
        codes = remap[codes]
        values, first = sets, set_first
    pos = {c: i for i, c in enumerate(cats)} if cats is not None else None
    if pos is not None:
        error: tuple[int, str] | None = None
        for v, f in zip(values, first):
            where = f"ratings[{f // width}][{f % width}]"
            if any_set:
                bad = [e for e in v if e not in pos]
                if bad:
                    error = _first_error(error, f, f"{where}: label {bad[0]!r} is not in categories")
            elif v not in pos:
                error = _first_error(error, f, f"{where}: value {v!r} is not in categories")
        if error is not None:
            raise ValueError(error[1])
    if any_set:
        domain = tuple(sorted(values, key=lambda s: _set_key(s, pos)))
    elif cats is not None:
        domain = tuple(cats)
    else:
        domain = tuple(_sorted_values(set(values)))
    index = {v: i for i, v in enumerate(domain)}
    lookup = np.array([index[v] for v in values] + [-1], dtype=np.int64)
    return CodedRatings(codes=lookup[codes].reshape(len(rows), width), domain=domain, is_set=any_set)


# --------------------------------------------------------------------------------------------
# distances


def jaccard_distance(a: frozenset | set, b: frozenset | set) -> float:
    """Jaccard distance ``1 - |a & b| / |a | b|``; 0 for two empty sets."""
    union = len(a | b)
    if union == 0:
        return 0.0
    return 1.0 - len(a & b) / union


def masi_distance(a: frozenset | set, b: frozenset | set) -> float:
    """MASI distance (Passonneau 2006), as nltk's ``masi_distance``; 0 for two empty sets."""
    union = len(a | b)
    if union == 0:
        return 0.0
    inter = len(a & b)
    if len(a) == len(b) == inter:
        m = 1.0
    elif inter == min(len(a), len(b)):
        m = 2.0 / 3.0
    elif inter > 0:
        m = 1.0 / 3.0
    else:
        m = 0.0
    return 1.0 - inter / union * m


def _size_table(n_sizes: int, distance: str) -> np.ndarray:
    """The MASI or Jaccard distance of two sets of sizes ``a``, ``b`` with ``t`` common elements,
    flat at ``(a * n_sizes + b) * n_sizes + t`` (the same float64 operations as the block path
    of :func:`_set_distances`)."""
    sa, sb, ii = np.meshgrid(np.arange(n_sizes, dtype=np.float64), np.arange(n_sizes, dtype=np.float64),
                             np.arange(n_sizes, dtype=np.float64), indexing="ij")
    un = sa + sb - ii
    sim = np.divide(ii, un, out=np.ones(un.shape), where=un > 0)
    if distance == "masi":
        m = np.zeros(un.shape)
        m[ii > 0] = 1.0 / 3.0
        m[ii == np.minimum(sa, sb)] = 2.0 / 3.0
        m[(sa == sb) & (ii == sa)] = 1.0
        sim *= m
    return (1.0 - sim).reshape(-1)


def _set_distances(domain: tuple, distance: str) -> np.ndarray:
    """Pairwise MASI or Jaccard distances between the sets in ``domain`` (vectorised).

    Intersections come from a 0/1 membership matrix product (exact small integers in float32),
    computed a block of rows at a time so that only the (k, k) result is ever full size; the
    divisions are done in float64 on those exact integers, as a full float64 product would."""
    k = len(domain)
    universe = {e: i for i, e in enumerate({e for s in domain for e in s})}
    member = np.zeros((k, max(len(universe), 1)), dtype=np.float32)
    for i, s in enumerate(domain):
        member[i, [universe[e] for e in s]] = 1.0
    size = member.sum(axis=1)
    out = np.empty((k, k))
    step = 512
    n_sizes = int(size.max()) + 1 if k else 1
    if n_sizes <= 64:
        # the distance depends only on (|a|, |b|, |a & b|): one table of every combination, made
        # with the same float64 operations as below, then one lookup per cell
        table = _size_table(n_sizes, distance)
        isize = size.astype(np.int64)
        for lo in range(0, k, step):
            hi = min(k, lo + step)
            idx = (isize[lo:hi, None] * n_sizes + isize[None, :]) * n_sizes
            idx += (member[lo:hi] @ member.T).astype(np.int64)
            np.take(table, idx, out=out[lo:hi])
        return out
    for lo in range(0, k, step):
        hi = min(k, lo + step)
        inter = member[lo:hi] @ member.T
        union = np.add.outer(size[lo:hi], size)
        union -= inter
        sim = np.divide(inter.astype(np.float64), union.astype(np.float64), out=np.ones(inter.shape),
                        where=union > 0)
        if distance == "masi":
            m = np.zeros(inter.shape)
            m[inter > 0] = 1.0 / 3.0
            m[inter == np.minimum.outer(size[lo:hi], size)] = 2.0 / 3.0
            m[np.equal.outer(size[lo:hi], size) & (inter == size[lo:hi, None])] = 1.0
            sim *= m
        np.subtract(1.0, sim, out=out[lo:hi])
    return out


def _numeric_values(domain: tuple) -> np.ndarray:
    """Numeric value of each category: the value itself if all are real numbers, else 1..k."""
    if domain and all(isinstance(v, numbers.Real) for v in domain):
        vals = np.array([float(v) for v in domain])
        if np.all(np.isfinite(vals)):
            return vals
    return np.arange(1, len(domain) + 1, dtype=np.float64)


def _delta_matrix(coded: CodedRatings, level: str, distance: str | None) -> np.ndarray:
    """Fixed distance matrix between categories (not used for the ordinal level)."""
    k = len(coded.domain)
    if distance is not None:
        return _set_distances(coded.domain, distance)
    if level == "nominal":
        return 1.0 - np.eye(k)
    v = _numeric_values(coded.domain)
    if level == "interval":
        return (v[:, None] - v[None, :]) ** 2
    if level == "ratio":
        s = v[:, None] + v[None, :]
        diff = v[:, None] - v[None, :]
        return np.divide(diff, s, out=np.zeros((k, k)), where=s != 0) ** 2
    raise AssertionError(level)


def _ordinal_delta(nc: np.ndarray) -> np.ndarray:
    """Ordinal distances for marginal counts ``nc`` (b, k) -> (b, k, k)."""
    b, k = nc.shape
    cum = np.concatenate([np.zeros((b, 1)), np.cumsum(nc, axis=1)], axis=1)
    idx = np.arange(k)
    lo = np.minimum(idx[:, None], idx[None, :])
    hi = np.maximum(idx[:, None], idx[None, :])
    between = cum[:, hi + 1] - cum[:, lo]
    return (between - (nc[:, lo] + nc[:, hi]) / 2.0) ** 2


def _kappa_disagreement(k: int, weights: str) -> np.ndarray:
    i = np.arange(k)
    if weights == "unweighted":
        return 1.0 - np.eye(k)
    if weights == "linear":
        return np.abs(i[:, None] - i[None, :]).astype(float)
    return ((i[:, None] - i[None, :]) ** 2).astype(float)


# --------------------------------------------------------------------------------------------
# patterns and per-pattern statistics


@dataclass
class _Patterns:
    rows: np.ndarray  # (P, R) distinct coded rows
    counts: np.ndarray  # (P,) multiplicity
    inverse: np.ndarray  # (n,) pattern of each unit
    n_cat: int

    def value_counts(self) -> np.ndarray:
        """(P, K) float: number of raters giving each category, per pattern."""
        p, _ = self.rows.shape
        rr, cc = np.nonzero(self.rows >= 0)
        flat = rr * self.n_cat + self.rows[rr, cc]
        return np.bincount(flat, minlength=p * self.n_cat).reshape(p, self.n_cat).astype(np.float64)


def _row_keys(codes: np.ndarray, n_values: int) -> np.ndarray | None:
    """One int64 per row whose numeric order is the rows' lexicographic order (first column
    most significant), for rows of values in ``-1 .. n_values - 2``; None if it would overflow."""
    n, width = codes.shape
    base = n_values
    if width == 0 or base < 2 or width * math.log2(base) >= 62:
        return None
    keys = np.zeros(n, dtype=np.int64)
    for r in range(width):
        keys *= base
        keys += codes[:, r] + 1
    return keys


def _unique_rows(codes: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(codes, axis=0, return_inverse=True, return_counts=True)``, the same result
    (same row order) through a 1-D sort of packed row keys when the rows fit in an int64."""
    keys = _row_keys(codes, n_values)
    if keys is None:
        rows, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
        return rows, np.asarray(inverse).reshape(-1), counts
    n, width = codes.shape
    n_keys = n_values**width
    if n_keys <= max(4 * n, 1 << 12):
        # few possible rows (binary ratings of a few raters): count every key, no sort; the
        # keys present in increasing order are np.unique's, and each decodes to its row
        full = np.bincount(keys, minlength=n_keys)
        present = np.flatnonzero(full)
        slot = np.cumsum(full > 0) - 1
        rows = np.empty((len(present), width), dtype=codes.dtype)
        rest = present.copy()
        for r in range(width - 1, -1, -1):
            rows[:, r] = rest % n_values - 1
            rest //= n_values
        return rows, slot[keys], full[present]
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    return codes[first], np.asarray(inverse).reshape(-1), counts


def _patterns(codes: np.ndarray, n_cat: int) -> _Patterns:
    rows, inverse, counts = _unique_rows(codes, n_cat + 1)
    return _Patterns(rows=rows, counts=counts, inverse=inverse, n_cat=n_cat)


def _safe_ratio(num: np.ndarray, den: np.ndarray, ok: np.ndarray) -> np.ndarray:
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=ok)
    return out


def _pair_agreement(vc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = vc.sum(axis=1)
    pairs = m * (m - 1)
    a = _safe_ratio((vc * (vc - 1)).sum(axis=1), pairs, pairs > 0)
    return np.nan_to_num(a), m


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)


class _Stat:
    """A coefficient as a function of pattern weights; ``__call__(W (b, P)) -> (b,)``."""

    cost = 0

    def __call__(self, w: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


class _PercentStat(_Stat):
    def __init__(self, pat: _Patterns):
        self.a, _ = _pair_agreement(pat.value_counts())

    def __call__(self, w):
        return (w @ self.a) / w.sum(axis=1)


class _ChanceStat(_Stat):
    """Fleiss' kappa (``kind='fleiss'``) or Gwet's AC1 (``kind='ac1'``), Gwet 2014 / irrCAC."""

    def __init__(self, pat: _Patterns, kind: str):
        vc = pat.value_counts()
        self.a, m = _pair_agreement(vc)
        self.pair = (m >= 2).astype(np.float64)
        self.prop = vc / np.maximum(m, 1)[:, None]
        self.kind = kind
        self.q = pat.n_cat

    def __call__(self, w):
        wp = w @ self.pair
        pa = _safe_ratio(w @ (self.a * self.pair), wp, wp > 0)
        pi = (w @ self.prop) / w.sum(axis=1)[:, None]
        if self.kind == "fleiss":
            pe = (pi**2).sum(axis=1)
        else:
            pe = (pi * (1.0 - pi)).sum(axis=1) / (self.q - 1)
        return _safe_ratio(pa - pe, 1.0 - pe, (1.0 - pe) > _EPS)


class _AlphaStat(_Stat):
    """Coincidence-based Krippendorff's alpha with a fixed distance matrix or the ordinal one.

    Per pattern it keeps the value counts (sparse, P x K) and either the observed-disagreement
    sum ``sum_{r != s} delta(c_r, c_s) / (m - 1)`` (fixed distances) or the coincidence
    contributions (sparse, P x K^2; ordinal, whose distances depend on the marginals).
    """

    def __init__(self, pat: _Patterns, delta: np.ndarray | None):
        rows = pat.rows
        n_pat, n_r = rows.shape
        k = pat.n_cat
        rated = rows >= 0
        m = rated.sum(axis=1).astype(np.float64)
        rr, cc = np.nonzero(rated)
        self.vc = sparse.csr_matrix((np.ones(len(rr)), (rr, rows[rr, cc])), shape=(n_pat, k))
        self.delta = delta
        inv = 1.0 / np.maximum(m - 1.0, 1.0)
        if delta is None:
            pr, pc, pv = [], [], []
            for r, s_ in combinations(range(n_r), 2):
                both = np.nonzero(rated[:, r] & rated[:, s_])[0]
                a, b = rows[both, r], rows[both, s_]
                pr += [both, both]
                pc += [a * k + b, b * k + a]
                pv += [inv[both], inv[both]]
            self.o = sparse.csr_matrix(
                (_cat(pv, np.float64), (_cat(pr, np.int64), _cat(pc, np.int64))), shape=(n_pat, k * k)
            )
            self.cost = k * k * 3
        else:
            d = np.zeros(n_pat)
            for r, s_ in combinations(range(n_r), 2):
                both = rated[:, r] & rated[:, s_]
                d[both] += 2.0 * delta[rows[both, r], rows[both, s_]]
            self.d = d * inv
            self.cost = k * 2

    @staticmethod
    def _wsum(mat: sparse.csr_matrix, w: np.ndarray) -> np.ndarray:
        return np.asarray((mat.T @ w.T).T)

    def __call__(self, w):
        nc = self._wsum(self.vc, w)
        n = nc.sum(axis=1)
        if self.delta is None:
            k = nc.shape[1]
            dl = _ordinal_delta(nc)
            do = (self._wsum(self.o, w).reshape(-1, k, k) * dl).sum(axis=(1, 2))
            de = np.einsum("bi,bij,bj->b", nc, dl, nc)
        else:
            do = w @ self.d
            de = ((nc @ self.delta) * nc).sum(axis=1)
        ok = de > _EPS * np.maximum(n, 1.0) ** 2
        return 1.0 - _safe_ratio((n - 1.0) * do, de, ok)


#: most subsets :func:`_set_alpha_point` enumerates before it leaves the work to the k x k path
_MAX_SUBSETS = 4_000_000
#: the largest k x k distance matrix of a set-valued alpha (the bootstrap's path, and the point's
#: when :func:`_set_alpha_point` does not apply): beyond it the alpha is None with its reason
#: instead of a job failing on memory (250,000 demo runs: 77,225 distinct sets, 44 GiB)
MAX_SET_DISTANCE_BYTES = 4 * 2**30
_POP16: np.ndarray | None = None


def _popcount(x: np.ndarray) -> np.ndarray:
    """Number of set bits of each non-negative int64."""
    global _POP16
    if _POP16 is None:
        t = np.arange(1 << 16, dtype=np.int64)
        pop = np.zeros(1 << 16, dtype=np.int64)
        for b in range(16):
            pop += (t >> b) & 1
        _POP16 = pop
    out = _POP16[x & 0xFFFF]
    for shift in (16, 32, 48):
        out = out + _POP16[(x >> shift) & 0xFFFF]
    return out


def _set_alpha_point(pat: _Patterns, domain: tuple, distance: str) -> float | None:
    """Krippendorff's alpha with the MASI / Jaccard distance, the point value only, without the
    k x k distance matrix of :func:`_set_distances` (the set-valued domain grows with the data:
    4,165 distinct mode sets at 2,500 runs). Returns None when this path does not apply (more than
    62 distinct labels, sets of more than 63 labels, too many subsets); the caller then takes the
    :class:`_AlphaStat` path.

    Every distance is ``table[|a|, |b|, |a & b|]`` (:func:`_size_table`, the values of the k x k
    path). The observed disagreement looks the table up for the rated pairs of each pattern, with
    the same operations as :class:`_AlphaStat` (bit for bit). The expected disagreement
    ``sum_ij n_i n_j delta_ij`` needs, per pair of set sizes ``(a, b)``, the weighted number of
    category pairs with ``t`` common labels, ``H[a, b, t]``: with ``f_a(T)`` the weight of the
    categories of size ``a`` containing the subset ``T``, ``sum_{|T| = s} f_a(T) f_b(T) =
    sum_t C(t, s) H[a, b, t]``, inverted exactly in integers. Only the sum differs in order
    from the matrix path (equal to about 1e-15; the equivalence tests compare them)."""
    k = len(domain)
    universe: dict = {}
    members = [universe.setdefault(e, len(universe)) for s_ in domain for e in s_]
    if len(universe) > 62 or k == 0:
        return None
    sizes = np.fromiter(map(len, domain), dtype=np.int64, count=k)
    masks = np.zeros(k, dtype=np.int64)
    np.bitwise_or.at(masks, np.repeat(np.arange(k), sizes), np.left_shift(1, np.array(members, dtype=np.int64)))
    n_sizes = int(sizes.max()) + 1
    if n_sizes > 64:
        return None
    rows = pat.rows
    rated = rows >= 0
    n_r = rows.shape[1]
    counts = pat.counts.astype(np.float64)
    nc = np.bincount(rows[rated], weights=np.broadcast_to(counts[:, None], rows.shape)[rated], minlength=k)
    live = np.nonzero(nc > 0)[0]
    if int((2.0 ** sizes[live]).sum()) > _MAX_SUBSETS:
        return None
    total = float(nc.sum())
    if total * total * 2.0 ** (n_sizes - 1) >= 2.0**52:  # the integer sums below must stay exact
        return None
    table = _size_table(n_sizes, distance)

    # observed: as _AlphaStat.__init__ and __call__
    m = rated.sum(axis=1).astype(np.float64)
    inv = 1.0 / np.maximum(m - 1.0, 1.0)
    d = np.zeros(len(rows))
    for r, s_ in combinations(range(n_r), 2):
        both = rated[:, r] & rated[:, s_]
        a, b = rows[both, r], rows[both, s_]
        d[both] += 2.0 * table[(sizes[a] * n_sizes + sizes[b]) * n_sizes + _popcount(masks[a] & masks[b])]
    w = counts[None, :]
    do = w @ (d * inv)
    n = nc[None, :].sum(axis=1)

    # expected: every subset T of every live category, with its owner and size
    n_sub = int((np.int64(1) << sizes[live]).sum())
    bits = np.zeros((k, n_sizes), dtype=np.int64)  # bits[i, j]: the j-th lowest bit of masks[i]
    rest = masks.copy()
    for j in range(n_sizes - 1):
        bits[:, j] = rest & -rest
        rest ^= bits[:, j]
    owner = np.empty(n_sub, dtype=np.int64)
    sub = np.zeros(n_sub, dtype=np.int64)
    sub_size = np.zeros(n_sub, dtype=np.int64)
    owner[: len(live)] = live
    filled = len(live)
    for j in range(n_sizes - 1):
        ext = np.flatnonzero(sizes[owner[:filled]] > j)
        end = filled + len(ext)
        owner[filled:end] = owner[ext]
        sub[filled:end] = sub[ext] | bits[owner[ext], j]
        sub_size[filled:end] = sub_size[ext] + 1
        filled = end
    if len(universe) <= 24:  # distinct subsets by their mask as an index (no sort)
        seen = np.zeros(1 << len(universe), dtype=np.int64)
        seen[sub] = 1
        slot = np.cumsum(seen) - 1
        n_t = int(seen.sum())
        t_inv = slot[sub]
    else:
        subsets, t_inv = np.unique(sub, return_inverse=True)
        t_inv = np.asarray(t_inv).reshape(-1)
        n_t = len(subsets)
    f = np.bincount(t_inv * n_sizes + sizes[owner], weights=nc[owner],
                    minlength=n_t * n_sizes).reshape(n_t, n_sizes)
    t_size = np.zeros(n_t, dtype=np.int64)
    t_size[t_inv] = sub_size
    e_sum = np.zeros((n_sizes, n_sizes, n_sizes), dtype=np.int64)  # [a, b, s]
    for s_ in range(n_sizes):
        ft = f[t_size == s_]
        if len(ft):
            e_sum[:, :, s_] = np.rint(ft.T @ ft).astype(np.int64)
    h = np.zeros_like(e_sum)  # [a, b, t]: weighted category pairs with t common labels
    for t in range(n_sizes):
        for s_ in range(t, n_sizes):
            h[:, :, t] += (-1) ** (s_ - t) * math.comb(s_, t) * e_sum[:, :, s_]
    de = np.array([(h.reshape(-1).astype(np.float64) * table).sum()])
    ok = de > _EPS * np.maximum(n, 1.0) ** 2
    return float((1.0 - _safe_ratio((n - 1.0) * do, de, ok))[0])


class _PairKappaStat(_Stat):
    """Cohen's kappa for every rater pair; ``pair_values`` -> (b, Q), ``__call__`` -> pair mean."""

    def __init__(self, pat: _Patterns, pairs: list[tuple[int, int]], dis: np.ndarray):
        k = pat.n_cat
        self.k = k
        self.dis = dis
        self.q = len(pairs)
        rows_idx, cols_idx = [], []
        for qi, (i, j) in enumerate(pairs):
            a, b = pat.rows[:, i], pat.rows[:, j]
            both = np.nonzero((a >= 0) & (b >= 0))[0]
            rows_idx.append(both)
            cols_idx.append(qi * k * k + a[both] * k + b[both])
        r, c = _cat(rows_idx, np.int64), _cat(cols_idx, np.int64)
        self.e = sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(len(pat.counts), max(self.q, 1) * k * k))
        self.cost = self.q * k * k * 2

    def pair_values(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (kappa (b, Q) with NaN where undefined, shared-unit weight (b, Q))."""
        k = self.k
        o = np.asarray((self.e.T @ w.T).T).reshape(w.shape[0], self.q, k, k)
        n = o.sum(axis=(2, 3))
        row = o.sum(axis=3)
        col = o.sum(axis=2)
        exp = _safe_ratio(np.einsum("bqi,ij,bqj->bq", row, self.dis, col), n, n > 0)
        obs = np.einsum("bqij,ij->bq", o, self.dis)
        ok = (n > 0) & (np.nan_to_num(exp) > _EPS * np.maximum(n, 1.0))
        return 1.0 - _safe_ratio(obs, exp, ok), n

    def __call__(self, w):
        vals, _ = self.pair_values(w)
        fin = np.isfinite(vals)
        cnt = fin.sum(axis=1)
        return _safe_ratio(np.where(fin, vals, 0.0).sum(axis=1), cnt, cnt > 0)


# --------------------------------------------------------------------------------------------
# validation and entry points


def _validate(
    coefficient: str, level: str, weights: str, distance: str | None, n_boot: int, confidence: float
):
    if coefficient not in COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {', '.join(COEFFICIENTS)}; got {coefficient!r}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}; got {weights!r}")
    if distance is not None and distance not in DISTANCES:
        raise ValueError(f"distance must be one of {', '.join(DISTANCES)} or null; got {distance!r}")
    if coefficient != "krippendorff_alpha":
        if level != "nominal":
            raise ValueError(
                f"level applies only to krippendorff_alpha; got level={level!r} for {coefficient}"
            )
        if distance is not None:
            raise ValueError(f"distance applies only to krippendorff_alpha; got distance={distance!r}")
    elif distance is not None and level != "nominal":
        raise ValueError("level must be 'nominal' (the default) when a set distance is given")
    if coefficient != "cohen_kappa" and weights != "unweighted":
        raise ValueError(f"weights applies only to cohen_kappa; got weights={weights!r} for {coefficient}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be a non-negative integer; got {n_boot!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number strictly between 0 and 1; got {confidence!r}")


def _cluster_weights(pat: _Patterns, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group units into clusters: (cluster-row pattern counts (G, P), multiplicity (G,), inverse (C,))."""
    _, cl = np.unique(np.asarray(clusters), return_inverse=True)
    cl = np.asarray(cl).reshape(-1)
    n_cl = int(cl.max()) + 1 if cl.size else 0
    mat = np.zeros((n_cl, len(pat.counts)))
    np.add.at(mat, (cl, pat.inverse), 1.0)
    rows, inverse, counts = np.unique(mat, axis=0, return_inverse=True, return_counts=True)
    return rows, counts, np.asarray(inverse).reshape(-1)


def _finish(
    stat: _Stat | None,
    pat: _Patterns,
    point: float,
    n_units: int,
    reason: str | None,
    n_boot: int,
    seed: int,
    confidence: float,
    clusters: np.ndarray | None = None,
) -> AgreementResult:
    if point is None or not math.isfinite(point):
        return AgreementResult(None, n_units, None, reason or R_NON_FINITE)
    ci = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        if clusters is not None and len(np.unique(clusters)) == len(clusters):
            clusters = None  # one unit per cluster: plain unit resampling
        if clusters is None:
            reps = bootstrap_values(
                stat, pat.counts, int(n_boot), rng, unit_pattern=pat.inverse, cost_per_replicate=stat.cost
            )
        else:
            rows, counts, inverse = _cluster_weights(pat, clusters)

            def cluster_stat(wc: np.ndarray) -> np.ndarray:
                return stat(wc @ rows)

            reps = bootstrap_values(
                cluster_stat,
                counts,
                int(n_boot),
                rng,
                unit_pattern=inverse,
                cost_per_replicate=max(stat.cost, rows.shape[1]),
            )
        ci = percentile_ci(reps, confidence)
    return AgreementResult(float(point), n_units, ci, None)


def _point(stat: _Stat, pat: _Patterns) -> float:
    return float(stat(pat.counts[None, :].astype(np.float64))[0])


def _empty_reason(coded: CodedRatings, m: np.ndarray) -> str | None:
    if coded.codes.size == 0 or not (m > 0).any():
        return R_NO_RATINGS
    if coded.n_raters < 2:
        return R_ONE_RATER
    if not (m >= 2).any():
        return R_NO_PAIRABLE
    return None


def _check_clusters(clusters: Any, n: int) -> np.ndarray | None:
    if clusters is None:
        return None
    arr = np.asarray(clusters)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"clusters must hold one label per unit ({n}); got shape {arr.shape}")
    return arr


def _sub(clusters: np.ndarray | None, mask: np.ndarray) -> np.ndarray | None:
    return None if clusters is None else clusters[mask]


def _no_variation(codes: np.ndarray) -> bool:
    vals = codes[codes >= 0]
    return vals.size == 0 or bool((vals == vals[0]).all())


class _Shared:
    """What every coefficient of one coded matrix computes alike (rated counts per unit, the
    patterns of the pairable and of the rated units), computed once for
    :func:`compute_coded_many`."""

    def __init__(self, codes: np.ndarray, k: int) -> None:
        self.codes = codes
        self.k = k
        self.m = (codes >= 0).sum(axis=1)
        self._pats: dict[int, _Patterns] = {}

    def fits(self, codes: np.ndarray, k: int) -> bool:
        return codes is self.codes and k == self.k

    def patterns(self, at_least: int) -> _Patterns:
        """The patterns of the units with at least ``at_least`` ratings."""
        pat = self._pats.get(at_least)
        if pat is None:
            pat = self._pats[at_least] = _patterns(self.codes[self.m >= at_least], self.k)
        return pat


def compute_coded(
    coefficient: str,
    coded: CodedRatings,
    *,
    level: str = "nominal",
    weights: str = "unweighted",
    distance: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
    _shared: _Shared | None = None,
) -> AgreementResult:
    """Like :func:`compute`, on an already coded matrix (see :func:`encode_ratings`).

    ``clusters`` (optional, one label per unit) makes the bootstrap resample whole clusters
    (e.g. runs, when the units are run x mode) instead of single units.
    """
    _validate(coefficient, level, weights, distance, n_boot, confidence)
    if coded.is_set and level != "nominal":
        raise ValueError(f"level={level!r} needs scalar ratings; set-valued cells take level 'nominal'")
    if coded.is_set and weights != "unweighted":
        raise ValueError(f"weights={weights!r} needs scalar ratings; set-valued cells take 'unweighted'")
    if distance is not None and not coded.is_set:
        coded = CodedRatings(coded.codes, tuple(frozenset([v]) for v in coded.domain), True)
    codes = coded.codes
    cl = _check_clusters(clusters, len(codes))
    k = len(coded.domain)
    memo = _shared if _shared is not None and _shared.fits(codes, k) else _Shared(codes, k)
    m = memo.m
    pairable = m >= 2
    n_pairable = int(pairable.sum())
    reason = _empty_reason(coded, m)

    if coefficient == "cohen_kappa":
        if reason is not None:
            return AgreementResult(None, n_pairable, None, reason)
        res = pairwise_cohen_coded(
            coded, weights=weights, n_boot=n_boot, seed=seed, confidence=confidence, clusters=clusters,
            _shared=memo,
        )
        return res["mean_result"]
    if reason is not None:
        return AgreementResult(None, n_pairable, None, reason)

    if coefficient == "percent":
        pat = memo.patterns(2)
        stat: _Stat = _PercentStat(pat)
        return _finish(
            stat, pat, _point(stat, pat), n_pairable, None, n_boot, seed, confidence, _sub(cl, pairable)
        )

    if coefficient in ("fleiss_kappa", "gwet_ac1"):
        if coefficient == "gwet_ac1" and k < 2:
            return AgreementResult(None, n_pairable, None, R_ONE_CATEGORY)
        pat = memo.patterns(1)
        stat = _ChanceStat(pat, "fleiss" if coefficient == "fleiss_kappa" else "ac1")
        point = _point(stat, pat)
        why = R_NO_VARIATION if _no_variation(codes[m >= 1]) else None
        return _finish(stat, pat, point, n_pairable, why, n_boot, seed, confidence, _sub(cl, m >= 1))

    # krippendorff_alpha
    sub = codes[pairable]
    if _no_variation(sub):
        return AgreementResult(None, n_pairable, None, R_NO_VARIATION)
    pat = memo.patterns(2)
    if distance is not None and n_boot == 0:
        point = _set_alpha_point(pat, coded.domain, distance)
        if point is not None:
            return _finish(None, pat, point, n_pairable, None, 0, seed, confidence)
    if distance is not None and 8 * k * k > MAX_SET_DISTANCE_BYTES:
        return AgreementResult(None, n_pairable, None, R_TOO_MANY_SETS.format(k=k, gib=8 * k * k / 2**30))
    if level == "ordinal" and distance is None:
        stat = _AlphaStat(pat, None)
    else:
        stat = _AlphaStat(pat, _delta_matrix(coded, level, distance))
    # The point value is the same coincidence formula the krippendorff package evaluates (the
    # cross-check tests compare them on random data); evaluated once on the pattern weights.
    point = _point(stat, pat)
    return _finish(stat, pat, point, n_pairable, None, n_boot, seed, confidence, _sub(cl, pairable))


def compute_coded_many(coefficients: Any, coded: CodedRatings, **kw: Any) -> dict[str, AgreementResult]:
    """:func:`compute_coded` of each of ``coefficients`` on ``coded`` with the same keywords; the
    per-unit counts and the rating patterns are computed once for all of them (the results are
    those of separate calls)."""
    shared = _Shared(coded.codes, len(coded.domain))
    return {c: compute_coded(c, coded, _shared=shared, **kw) for c in coefficients}


def pairwise_cohen_coded(
    coded: CodedRatings,
    *,
    weights: str = "unweighted",
    n_boot: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
    _shared: _Shared | None = None,
) -> dict[str, Any]:
    """Pairwise Cohen's kappa on a coded matrix.

    Returns a dict: ``matrix`` (R x R kappa, None on the diagonal and where undefined),
    ``n_units`` (R x R shared-unit counts), ``pairs`` (list of ``{"a", "b", "value", "n_units",
    "reason"?}``), ``mean`` (the mean over defined pairs, as ``AgreementResult.to_dict()``) and
    ``mean_result`` (the same as an :class:`AgreementResult`; not JSON, drop it before serialising).
    """
    _validate("cohen_kappa", "nominal", weights, None, n_boot, confidence)
    if coded.is_set and weights != "unweighted":
        raise ValueError(f"weights={weights!r} needs scalar ratings; set-valued cells take 'unweighted'")
    codes = coded.codes
    cl = _check_clusters(clusters, len(codes))
    n_r = coded.n_raters
    k = len(coded.domain)
    memo = _shared if _shared is not None and _shared.fits(codes, k) else _Shared(codes, k)
    m = memo.m
    pairable = m >= 2
    n_pairable = int(pairable.sum())
    matrix: list[list[float | None]] = [[None] * n_r for _ in range(n_r)]
    shared = [[0] * n_r for _ in range(n_r)]
    pairs_out: list[dict[str, Any]] = []
    reason = _empty_reason(coded, m)
    if reason is not None:
        mean = AgreementResult(None, n_pairable, None, reason)
        return {
            "matrix": matrix,
            "n_units": shared,
            "pairs": pairs_out,
            "mean": mean.to_dict(),
            "mean_result": mean,
        }
    pairs = list(combinations(range(n_r), 2))
    pat = memo.patterns(2)
    stat = _PairKappaStat(pat, pairs, _kappa_disagreement(k, weights))
    vals, nn = stat.pair_values(pat.counts[None, :].astype(np.float64))
    for qi, (i, j) in enumerate(pairs):
        v = float(vals[0, qi])
        n_ij = int(np.rint(nn[0, qi]))
        shared[i][j] = shared[j][i] = n_ij
        entry: dict[str, Any] = {"a": i, "b": j, "n_units": n_ij}
        if math.isfinite(v):
            matrix[i][j] = matrix[j][i] = v
            entry["value"] = v
        else:
            entry["value"] = None
            entry["reason"] = R_NO_SHARED if n_ij == 0 else R_NO_VARIATION
        pairs_out.append(entry)
    defined = [e["value"] for e in pairs_out if e["value"] is not None]
    n_units = shared[0][1] if n_r == 2 else n_pairable
    if not defined:
        if len(pairs_out) == 1:
            why = pairs_out[0]["reason"]
        elif all(e.get("reason") == R_NO_SHARED for e in pairs_out):
            why = R_NO_SHARED
        else:
            why = "no rater pair has a defined kappa: " + R_NO_VARIATION
        mean = AgreementResult(None, n_units, None, why)
    else:
        point = float(np.mean(defined))
        # for two raters the pairable units are exactly the units both rated
        mean = _finish(stat, pat, point, n_units, None, n_boot, seed, confidence, _sub(cl, pairable))
    return {
        "matrix": matrix,
        "n_units": shared,
        "pairs": pairs_out,
        "mean": mean.to_dict(),
        "mean_result": mean,
    }


def compute(
    coefficient: str,
    ratings: list[list],
    *,
    level: str = "nominal",
    weights: str = "unweighted",
    categories: list | None = None,
    distance: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> AgreementResult:
    """Compute one agreement coefficient with a bootstrap percentile interval.

    Returns an :class:`AgreementResult`; see the module docstring for definitions, the
    bootstrap and degenerate cases.  Raises ``ValueError`` naming the parameter or cell on
    bad input.
    """
    _validate(coefficient, level, weights, distance, n_boot, confidence)
    coded = encode_ratings(ratings, categories, as_sets=distance is not None)
    return compute_coded(
        coefficient,
        coded,
        level=level,
        weights=weights,
        distance=distance,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )


def pairwise_cohen_kappa(
    ratings: list[list],
    *,
    weights: str = "unweighted",
    categories: list | None = None,
    n_boot: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Cohen's kappa for every pair of raters (columns); JSON-ready dict.

    Keys: ``matrix`` (R x R, None on the diagonal and where undefined), ``n_units`` (shared
    units per pair), ``pairs`` (``{"a", "b", "value", "n_units", "reason"?}``), ``mean``
    (mean over defined pairs as ``AgreementResult.to_dict()``).
    """
    coded = encode_ratings(ratings, categories)
    out = pairwise_cohen_coded(coded, weights=weights, n_boot=n_boot, seed=seed, confidence=confidence)
    out.pop("mean_result")
    return out


def percent_agreement(ratings: list[list], **kw: Any) -> AgreementResult:
    """Mean pairwise percent agreement (see module docstring); keywords as :func:`compute`."""
    kw.setdefault("n_boot", 0)
    return compute("percent", ratings, **kw)


def cohen_kappa(ratings: list[list], **kw: Any) -> AgreementResult:
    """Cohen's kappa (two raters) or mean pairwise kappa (more); keywords as :func:`compute`."""
    kw.setdefault("n_boot", 0)
    return compute("cohen_kappa", ratings, **kw)


def fleiss_kappa(ratings: list[list], **kw: Any) -> AgreementResult:
    """Fleiss' kappa, generalised to missing ratings; keywords as :func:`compute`."""
    kw.setdefault("n_boot", 0)
    return compute("fleiss_kappa", ratings, **kw)


def krippendorff_alpha(ratings: list[list], **kw: Any) -> AgreementResult:
    """Krippendorff's alpha at ``level`` or with a set ``distance``; keywords as :func:`compute`."""
    kw.setdefault("n_boot", 0)
    return compute("krippendorff_alpha", ratings, **kw)


def gwet_ac1(ratings: list[list], **kw: Any) -> AgreementResult:
    """Gwet's AC1 (unweighted, missing ratings allowed); keywords as :func:`compute`."""
    kw.setdefault("n_boot", 0)
    return compute("gwet_ac1", ratings, **kw)
