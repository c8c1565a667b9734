"""Turn failure-mode labels into ratings matrices and build the agreement report.

Inputs (pandas DataFrames)
--------------------------
* ``labels``: one row per label, columns ``annotator, run_id, mode`` (required) and
  ``category, agent, evidence`` (optional; ``evidence`` is a list of event indices, ``agent``
  the responsible agent).  ``category`` is informational: categories come from ``mode_category``.
* ``submissions``: columns ``annotator, run_id``: the (annotator, run) pairs that were
  submitted.  Only submitted pairs count: labels of an unsubmitted pair are ignored (their number
  is reported), a submitted run with no labels means "no failure found" (every mode absent),
  and an annotator who did not submit a run is *missing* for that run.
* ``modes``: the taxonomy's mode codes; ``mode_category``: mode -> category code.
* ``agents``: columns ``run_id, agent_id`` (the agents of each run), for ``level="agent"``.

Units
-----
* run level: a unit is a submitted run; per mode the cell is 1 (annotator marked the mode),
  0 (submitted without it) or missing.
* agent level: a unit is a (run, agent) pair from ``agents``; the cell is 1 when the annotator
  marked the mode *and attributed it to that agent*.  Labels with no agent or an agent not
  listed for the run are counted in ``unattributed_labels`` and do not mark any unit.
* run x category (or run x agent x category): 1 when any mode of the category is marked.
* set-valued: the set of modes an annotator marked on the unit (the empty set is data).

Report definitions
------------------
* ``prevalence``: share of present (1) ratings among all non-missing ratings of the row.
* ``kappa_paradox``: prevalence < 0.1 or > 0.9 while percent agreement >= 0.8 and Fleiss'
  kappa < 0.4: kappa is depressed by the skewed marginals (Feinstein & Cicchetti 1990);
  ``advice`` then says to read Gwet's AC1 alongside.
* Intervals resample *runs* (clusters) with replacement, so the pooled run x mode rows and the
  agent level respect that the units of one run are not independent.
* blame agreement: over (run, mode) that two annotators both marked, a pair agrees when both
  name the same set of responsible agents; pairs where either named no agent are excluded
  (counted as ``n_pairs_unattributed``).
* evidence overlap: over the same pairs, the Jaccard similarity of the two annotators' evidence
  sets (union over their labels of that mode); pairs where neither cited evidence are excluded
  (counted as ``n_pairs_without_evidence``).

* attribution agreement (:func:`attribution_agreement`): over labels that name who and when
  without a mode (e.g. Who&When), whether two annotators name the same agent(s), the same step
  (earliest evidence seq), a step at most ``k`` apart.

All functions return plain dicts/lists of str/int/float/bool/None (JSON-ready, NaN -> None).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations, compress
from typing import Any

import numpy as np
import pandas as pd

from .coefficients import (
    COEFFICIENTS,
    AgreementResult,
    CodedRatings,
    compute_coded,
    compute_coded_many,
    pairwise_cohen_coded,
)

__all__ = [
    "PARADOX_HIGH",
    "PARADOX_LOW",
    "PARADOX_MAX_KAPPA",
    "PARADOX_MIN_PERCENT",
    "LabelMatrices",
    "agreement_report",
    "agreement_with_reference",
    "attribution_agreement",
    "build_matrices",
    "disagreement_ranking",
    "mode_sets",
]

PARADOX_LOW = 0.1
PARADOX_HIGH = 0.9
PARADOX_MIN_PERCENT = 0.8
PARADOX_MAX_KAPPA = 0.4
PARADOX_ADVICE = (
    "prevalence is extreme, so kappa is low although raw agreement is high (the kappa paradox): "
    "read Gwet's AC1, which is robust to prevalence, and report Krippendorff's alpha together "
    "with the prevalence"
)
LEVELS = ("run", "agent")
BINARY = (0, 1)


# --------------------------------------------------------------------------------------------
# helpers


def _f(x: Any) -> float | None:
    """Plain float, NaN/inf -> None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _key(x: Any) -> tuple:
    return (type(x).__name__, str(x))


