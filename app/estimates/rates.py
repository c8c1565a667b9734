"""Failure rates with intervals, on plain arrays (no web, no database).

Three estimators of the rate of one failure mode (or category) among a set of units (runs, or
(run, agent) pairs):

* `human_rate`: from human labels on a sample. A simple random sample gets the Wilson score
  interval; a weighted sample (weights 1 / inclusion probability) gets the Hajek estimate with a
  Wilson interval on Kish's effective sample size.
* `judge_rate`: the share of units a judge flags: exact for the judge, biased by the judge's
  errors as an estimate of the truth (Wilson interval on the judge's own labels, shown as such).
* `ppi_rate`: prediction-powered inference with power tuning (PPI++, Angelopoulos, Duchi and
  Zrnic 2023) over the judge's labels on every unit and human labels on a random sample. The
  arithmetic is that of `ppi_py.ppi_mean_ci` / `ppi_mean_pointestimate` (the tests compare the
  two to 1e-9), written here so the app does not depend on numba.

`plan_more_labels` predicts the interval half-width after `m` more randomly sampled human labels
from the current variances, and the `m` that reaches a target half-width.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import norm


@dataclass
class Estimate:
    """One rate: ``method`` is ``human``, ``judge`` or ``ppi``."""

    method: str
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    n_human: int
    n_judge: int
    #: PPI: the power-tuning weight lambda in [0, 1] (0: humans only, 1: plain PPI)
    lam: float | None = None
    #: how many simple-random human labels an interval this wide would take (PPI, weighted samples)
    n_effective: float | None = None
    #: why the rate is missing, or what to read into it (e.g. "biased by the judge's errors")
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def z_value(confidence: float) -> float:
    """Returns the two-sided normal quantile for ``confidence`` (0.95 -> 1.95996...)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    return float(norm.ppf(1 - (1 - confidence) / 2))


