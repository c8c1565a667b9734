"""Precision, recall and F1 per mode, with intervals, of label sources against a reference (pure).

A *source* is a detector (``detector:<name>``) or any group of annotations (e.g. the human
labels made with hints on). Its *units* are the (annotator, run) submissions it made on runs
that have a reference (gold labels of adjudicated runs, or the demo's seeded truth). Per mode:

* ``level="run"``: a unit is positive for a mode when it carries a label of that mode;
* ``level="agent"``: the (mode, responsible agent) pairs are counted, so a label blaming the
  wrong agent is one false positive and one false negative.

Precision and recall get Wilson score intervals (binomial proportions over the counted
decisions); F1 gets a percentile bootstrap interval resampling units (runs) with the
:mod:`app.agreement.bootstrap` machinery. A value is None when its denominator is 0.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from app.agreement.bootstrap import percentile_ci, replicate_weights

Key = tuple[str, str]  # (mode, agent)


def wilson(successes: int, n: int, confidence: float = 0.95) -> list[float] | None:
    """The Wilson score interval of a proportion, or None when n == 0."""
    if n <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _ratio(a: float, b: float) -> float | None:
    return float(a / b) if b else None


def _f1_ci(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, n_boot: int, seed: int, confidence: float
           ) -> list[float] | None:
    n = tp.shape[0]
    if n_boot <= 0 or n == 0:
        return None
    rng = np.random.default_rng(seed)
    vals = []
    for w in replicate_weights(np.ones(n, dtype=np.int64), n_boot, rng, unit_pattern=np.arange(n)):
        t, f, m = w @ tp, w @ fp, w @ fn
        den = 2 * t + f + m
        with np.errstate(invalid="ignore", divide="ignore"):
            vals.append(np.where(den > 0, 2 * t / np.where(den > 0, den, 1), np.nan))
    ci = percentile_ci(np.concatenate(vals), confidence)
    return [ci[0], ci[1]] if ci else None


def _row(mode: str, tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, n_boot: int, seed: int,
         confidence: float) -> dict[str, Any]:
    TP, FP, FN = int(tp.sum()), int(fp.sum()), int(fn.sum())
    return {
        "mode": mode, "tp": TP, "fp": FP, "fn": FN, "n_units": int(tp.shape[0]),
        "precision": _ratio(TP, TP + FP), "precision_ci": wilson(TP, TP + FP, confidence),
        "recall": _ratio(TP, TP + FN), "recall_ci": wilson(TP, TP + FN, confidence),
        "f1": _ratio(2 * TP, 2 * TP + FP + FN),
        "f1_ci": _f1_ci(tp, fp, fn, n_boot, seed, confidence) if 2 * TP + FP + FN else None,
    }


def score_source(units: Mapping[Hashable, tuple[str, Iterable[Key]]], reference: Mapping[str, Iterable[Key]],
                 modes: Sequence[str], *, level: str = "run", n_boot: int = 1000, seed: int = 0,
                 confidence: float = 0.95) -> dict[str, Any]:
    """One source against the reference: ``{"n_units", "modes": [row per mode], "overall": row}``
    where a row is ``mode, tp, fp, fn, n_units, precision, precision_ci, recall, recall_ci, f1,
    f1_ci``. ``units``: unit id -> (run_id, the unit's (mode, agent) labels); units whose run has
    no reference are left out."""
    if level not in ("run", "agent"):
        raise ValueError(f"level must be 'run' or 'agent', got {level!r}")
    ref = {r: set(map(tuple, keys)) for r, keys in reference.items()}
    kept = [(run_id, set(map(tuple, labels))) for _, (run_id, labels) in sorted(units.items(), key=lambda x: str(x[0]))
            if run_id in ref]
    n, m = len(kept), len(modes)
    tp = np.zeros((n, m))
    fp = np.zeros((n, m))
    fn = np.zeros((n, m))
    for i, (run_id, labels) in enumerate(kept):
        truth = ref[run_id]
        for j, mode in enumerate(modes):
            if level == "run":
                p = any(k[0] == mode for k in labels)
                t = any(k[0] == mode for k in truth)
                tp[i, j], fp[i, j], fn[i, j] = p and t, p and not t, t and not p
            else:
                p = {k for k in labels if k[0] == mode}
                t = {k for k in truth if k[0] == mode}
                tp[i, j], fp[i, j], fn[i, j] = len(p & t), len(p - t), len(t - p)
    rows = [_row(mode, tp[:, j], fp[:, j], fn[:, j], n_boot, seed + j, confidence) for j, mode in enumerate(modes)]
    overall = _row("ALL", tp.sum(axis=1), fp.sum(axis=1), fn.sum(axis=1), n_boot, seed, confidence)
    return {"n_units": n, "modes": rows, "overall": overall}