def _sorted(values: Iterable) -> list:
    vals = list(values)
    try:
        return sorted(vals)
    except TypeError:
        return sorted(vals, key=_key)


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _require(df: Any, name: str, columns: Sequence[str]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame")  # noqa: TRY004
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {', '.join(missing)}")
    for c in columns:
        bad = df[c].isna().to_numpy()
        if bad.any():
            row = df.index[np.argmax(bad)]
            raise ValueError(f"{name} row {row!r}: column {c!r} is empty")
    return df


def _check_modes(modes: Sequence[str]) -> list:
    if isinstance(modes, (str, bytes)) or not isinstance(modes, Iterable):
        raise ValueError("modes must be a list of mode codes")  # noqa: TRY004
    out = list(modes)
    seen: set = set()
    for i, m in enumerate(out):
        if m in seen:
            raise ValueError(f"modes[{i}]: duplicate mode {m!r}")
        seen.add(m)
    return out


def _check_mode_labels(labels: pd.DataFrame, modes: list) -> None:
    known = pd.Index(modes)
    bad = known.get_indexer(labels["mode"]) < 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"labels row {labels.index[i]!r}: mode {labels['mode'].iloc[i]!r} is not in modes")


def _as_set(x: Any) -> frozenset:
    if type(x) is list and all(type(v) is int for v in x):  # the stored form: a list of seqs
        return frozenset(x)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return frozenset()
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        return frozenset([_plain(x)])
    return frozenset(_plain(v) for v in x)