def wilson(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Returns the Wilson score interval for ``successes`` of ``n`` (n may be an effective,
    non-integer sample size). Equal to statsmodels' ``proportion_confint(method="wilson")``."""
    if n <= 0:
        raise ValueError("n must be positive")
    z = z_value(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _as_binary(y: Any, name: str) -> np.ndarray:
    arr = np.asarray(y, dtype=float).reshape(-1)
    if arr.size and (np.isnan(arr).any() or ((arr < 0) | (arr > 1)).any()):
        raise ValueError(f"{name}: values must be in [0, 1] with no missing value")
    return arr


def _weights(w: Any, n: int) -> np.ndarray | None:
    if w is None:
        return None
    arr = np.asarray(w, dtype=float).reshape(-1)
    if arr.size != n:
        raise ValueError("weights: one weight per human label")
    if (arr <= 0).any() or not np.isfinite(arr).all():
        raise ValueError("weights: every weight must be positive (1 / inclusion probability)")
    if np.allclose(arr, arr[0]):
        return None  # equal weights are a simple random sample
    return arr


def human_rate(y: Any, weights: Any = None, confidence: float = 0.95) -> Estimate:
    """The rate among humanly labelled units ``y`` (0/1), weighted by ``weights`` (1 / inclusion
    probability) when the sample was not simple random."""
    y = _as_binary(y, "human labels")
    n = int(y.size)
    if n == 0:
        return Estimate("human", None, None, None, 0, 0, note="no human label in this group")
    w = _weights(weights, n)
    if w is None:
        lo, hi = wilson(float(y.sum()), n, confidence)
        return Estimate("human", float(y.mean()), lo, hi, n, 0)
    p = float((w * y).sum() / w.sum())
    n_eff = float(w.sum() ** 2 / (w * w).sum())
    lo, hi = wilson(p * n_eff, n_eff, confidence)
    return Estimate("human", p, lo, hi, n, 0, n_effective=n_eff,
                    note="weighted by 1 / inclusion probability (Hajek); Wilson on Kish's effective n")


def judge_rate(yhat_all: Any, confidence: float = 0.95) -> Estimate:
    """The share of units the judge flags, with the Wilson interval of that share: the judge's
    own rate, which is the true rate only if the judge makes no errors."""
    yhat = _as_binary(yhat_all, "judge labels")
    big_n = int(yhat.size)
    if big_n == 0:
        return Estimate("judge", None, None, None, 0, 0, note="the judge labelled no unit in this group")
    lo, hi = wilson(float(yhat.sum()), big_n, confidence)
    return Estimate("judge", float(yhat.mean()), lo, hi, 0, big_n,
                    note="biased by the judge's errors: the interval covers the judge's rate, not the true one")


def _normalised(w: np.ndarray | None, n: int) -> np.ndarray:
    return np.ones(n) if w is None else w / w.sum() * n


#: the fewest judged units with a human label PPI is computed from (its interval is a normal
#: approximation: with fewer, or with human labels that do not vary, it is not defensible)
MIN_PPI_LABELS = 10


def ppi_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unl: np.ndarray,
               w: np.ndarray | None = None) -> float:
    """The power-tuning weight of PPI++ for a mean (clipped to [0, 1]), as ppi_py computes it."""
    n, big_n = y.size, yhat_unl.size
    wl = _normalised(w, n)
    theta = yhat_unl.mean() + (wl * (y - yhat)).mean()  # the lam = 1 estimate
    g = wl * (y - theta)
    gh = wl * (yhat - theta)
    gu = yhat_unl - theta
    cov = 2 * ((g - g.mean()) * (gh - gh.mean())).sum() / n
    var_hat = np.var(np.concatenate([gh, gu]), ddof=1)
    if var_hat == 0:
        return 0.0
    lam = cov / (2 * (1 + n / big_n) * var_hat)
    return float(np.clip(lam, 0, 1))


def _ppi_parts(y: np.ndarray, yhat: np.ndarray, yhat_unl: np.ndarray, lam: float,
               w: np.ndarray | None) -> tuple[float, float, float]:
    """Returns (point estimate, variance of the imputed term per unit, variance of the rectifier
    per label), population variances as ppi_py uses them."""
    wl = _normalised(w, y.size)
    est = float((lam * yhat_unl).mean() + (wl * (y - lam * yhat)).mean())
    return est, float((lam * yhat_unl).var()), float((wl * (y - lam * yhat)).var())


def ppi_rate(y: Any, yhat: Any, yhat_unlabeled: Any, *, weights: Any = None, confidence: float = 0.95,
             lam: float | None = None) -> Estimate:
    """The PPI++ rate: ``y`` the human labels of the sampled units, ``yhat`` the judge's labels
    of the same units, ``yhat_unlabeled`` the judge's labels of every other unit; ``weights``
    (1 / inclusion probability) for a sample that was not simple random; ``lam`` None tunes it.

    ``n_effective`` is the number of simple-random human labels whose classical interval would
    be as narrow (the human labels' variance over PPI's variance)."""
    y = _as_binary(y, "human labels")
    yhat = _as_binary(yhat, "judge labels of the labelled units")
    yu = _as_binary(yhat_unlabeled, "judge labels of the other units")
    n, big_n = int(y.size), int(yu.size)
    if y.size != yhat.size:
        raise ValueError("human labels and judge labels of the labelled units differ in length")
    if n < MIN_PPI_LABELS or big_n < 2:
        return Estimate("ppi", None, None, None, n, n + big_n,
                        note=f"PPI needs at least {MIN_PPI_LABELS} judged units with a human label and two without")
    if y.min() == y.max():
        return Estimate("ppi", None, None, None, n, n + big_n,
                        note="the human labels do not vary here, so PPI's normal interval is undefined: read the "
                             "human row (Wilson)")
    w = _weights(weights, n)
    if lam is None:
        lam = ppi_lambda(y, yhat, yu, w)
    est, var_imp, var_rect = _ppi_parts(y, yhat, yu, lam, w)
    se = math.sqrt(var_imp / big_n + var_rect / n)
    z = z_value(confidence)
    var_y = float(y.var())
    n_eff = None if se == 0 else var_y / (se * se)
    # clipped to [0, 1], where every rate lies (the unclipped bounds are ppi_py's)
    return Estimate("ppi", est, max(0.0, est - z * se), min(1.0, est + z * se), n, n + big_n, lam=lam,
                    n_effective=n_eff)


@dataclass
class Plan:
    """A planner's answer: the half-width expected after ``more`` labels, and the labels needed
    for the target (None when unreachable with the units there are)."""

    method: str
    n_human: int
    half_width_now: float | None
    more: int
    half_width_after: float | None
    target_half_width: float | None
    more_needed: int | None
    policy: str
    note: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _wilson_half_widths(p: float, n: np.ndarray, z: float) -> np.ndarray:
    """Half-widths of Wilson intervals at rate ``p`` for the sample sizes ``n`` (clipped to [0, 1]
    as `wilson` clips them)."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (np.minimum(1.0, centre + half) - np.maximum(0.0, centre - half)) / 2


#: the most labels the planner looks ahead when nothing bounds it (no count of units left)
MAX_PLAN = 1_000_000


def plan_more_labels(y: Any, yhat: Any = None, yhat_unlabeled: Any = None, *, more: int = 0,
                     target_half_width: float | None = None, confidence: float = 0.95,
                     available: int | None = None) -> Plan:
    """Predicts the interval half-width after ``more`` randomly sampled human labels, and the
    fewest more labels that reach ``target_half_width`` (None when no number of the units left
    does), from today's variances.

    With judge labels (``yhat`` of the labelled units, ``yhat_unlabeled`` of the others): the
    PPI++ interval, lambda re-tuned for every split as PPI++ tunes it, the new labels taken from
    the unlabelled units. Without: the human-only Wilson interval at today's rate, with at most
    ``available`` more units to label (unbounded when None)."""
    y = _as_binary(y, "human labels")
    n = int(y.size)
    z = z_value(confidence)
    if more < 0:
        raise ValueError("more must be zero or positive")
    use_ppi = yhat is not None and yhat_unlabeled is not None
    method = "ppi" if use_ppi else "human"
    if n < 2 or y.min() == y.max():
        return Plan(method, n, None, more, None, target_half_width, None, "random",
                    "label more randomly sampled units first: the human labels do not vary yet, so there is no "
                    "variance to plan from")
    if not use_ppi:
        p = float(y.mean())
        limit = MAX_PLAN if available is None else int(available)

        def widths(m: np.ndarray) -> np.ndarray:
            return _wilson_half_widths(p, (n + m).astype(float), z)

        note = "Wilson interval at today's rate"
    else:
        yh = _as_binary(yhat, "judge labels of the labelled units")
        yu = _as_binary(yhat_unlabeled, "judge labels of the other units")
        big_n = int(yu.size)
        var_y, var_fl, var_fu = float(y.var()), float(yh.var()), float(yu.var())
        cov = float(((y - y.mean()) * (yh - yh.mean())).mean())
        var_pool = float(np.var(np.concatenate([yh, yu]), ddof=1))
        limit = max(big_n - 2, 0)

        def widths(m: np.ndarray) -> np.ndarray:
            n2, big_n2 = n + m.astype(float), big_n - m.astype(float)
            lam = np.zeros_like(n2) if var_pool == 0 else np.clip(cov / ((1 + n2 / big_n2) * var_pool), 0, 1)
            var = lam * lam * var_fu / big_n2 + (var_y - 2 * lam * cov + lam * lam * var_fl) / n2
            return z * np.sqrt(np.maximum(var, 0.0))

        note = ("PPI++ from today's variances, lambda re-tuned for each split; the new labels come from the "
                "unlabelled units")
    if more > limit:
        raise ValueError(f"more: only {limit} more units can be labelled")
    now, after = (float(w) for w in widths(np.array([0, more])))
    needed = None
    if target_half_width is not None:
        if target_half_width <= 0:
            raise ValueError("target_half_width must be positive")
        reach = np.flatnonzero(widths(np.arange(limit + 1)) <= target_half_width)
        needed = int(reach[0]) if reach.size else None
    return Plan(method, n, now, more, after, target_half_width, needed, "random",
                note + "; sample the new units at random (policy random), so the estimate stays unbiased")
