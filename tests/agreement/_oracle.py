"""The implementations the vectorised first-compute paths replaced (issue 14), kept verbatim as
the oracle of the equivalence tests (``test_first_compute_equivalence``).

:func:`old_implementation` patches them back into the app modules, so that a whole
``agreement_report`` can be computed the old way and compared with the new one.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from app.agreement import coefficients, units
from app.agreement.coefficients import CodedRatings, _row_keys
from app.agreement.units import LabelMatrices, _as_set, _f, _plain, _sorted

# --------------------------------------------------------------------------------------------
# app/agreement/units.py before


def _label_groups(labels: pd.DataFrame) -> dict[tuple, dict[Any, tuple[set, set]]]:
    """(run_id, mode) -> annotator -> (agent set, evidence set), over the given labels."""
    out: dict[tuple, dict[Any, tuple[set, set]]] = {}
    has_agent = "agent" in labels.columns
    has_ev = "evidence" in labels.columns
    cols = [
        labels["run_id"],
        labels["mode"],
        labels["annotator"],
        labels["agent"] if has_agent else [None] * len(labels),
        labels["evidence"] if has_ev else [None] * len(labels),
    ]
    for run, mode, ann, agent, ev in zip(*cols):
        agents_set, ev_set = out.setdefault((run, mode), {}).setdefault(ann, (set(), set()))
        if agent is not None and not (isinstance(agent, float) and math.isnan(agent)):
            agents_set.add(_plain(agent))
        if type(ev) is list and all(type(v) is int for v in ev):  # the stored form
            ev_set.update(ev)
        else:
            ev_set.update(_as_set(ev))
    return out  # plain sets: compared and combined like frozensets, without copying them


def blame_and_evidence(labels: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    same = attributed = unattributed = 0
    jac: list[float] = []
    no_ev = 0
    for by_ann in _label_groups(labels).values():
        if len(by_ann) < 2:
            continue
        for a, b in combinations(_sorted(by_ann), 2):
            (ag_a, ev_a), (ag_b, ev_b) = by_ann[a], by_ann[b]
            if ag_a and ag_b:
                attributed += 1
                same += ag_a == ag_b
            else:
                unattributed += 1
            union = ev_a | ev_b
            if union:
                jac.append(len(ev_a & ev_b) / len(union))
            else:
                no_ev += 1
    blame = {
        "n_pairs": attributed,
        "n_same_agent": same,
        "proportion": _f(same / attributed) if attributed else None,
        "n_pairs_unattributed": unattributed,
    }
    evidence = {
        "n_pairs": len(jac),
        "mean_jaccard": _f(np.mean(jac)) if jac else None,
        "n_pairs_without_evidence": no_ev,
    }
    return blame, evidence


def submitted_labels(labels: pd.DataFrame, submissions: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    subs = submissions[["annotator", "run_id"]].drop_duplicates()
    keys = pd.MultiIndex.from_frame(subs)
    lab_keys = pd.MultiIndex.from_frame(labels[["annotator", "run_id"]])
    keep = lab_keys.isin(keys)
    return labels.loc[keep], int((~keep).sum())


def mode_sets(mx: LabelMatrices) -> CodedRatings:
    """Set-valued ratings: per unit and annotator the frozenset of marked modes (None if missing)."""
    n_u, n_m, n_a = mx.presence.shape
    flat = np.transpose(mx.presence, (0, 2, 1)).reshape(n_u * n_a, n_m)
    missing = ~mx.submitted.reshape(-1)
    present = flat[~missing] == 1
    codes = np.full(n_u * n_a, -1, dtype=np.int64)
    if present.shape[0]:
        if n_m <= 62:  # a bitmask per cell (first mode most significant: np.unique's row order)
            bits = np.left_shift(np.int64(1), np.arange(n_m - 1, -1, -1, dtype=np.int64))
            keys = present.astype(np.int64) @ bits
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            rows = present[first]
        else:
            rows, inverse = np.unique(present, axis=0, return_inverse=True)
        codes[~missing] = np.asarray(inverse).reshape(-1)
        domain = tuple(frozenset(mx.modes[j] for j in np.nonzero(r)[0]) for r in rows)
    else:
        domain = ()
    return CodedRatings(codes.reshape(n_u, n_a), domain, True)


def compute_coded_many(coefficient_names, coded, **kw):
    """The loop of ``_row`` before: one independent ``compute_coded`` per coefficient."""
    return {c: coefficients.compute_coded(c, coded, **kw) for c in coefficient_names}


# --------------------------------------------------------------------------------------------
# app/agreement/coefficients.py before


def unique_rows(codes: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(codes, axis=0, return_inverse=True, return_counts=True)``, the same result
    (same row order) through a 1-D sort of packed row keys when the rows fit in an int64."""
    keys = _row_keys(codes, n_values)
    if keys is None:
        rows, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
        return rows, np.asarray(inverse).reshape(-1), counts
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    return codes[first], np.asarray(inverse).reshape(-1), counts


def set_distances(domain: tuple, distance: str) -> np.ndarray:
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
        table = (1.0 - sim).reshape(-1)
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


# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def old_implementation() -> Iterator[None]:
    """The app modules with the functions above in place of the new paths (the set-valued alpha
    through the k x k matrix again)."""
    patches = [
        (units, "_blame_and_evidence", blame_and_evidence),
        (units, "_submitted_labels", submitted_labels),
        (units, "mode_sets", mode_sets),
        (units, "compute_coded_many", compute_coded_many),
        (coefficients, "_unique_rows", unique_rows),
        (coefficients, "_set_distances", set_distances),
        (coefficients, "_set_alpha_point", lambda pat, domain, distance: None),
    ]
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in patches]
    try:
        for mod, name, fn in patches:
            setattr(mod, name, fn)
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