def _submitted_labels(labels: pd.DataFrame, submissions: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """(the labels of submitted (annotator, run) pairs, how many others there were)."""
    cols = (labels["annotator"], labels["run_id"], submissions["annotator"], submissions["run_id"])
    if all(pd.api.types.infer_dtype(c, skipna=False) == "string" for c in cols):
        # strings only: the pairs as integer keys over the submitted values (what the
        # MultiIndex below does, without building one)
        ann_ix = pd.Index(pd.unique(submissions["annotator"]))
        run_ix = pd.Index(pd.unique(submissions["run_id"]))
        sub_key = ann_ix.get_indexer(submissions["annotator"]) * len(run_ix) + run_ix.get_indexer(
            submissions["run_id"])
        la, lr = ann_ix.get_indexer(labels["annotator"]), run_ix.get_indexer(labels["run_id"])
        keep = (la >= 0) & (lr >= 0) & np.isin(la * len(run_ix) + lr, sub_key)
        return labels.loc[keep], int((~keep).sum())
    subs = submissions[["annotator", "run_id"]].drop_duplicates()
    keys = pd.MultiIndex.from_frame(subs)
    lab_keys = pd.MultiIndex.from_frame(labels[["annotator", "run_id"]])
    keep = lab_keys.isin(keys)
    return labels.loc[keep], int((~keep).sum())


# --------------------------------------------------------------------------------------------
# matrices


@dataclass
class LabelMatrices:
    """Coded label matrices.

    ``presence[u, j, a]`` is 1 / 0 / -1 (present / absent / annotator did not submit the run)
    for unit ``units[u]``, mode ``modes[j]``, annotator ``annotators[a]``;
    ``category_presence[u, c, a]`` the same for ``categories[c]``.  ``unit_run[u]`` is the index
    in ``runs`` of the unit's run (the bootstrap cluster); ``submitted[u, a]`` whether annotator
    ``a`` submitted the unit's run.
    """

    level: str
    annotators: list
    runs: list
    units: list[tuple]
    unit_run: np.ndarray
    modes: list
    presence: np.ndarray
    categories: list
    category_modes: dict
    category_presence: np.ndarray
    ignored_labels: int
    unattributed_labels: int
    submitted: np.ndarray


def build_matrices(
    labels: pd.DataFrame,
    submissions: pd.DataFrame,
    modes: Sequence[str],
    mode_category: dict | None = None,
    agents: pd.DataFrame | None = None,
    *,
    level: str = "run",
) -> LabelMatrices:
    """Build the presence matrices (see :class:`LabelMatrices`) at ``level`` run or agent.

    ``mode_category`` may be None (every mode then forms its own category).
    Raises ``ValueError`` naming the frame, column or row on bad input.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    modes = _check_modes(modes)
    _require(labels, "labels", ("annotator", "run_id", "mode"))
    _require(submissions, "submissions", ("annotator", "run_id"))
    if mode_category is None:
        mode_category = {m: m for m in modes}
    if not isinstance(mode_category, dict):
        raise ValueError("mode_category must be a dict mode -> category")  # noqa: TRY004
    for m in modes:
        if m not in mode_category:
            raise ValueError(f"mode_category: no category for mode {m!r}")
    _check_mode_labels(labels, modes)

    annotators = _sorted(pd.unique(submissions["annotator"]))
    runs = _sorted(pd.unique(submissions["run_id"]))
    run_ix = pd.Index(runs)
    ann_ix = pd.Index(annotators)
    mode_ix = pd.Index(modes)
    sub = np.zeros((len(runs), len(annotators)), dtype=bool)
    sub[run_ix.get_indexer(submissions["run_id"]), ann_ix.get_indexer(submissions["annotator"])] = True
    kept, ignored = _submitted_labels(labels, submissions)
    unattributed = 0

    if level == "run":
        units = [(r,) for r in runs]
        unit_run = np.arange(len(runs))
        presence = np.where(sub[:, None, :], 0, -1).astype(np.int8)
        presence = np.broadcast_to(presence, (len(runs), len(modes), len(annotators))).copy()
        if len(kept):
            presence[
                run_ix.get_indexer(kept["run_id"]),
                mode_ix.get_indexer(kept["mode"]),
                ann_ix.get_indexer(kept["annotator"]),
            ] = 1
    else:
        if agents is None:
            raise ValueError("agents is required at level 'agent' (columns run_id, agent_id)")
        _require(agents, "agents", ("run_id", "agent_id"))
        ag = agents[["run_id", "agent_id"]].drop_duplicates()
        ag = ag[run_ix.get_indexer(ag["run_id"]) >= 0]
        pairs = _sorted(zip(ag["run_id"], ag["agent_id"]))
        units = [tuple(p) for p in pairs]
        unit_ix = pd.MultiIndex.from_tuples(units, names=["run_id", "agent_id"]) if units else None
        unit_run = run_ix.get_indexer([u[0] for u in units]).astype(np.int64)
        presence = np.where(sub[unit_run][:, None, :], 0, -1).astype(np.int8)
        presence = np.broadcast_to(presence, (len(units), len(modes), len(annotators))).copy()
        if len(kept):
            agent_col = kept["agent"] if "agent" in kept.columns else pd.Series([None] * len(kept))
            if unit_ix is not None:
                target = unit_ix.get_indexer(list(zip(kept["run_id"], agent_col)))
            else:
                target = np.full(len(kept), -1)
            ok = target >= 0
            unattributed = int((~ok).sum())
            presence[
                target[ok], mode_ix.get_indexer(kept["mode"])[ok], ann_ix.get_indexer(kept["annotator"])[ok]
            ] = 1

    categories: list = []
    for m in modes:
        if mode_category[m] not in categories:
            categories.append(mode_category[m])
    category_modes = {c: [m for m in modes if mode_category[m] == c] for c in categories}
    cat_presence = np.full((len(units), len(categories), len(annotators)), -1, dtype=np.int8)
    for ci, c in enumerate(categories):
        idx = mode_ix.get_indexer(category_modes[c])
        cat_presence[:, ci, :] = presence[:, idx, :].max(axis=1)
    return LabelMatrices(
        level,
        annotators,
        runs,
        units,
        unit_run,
        modes,
        presence,
        categories,
        category_modes,
        cat_presence,
        ignored,
        unattributed,
        sub[unit_run],
    )


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
        domain = tuple(frozenset(compress(mx.modes, r)) for r in rows.tolist())
    else:
        domain = ()
    return CodedRatings(codes.reshape(n_u, n_a), domain, True)


# --------------------------------------------------------------------------------------------
# report


def _prevalence(codes: np.ndarray) -> float | None:
    rated = codes >= 0
    return _f(codes[rated].mean()) if rated.any() else None


def _row(
    codes: np.ndarray,
    clusters: np.ndarray,
    coefficients: Sequence[str],
    n_boot: int,
    seed: int,
    confidence: float,
) -> dict[str, Any]:
    coded = CodedRatings(np.asarray(codes, dtype=np.int64), BINARY)
    prevalence = _prevalence(coded.codes)
    out: dict[str, Any] = {
        "n_units": int(((coded.codes >= 0).sum(axis=1) >= 2).sum()),
        "prevalence": prevalence,
    }
    results: dict[str, AgreementResult] = compute_coded_many(
        coefficients, coded, n_boot=n_boot, seed=seed, confidence=confidence, clusters=clusters
    )
    for c in coefficients:
        out[c] = results[c].to_dict()
    pct = results.get("percent") or compute_coded("percent", coded, n_boot=0)
    kap = results.get("fleiss_kappa") or compute_coded("fleiss_kappa", coded, n_boot=0)
    flag = bool(
        prevalence is not None
        and (prevalence < PARADOX_LOW or prevalence > PARADOX_HIGH)
        and pct.value is not None
        and pct.value >= PARADOX_MIN_PERCENT
        and kap.value is not None
        and kap.value < PARADOX_MAX_KAPPA
    )
    out["kappa_paradox"] = flag
    out["advice"] = PARADOX_ADVICE if flag else None
    return out


def _check_coefficients(coefficients: Sequence[str]) -> list[str]:
    if isinstance(coefficients, str):
        coefficients = (coefficients,)
    out = list(coefficients)
    for c in out:
        if c not in COEFFICIENTS:
            raise ValueError(f"coefficients: unknown coefficient {c!r} (known: {', '.join(COEFFICIENTS)})")
    return out


def _factorize(values: Any, plain: bool = False) -> tuple[np.ndarray, list]:
    """Codes (in first-appearance order) and distinct values of ``values``, told apart as ``dict``
    keys are (``plain``: numpy scalars made Python ones first)."""
    values = np.asarray(values, dtype=object) if not isinstance(values, (pd.Series, np.ndarray)) else values
    if len(values) and pd.api.types.infer_dtype(values, skipna=False) in ("string", "integer"):
        codes, uniques = pd.factorize(values)  # plain ==, as a dict key, without the loop
        return np.asarray(codes, dtype=np.int64), list(uniques)
    index: dict[Any, int] = {}
    keys = map(_plain, values) if plain else iter(values)
    codes = np.fromiter((index.setdefault(v, len(index)) for v in keys), dtype=np.int64, count=len(values))
    return codes, list(index)


def _within_group_pairs(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j), i < j, of positions with the same value of the sorted array ``group``,
    ordered by i then j."""
    left, right = [], []
    d = 1
    while d < len(group):
        same = np.flatnonzero(group[d:] == group[:-d])
        if not len(same):
            break  # groups are runs of equal values: no pair at offset d, none further
        left.append(same)
        right.append(same + d)
        d += 1
    if not left:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    i, j = np.concatenate(left), np.concatenate(right)
    order = np.lexsort((j, i))
    return i[order], j[order]


def _common_counts(pos: np.ndarray, item: np.ndarray, pa: np.ndarray, pb: np.ndarray, n_pos: int) -> np.ndarray:
    """For the (group, annotator) positions ``pos`` holding ``item`` (deduplicated; the items are
    unique to a group), the number of items positions ``pa[q]`` and ``pb[q]`` have in common."""
    order = np.lexsort((pos, item))
    i, j = _within_group_pairs(item[order])
    a, b = pos[order][i], pos[order][j]
    common = np.unique(np.minimum(a, b) * n_pos + np.maximum(a, b), return_counts=True)
    key = pa * n_pos + pb
    at = np.searchsorted(common[0], key)
    at_ok = np.minimum(at, max(len(common[0]) - 1, 0))
    hit = (at < len(common[0])) & (common[0][at_ok] == key) if len(common[0]) else np.zeros(len(key), dtype=bool)
    return np.where(hit, common[1][at_ok] if len(common[0]) else 0, 0)


def _blame_and_evidence_counts(labels: pd.DataFrame) -> tuple[list, int, int, int, int]:
    """The counts of :func:`_blame_and_evidence`: for every pair of annotators who labelled the
    same (run, mode) (pairs within a (run, mode) in sorted annotator order, the (run, mode) in
    first-appearance order), whether both named agents and then the same set of them, and the
    Jaccard index of their evidence sets.  Returns ``(jaccards, same, attributed, unattributed,
    no_evidence)``.  A missing agent (None or NaN) names none; evidence is a list of steps, a
    single step, or missing."""
    n = len(labels)
    if n == 0:
        return [], 0, 0, 0, 0
    run, _ = _factorize(labels["run_id"])
    mode, mode_values = _factorize(labels["mode"])
    ann, ann_values = _factorize(labels["annotator"])
    if "agent" in labels.columns:
        col = labels["agent"].to_numpy(dtype=object)
        present = ~np.asarray(pd.isna(col), dtype=bool)
        for i in np.flatnonzero(~present).tolist():  # pd.NA and the like name an agent (of that name)
            present[i] = not (col[i] is None or (isinstance(col[i], float) and math.isnan(col[i])))
        agent_codes = np.full(n, -1, dtype=np.int64)
        if present.any():
            agent_codes[present] = _factorize(col[present], plain=True)[0]
    else:
        agent_codes = np.full(n, -1, dtype=np.int64)
    lengths = np.zeros(n, dtype=np.int64)
    flat: list = []
    if "evidence" in labels.columns:
        for i, ev in enumerate(labels["evidence"].tolist()):
            if type(ev) is list:  # the stored form: a list of steps
                lengths[i] = len(ev)
                flat.extend(ev)
            elif not (ev is None or (type(ev) is float and math.isnan(ev))):
                items = _as_set(ev)
                lengths[i] = len(items)
                flat.extend(items)
    try:
        seqs = np.array(flat) if flat else np.empty(0, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):
        seqs = np.empty(0, dtype=object)
    if seqs.dtype.kind == "i" and seqs.ndim == 1 and len(seqs) == len(flat):
        seq_codes = np.asarray(pd.factorize(seqs)[0], dtype=np.int64)
    else:
        seq_codes = _factorize(flat, plain=True)[0]
    rank_of = {v: i for i, v in enumerate(_sorted(ann_values))}
    rank = np.array([rank_of[v] for v in ann_values], dtype=np.int64)
    n_ann = len(ann_values)
    group, _ = pd.factorize(run * max(len(mode_values), 1) + mode)  # (run, mode) by first appearance
    cell = np.asarray(group, dtype=np.int64) * n_ann + rank[ann]
    cells, cell_of_label = np.unique(cell, return_inverse=True)  # sorted by (group, annotator rank)
    cell_of_label = np.asarray(cell_of_label).reshape(-1)
    n_pos = len(cells)
    pa, pb = _within_group_pairs(cells // n_ann)
    if not len(pa):
        return [], 0, 0, 0, 0

    grp = cells // n_ann

    def sets(owner: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(size of each cell's set, common items of each pair) for the items ``local`` (codes,
        -1 for none) of the cells ``owner``."""
        keep = local >= 0
        if not keep.any():
            return np.zeros(n_pos, dtype=np.int64), np.zeros(len(pa), dtype=np.int64)
        width = int(local.max()) + 1
        u = np.unique(owner[keep] * width + local[keep])  # a set per cell: no duplicates
        own = u // width
        item = grp[own] * width + u % width  # items of different groups never meet
        return np.bincount(own, minlength=n_pos), _common_counts(own, item, pa, pb, n_pos)

    ag_size, ag_common = sets(cell_of_label, agent_codes)
    ev_size, ev_common = sets(np.repeat(cell_of_label, lengths), seq_codes)

    attributed_mask = (ag_size[pa] > 0) & (ag_size[pb] > 0)
    same = int((attributed_mask & (ag_common == ag_size[pa]) & (ag_common == ag_size[pb])).sum())
    attributed = int(attributed_mask.sum())
    union = ev_size[pa] + ev_size[pb] - ev_common
    has = union > 0
    jac = (ev_common[has] / union[has]).tolist()
    return jac, same, attributed, len(pa) - attributed, int((~has).sum())


def _blame_and_evidence(labels: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    jac, same, attributed, unattributed, no_ev = _blame_and_evidence_counts(labels)
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


def agreement_report(
    labels: pd.DataFrame,
    submissions: pd.DataFrame,
    modes: Sequence[str],
    mode_category: dict,
    agents: pd.DataFrame | None = None,
    *,
    level: str = "run",
    n_boot: int = 1000,
    seed: int = 0,
    coefficients: Sequence[str] = COEFFICIENTS,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Agreement report over the submitted labels.

    Returns a dict with keys ``level``, ``annotators``, ``n_runs``, ``n_units``,
    ``ignored_labels``, ``unattributed_labels``, ``settings``, ``modes`` (one row per mode:
    ``mode, category, n_units, prevalence``, one ``{"value", "n_units", "ci", "reason"?}`` per
    coefficient, ``kappa_paradox``, ``advice``), ``categories`` (the same per category, with its
    ``modes``), ``overall`` (all unit x mode cells pooled, plus ``set_alpha`` with MASI and
    Jaccard alpha on each unit's set of modes), ``pairwise_cohen`` (``annotators``, ``matrix``
    of pooled unit x mode kappas with None on the diagonal and where undefined, ``n_units``),
    ``blame_agreement`` and ``evidence_overlap`` (see the module docstring).
    """
    coefficients = _check_coefficients(coefficients)
    mx = build_matrices(labels, submissions, modes, mode_category, agents, level=level)
    n_u, n_m, n_a = mx.presence.shape
    clusters = mx.unit_run
    kw = {"n_boot": n_boot, "seed": seed, "confidence": confidence}

    mode_rows = []
    for j, m in enumerate(mx.modes):
        row = {"mode": m, "category": mode_category[m]}
        row.update(_row(mx.presence[:, j, :], clusters, coefficients, **kw))
        mode_rows.append(row)
    cat_rows = []
    for ci, c in enumerate(mx.categories):
        row = {"category": c, "modes": list(mx.category_modes[c])}
        row.update(_row(mx.category_presence[:, ci, :], clusters, coefficients, **kw))
        cat_rows.append(row)

    pooled = mx.presence.reshape(n_u * n_m, n_a)
    pooled_clusters = np.repeat(clusters, n_m)
    overall: dict[str, Any] = {"n_unit_modes": n_u * n_m}
    overall.update(_row(pooled, pooled_clusters, coefficients, **kw))
    sets = mode_sets(mx)
    overall["set_alpha"] = {
        d: compute_coded("krippendorff_alpha", sets, distance=d, clusters=clusters, **kw).to_dict()
        for d in ("masi", "jaccard")
    }
    overall["set_alpha"]["n_units"] = int(((sets.codes >= 0).sum(axis=1) >= 2).sum())

    pw = pairwise_cohen_coded(CodedRatings(pooled.astype(np.int64), BINARY), n_boot=0)
    pairwise = {
        "annotators": [_plain(a) for a in mx.annotators],
        "matrix": pw["matrix"],
        "n_units": pw["n_units"],
        "mean": pw["mean"],
    }
    kept, _ = _submitted_labels(labels, submissions)
    blame, evidence = _blame_and_evidence(kept)
    return {
        "level": level,
        "annotators": [_plain(a) for a in mx.annotators],
        "n_runs": len(mx.runs),
        "n_units": n_u,
        "ignored_labels": mx.ignored_labels,
        "unattributed_labels": mx.unattributed_labels,
        "settings": {
            "n_boot": int(n_boot),
            "seed": int(seed),
            "confidence": float(confidence),
            "coefficients": list(coefficients),
            "kappa_paradox": {
                "prevalence_below": PARADOX_LOW,
                "prevalence_above": PARADOX_HIGH,
                "percent_at_least": PARADOX_MIN_PERCENT,
                "fleiss_kappa_below": PARADOX_MAX_KAPPA,
            },
        },
        "modes": mode_rows,
        "categories": cat_rows,
        "overall": overall,
        "pairwise_cohen": pairwise,
        "blame_agreement": blame,
        "evidence_overlap": evidence,
    }


# --------------------------------------------------------------------------------------------
# disagreement ranking


def disagreement_ranking(labels: pd.DataFrame, submissions: pd.DataFrame, modes: Sequence[str]) -> list[dict]:
    """Runs with at least two submitted annotators, most disputed first.

    A run's ``n_disagreements`` is the number of its modes on which the submitted annotators are
    not unanimous; ties are broken by ``mean_set_distance``, the mean over annotator pairs of the
    Jaccard distance between their sets of marked modes (two empty sets: 0), then by run_id.
    Each row: ``run_id, n_annotators, n_disagreements, disputed_modes, mean_set_distance,
    annotator_modes`` (annotator -> sorted marked modes).
    """
    mx = build_matrices(labels, submissions, modes, None, level="run")
    pres = mx.presence  # (R, M, A)
    rated = mx.submitted
    n_ann = rated.sum(axis=1)
    ones = (pres == 1).sum(axis=2)
    disputed = (ones > 0) & (ones < n_ann[:, None])
    n_a = pres.shape[2]
    dist_sum = np.zeros(pres.shape[0])
    n_pairs = np.zeros(pres.shape[0])
    for a, b in combinations(range(n_a), 2):
        both = rated[:, a] & rated[:, b]
        pa, pb = pres[:, :, a] == 1, pres[:, :, b] == 1
        inter = (pa & pb).sum(axis=1)
        union = (pa | pb).sum(axis=1)
        d = np.where(union > 0, 1.0 - inter / np.maximum(union, 1), 0.0)
        dist_sum += np.where(both, d, 0.0)
        n_pairs += both
    rows = []
    for r in np.nonzero(n_ann >= 2)[0]:
        rows.append(
            {
                "run_id": _plain(mx.runs[r]),
                "n_annotators": int(n_ann[r]),
                "n_disagreements": int(disputed[r].sum()),
                "disputed_modes": [mx.modes[j] for j in np.nonzero(disputed[r])[0]],
                "mean_set_distance": float(dist_sum[r] / n_pairs[r]),
                "annotator_modes": {
                    _plain(mx.annotators[a]): [mx.modes[j] for j in np.nonzero(pres[r, :, a] == 1)[0]]
                    for a in range(n_a)
                    if rated[r, a]
                },
            }
        )
    rows.sort(key=lambda x: (-x["n_disagreements"], -x["mean_set_distance"], _key(x["run_id"])))
    return rows


# --------------------------------------------------------------------------------------------
# agreement with a reference (gold) standard


def _prf(tp: int, fp: int, fn: int) -> dict[str, float | None]:
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None
    return {"precision": _f(precision), "recall": _f(recall), "f1": _f(f1)}


def agreement_with_reference(
    labels: pd.DataFrame,
    submissions: pd.DataFrame,
    reference_labels: pd.DataFrame,
    reference_runs: Iterable,
    modes: Sequence[str],
    *,
    n_boot: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Each annotator's (human or ``judge:<source>``) agreement with a reference labelling.

    ``reference_labels`` has columns ``run_id, mode``; ``reference_runs`` lists the runs that
    have a reference (a listed run without reference labels has no failure; runs named in
    ``reference_labels`` count as having a reference too).  For each annotator, over the runs it
    submitted that have a reference, the run x mode cells (1/0) are compared with the reference:
    Cohen's kappa and percent agreement (``{"value", "n_units", "ci", "reason"?}``; intervals
    resample runs), micro-averaged and per-mode ``tp, fp, fn, tn, precision, recall, f1``
    (None when a denominator is 0).  Returns ``{"n_reference_runs", "annotators": [...]}``
    with rows ``annotator, kind ("judge"|"human"), n_runs, percent, cohen_kappa, micro, per_mode``.
    """
    modes = _check_modes(modes)
    _require(reference_labels, "reference_labels", ("run_id", "mode"))
    _check_mode_labels(reference_labels, modes)
    if isinstance(reference_runs, (str, bytes)) or not isinstance(reference_runs, Iterable):
        raise ValueError("reference_runs must be a list of run ids")  # noqa: TRY004
    gold_runs = _sorted(set(reference_runs) | set(reference_labels["run_id"]))
    mx = build_matrices(labels, submissions, modes, None, level="run")
    gold_ix = pd.Index(gold_runs)
    mode_ix = pd.Index(modes)
    gold = np.zeros((len(gold_runs), len(modes)), dtype=np.int8)
    gold[gold_ix.get_indexer(reference_labels["run_id"]), mode_ix.get_indexer(reference_labels["mode"])] = 1
    run_in_gold = gold_ix.get_indexer(mx.runs)
    rows = []
    for a, ann in enumerate(mx.annotators):
        sel = np.nonzero((run_in_gold >= 0) & mx.submitted[:, a])[0]
        mine = mx.presence[sel, :, a].astype(np.int64)
        ref = gold[run_in_gold[sel]].astype(np.int64)
        cells = np.stack([mine.reshape(-1), ref.reshape(-1)], axis=1)
        coded = CodedRatings(cells, BINARY)
        clusters = np.repeat(sel, len(modes))
        kw = {"n_boot": n_boot, "seed": seed, "confidence": confidence, "clusters": clusters}
        tp = ((mine == 1) & (ref == 1)).sum(axis=0)
        fp = ((mine == 1) & (ref == 0)).sum(axis=0)
        fn = ((mine == 0) & (ref == 1)).sum(axis=0)
        tn = ((mine == 0) & (ref == 0)).sum(axis=0)
        per_mode = []
        for j, m in enumerate(modes):
            entry = {
                "mode": m,
                "tp": int(tp[j]),
                "fp": int(fp[j]),
                "fn": int(fn[j]),
                "tn": int(tn[j]),
                "reference_positives": int(tp[j] + fn[j]),
            }
            entry.update(_prf(int(tp[j]), int(fp[j]), int(fn[j])))
            per_mode.append(entry)
        micro = {"tp": int(tp.sum()), "fp": int(fp.sum()), "fn": int(fn.sum()), "tn": int(tn.sum())}
        micro.update(_prf(micro["tp"], micro["fp"], micro["fn"]))
        rows.append(
            {
                "annotator": _plain(ann),
                "kind": "judge" if str(ann).startswith("judge:") else "human",
                "n_runs": len(sel),
                "percent": compute_coded("percent", coded, **kw).to_dict(),
                "cohen_kappa": compute_coded("cohen_kappa", coded, **kw).to_dict(),
                "micro": micro,
                "per_mode": per_mode,
            }
        )
    return {"n_reference_runs": len(gold_runs), "annotators": rows}


# --------------------------------------------------------------------------------------------
# attribution agreement (who and when, no mode)


def _first_step(evidence: Any) -> int | None:
    steps = [int(s) for s in _as_set(evidence) if isinstance(s, (int, np.integer))]
    return min(steps) if steps else None


def attribution_agreement(attributions: pd.DataFrame, submissions: pd.DataFrame, *, k: int = 1) -> dict[str, Any]:
    """Agreement on attribution labels (who failed and when, e.g. Who&When's mistake agent and step).

    ``attributions`` has columns ``annotator, run_id, agent, evidence`` (one row per label;
    ``evidence`` a list of event seqs). An annotator's attribution of a run is the set of agents
    it named and its *step*, the earliest evidence seq over its labels (the decisive mistake).
    Only submitted (annotator, run) pairs count. Over every two annotators who both attributed a
    run: ``agent`` (same set of agents), ``step_exact`` (same step), ``step_within_k`` (steps at
    most ``k`` apart) and ``agent_and_step`` (same agents and same step), each ``{"n_pairs",
    "n_agree", "proportion"}`` (proportion None without pairs); pairs where either side has no
    agent (no step) are left out of the agent (step) rows and counted in
    ``n_pairs_without_agent`` (``n_pairs_without_step``). Also ``k``, ``n_runs`` (runs with at
    least two attributing annotators), ``n_attributions`` and ``per_run`` rows ``run_id,
    annotators, agents, steps``.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"k must be a whole number >= 0, got {k!r}")
    _require(attributions, "attributions", ("annotator", "run_id"))
    _require(submissions, "submissions", ("annotator", "run_id"))
    kept, _ = _submitted_labels(attributions, submissions)
    has_agent = "agent" in kept.columns
    has_ev = "evidence" in kept.columns
    by_run: dict[Any, dict[Any, list]] = {}
    for ann, run, agent, ev in zip(kept["annotator"], kept["run_id"],
                                   kept["agent"] if has_agent else [None] * len(kept),
                                   kept["evidence"] if has_ev else [None] * len(kept)):
        agents, steps = by_run.setdefault(run, {}).setdefault(ann, [set(), []])
        if agent is not None and not (isinstance(agent, float) and math.isnan(agent)) and agent != "":
            agents.add(_plain(agent))
        step = _first_step(ev)
        if step is not None:
            steps.append(step)
    counts = {name: [0, 0] for name in ("agent", "step_exact", "step_within_k", "agent_and_step")}
    no_agent = no_step = 0
    per_run = []
    for run in _sorted(by_run):
        anns = by_run[run]
        if len(anns) < 2:
            continue
        view = {a: (frozenset(ag), min(st) if st else None) for a, (ag, st) in anns.items()}
        per_run.append({"run_id": _plain(run), "annotators": [_plain(a) for a in _sorted(view)],
                        "agents": {_plain(a): _sorted(view[a][0]) for a in _sorted(view)},
                        "steps": {_plain(a): view[a][1] for a in _sorted(view)}})
        for a, b in combinations(_sorted(view), 2):
            (ag_a, st_a), (ag_b, st_b) = view[a], view[b]
            if ag_a and ag_b:
                counts["agent"][0] += 1
                counts["agent"][1] += ag_a == ag_b
            else:
                no_agent += 1
            if st_a is not None and st_b is not None:
                counts["step_exact"][0] += 1
                counts["step_exact"][1] += st_a == st_b
                counts["step_within_k"][0] += 1
                counts["step_within_k"][1] += abs(st_a - st_b) <= k
            else:
                no_step += 1
            if ag_a and ag_b and st_a is not None and st_b is not None:
                counts["agent_and_step"][0] += 1
                counts["agent_and_step"][1] += ag_a == ag_b and st_a == st_b
    out: dict[str, Any] = {"k": int(k), "n_runs": len(per_run), "n_attributions": int(len(kept))}
    for name, (n, agree) in counts.items():
        out[name] = {"n_pairs": n, "n_agree": int(agree), "proportion": _f(agree / n) if n else None}
    out["n_pairs_without_agent"] = no_agent
    out["n_pairs_without_step"] = no_step
    out["per_run"] = per_run
    return out
