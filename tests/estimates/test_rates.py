"""The estimators on plain arrays: equality with ppi-python and statsmodels, and the coverage,
bias and width claims of docs/studies.md on simulated studies with a known true rate."""
from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from app.estimates.rates import human_rate, judge_rate, plan_more_labels, ppi_lambda, ppi_rate, wilson
from tests.estimates._reference import ppi_mean_ci, ppi_mean_pointestimate

N_RUNS, N_HUMAN, SEEDS = 2000, 150, 200


def simulate(rng: np.random.Generator, *, rate: float = 0.1, fpr: float = 0.08, fnr: float = 0.25,
             n_runs: int = N_RUNS, n_human: int = N_HUMAN):
    """A study: the truth on every run, a judge with known error rates on every run, humans
    (who see the truth) on a simple random sample of ``n_human`` runs."""
    truth = (rng.random(n_runs) < rate).astype(float)
    flip = np.where(truth == 1, rng.random(n_runs) < fnr, rng.random(n_runs) < fpr)
    judge = np.where(flip, 1 - truth, truth)
    sample = rng.choice(n_runs, size=n_human, replace=False)
    mask = np.zeros(n_runs, bool)
    mask[sample] = True
    return truth, judge, mask


def test_wilson_equals_statsmodels():
    for k, n in [(0, 10), (3, 10), (10, 10), (17, 150), (1, 2000)]:
        lo, hi = wilson(k, n, 0.95)
        slo, shi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert lo == pytest.approx(slo, abs=1e-12) and hi == pytest.approx(shi, abs=1e-12)


def clipped(lo, hi) -> tuple[float, float]:
    """ppi_py's bounds clipped to [0, 1], as a2annotate reports them."""
    return max(0.0, float(np.asarray(lo).item())), min(1.0, float(np.asarray(hi).item()))


@pytest.mark.parametrize("seed", range(5))
def test_ppi_equals_ppi_python(seed):
    rng = np.random.default_rng(seed)
    truth, judge, mask = simulate(rng, rate=0.05 + 0.05 * seed)
    y, yhat, yu = truth[mask], judge[mask], judge[~mask]
    est = ppi_rate(y, yhat, yu, confidence=0.95)
    lo, hi = ppi_mean_ci(y, yhat, yu, alpha=0.05)
    point = ppi_mean_pointestimate(y, yhat, yu)
    assert est.rate == pytest.approx(float(np.asarray(point).item()), abs=1e-9)
    assert est.ci_low == pytest.approx(max(0.0, float(np.asarray(lo).item())), abs=1e-9)
    assert est.ci_high == pytest.approx(min(1.0, float(np.asarray(hi).item())), abs=1e-9)
    assert 0 < est.ci_low  # these studies' intervals lie inside [0, 1]: the comparison is not of clipped ends
    # with lambda fixed at 1 (plain PPI) and at 0 (the classical interval), and with weights
    for lam in (0.0, 0.4, 1.0):
        e = ppi_rate(y, yhat, yu, lam=lam)
        lo, hi = ppi_mean_ci(y, yhat, yu, alpha=0.05, lam=lam)
        assert e.rate == pytest.approx(float(np.asarray(ppi_mean_pointestimate(y, yhat, yu, lam=lam)).item()), abs=1e-9)
        assert (e.ci_low, e.ci_high) == pytest.approx(clipped(lo, hi), abs=1e-9)
    w = rng.uniform(0.5, 3.0, size=y.size)
    e = ppi_rate(y, yhat, yu, weights=w)
    lo, hi = ppi_mean_ci(y, yhat, yu, alpha=0.05, w=w)
    assert (e.ci_low, e.ci_high) == pytest.approx(clipped(lo, hi), abs=1e-9)


def test_lambda_tracks_judge_quality():
    rng = np.random.default_rng(7)
    truth, judge, mask = simulate(rng, fpr=0.0, fnr=0.0)
    assert ppi_lambda(truth[mask], judge[mask], judge[~mask]) > 0.9
    noise = (rng.random(N_RUNS) < 0.5).astype(float)  # a judge that knows nothing
    assert ppi_lambda(truth[mask], noise[mask], noise[~mask]) < 0.3


def _coverage_and_widths(fpr: float, fnr: float, rate: float = 0.1):
    cover = {"human": 0, "ppi": 0, "judge": 0}
    width = {"human": [], "ppi": []}
    judge_err = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(1000 + seed)
        truth, judge, mask = simulate(rng, rate=rate, fpr=fpr, fnr=fnr)
        true_rate = truth.mean()  # the study's own rate (the estimand: a finite set of runs)
        h = human_rate(truth[mask])
        p = ppi_rate(truth[mask], judge[mask], judge[~mask])
        j = judge_rate(judge)
        for name, e in (("human", h), ("ppi", p), ("judge", j)):
            cover[name] += e.ci_low <= true_rate <= e.ci_high
        width["human"].append(h.ci_high - h.ci_low)
        width["ppi"].append(p.ci_high - p.ci_low)
        judge_err.append(j.rate - true_rate)
    return ({k: v / SEEDS for k, v in cover.items()}, {k: float(np.mean(v)) for k, v in width.items()},
            float(np.mean(judge_err)))


def test_coverage_bias_and_width_with_an_informative_but_biased_judge():
    cover, width, judge_bias = _coverage_and_widths(fpr=0.08, fnr=0.25)
    assert cover["ppi"] >= 0.90, cover
    assert cover["human"] >= 0.90, cover
    # the judge flags 0.1 * 0.75 + 0.9 * 0.08 = 0.147 of runs against a true 0.1: visibly off
    assert judge_bias == pytest.approx(0.047, abs=0.01)
    assert cover["judge"] < 0.2, cover
    assert width["ppi"] < 0.85 * width["human"], width


def test_uninformative_judge_costs_nothing():
    cover, width, _ = _coverage_and_widths(fpr=0.5, fnr=0.5)
    assert cover["ppi"] >= 0.90
    assert width["ppi"] <= 1.08 * width["human"], width


def test_weighted_human_rate_undoes_a_stratified_sample():
    """Runs the judge flags are sampled 5x as often; weights 1/pi recover the rate, the raw mean
    does not."""
    errs_w, errs_raw, cover = [], [], 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        truth, judge, _ = simulate(rng)
        pi = np.where(judge == 1, 0.25, 0.05)
        take = rng.random(N_RUNS) < pi
        e = human_rate(truth[take], 1 / pi[take])
        errs_w.append(e.rate - truth.mean())
        errs_raw.append(truth[take].mean() - truth.mean())
        cover += e.ci_low <= truth.mean() <= e.ci_high
        assert e.n_effective < take.sum()
    assert abs(np.mean(errs_w)) < 0.01
    assert np.mean(errs_raw) > 0.1  # the flagged runs are over-represented
    assert cover >= 90


def test_planner_predicts_the_width_after_more_labels():
    ratios = {"human": [], "ppi": []}
    for seed in range(60):
        rng = np.random.default_rng(500 + seed)
        truth, judge, _ = simulate(rng)
        order = rng.permutation(N_RUNS)
        first, more = order[:100], 300
        later = order[:100 + more]
        rest = np.setdiff1d(np.arange(N_RUNS), later)
        rest_now = np.setdiff1d(np.arange(N_RUNS), first)
        ph = plan_more_labels(truth[first], more=more)
        pp = plan_more_labels(truth[first], judge[first], judge[rest_now], more=more)
        h = human_rate(truth[later])
        p = ppi_rate(truth[later], judge[later], judge[rest])
        ratios["human"].append(ph.half_width_after / ((h.ci_high - h.ci_low) / 2))
        ratios["ppi"].append(pp.half_width_after / ((p.ci_high - p.ci_low) / 2))
    for name, r in ratios.items():
        assert abs(np.mean(r) - 1) < 0.15, (name, np.mean(r))
        assert abs(np.median(r) - 1) < 0.15, (name, np.median(r))


def test_planner_labels_needed_reach_the_target():
    rng = np.random.default_rng(3)
    truth, judge, mask = simulate(rng)
    plan = plan_more_labels(truth[mask], judge[mask], judge[~mask], target_half_width=0.02)
    now = ppi_rate(truth[mask], judge[mask], judge[~mask])
    assert plan.half_width_now == pytest.approx((now.ci_high - now.ci_low) / 2, abs=1e-9)
    h = human_rate(truth[mask])
    assert plan_more_labels(truth[mask]).half_width_now == pytest.approx((h.ci_high - h.ci_low) / 2, abs=1e-12)
    assert plan.more_needed is not None and plan.more_needed > 0
    again = plan_more_labels(truth[mask], judge[mask], judge[~mask], more=plan.more_needed)
    assert again.half_width_after <= 0.02
    before = plan_more_labels(truth[mask], judge[mask], judge[~mask], more=plan.more_needed - 1)
    assert before.half_width_after > 0.02
    assert plan_more_labels(truth[mask], target_half_width=1.0).more_needed == 0
    # unreachable: humans alone on 150 labels cannot reach 0.0001
    assert plan_more_labels(truth[mask], judge[mask], judge[~mask], target_half_width=1e-6).more_needed is None


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="human labels"):
        human_rate([0, 1, 2])
    with pytest.raises(ValueError, match="weights"):
        human_rate([0, 1], [1, 0])
    assert human_rate([]).rate is None
    assert "at least 10" in ppi_rate([1, 0], [1, 0], [0, 1]).note
    flat = ppi_rate([0] * 20, [0] * 10 + [1] * 10, [0, 1] * 50)
    assert flat.rate is None and "do not vary" in flat.note
    assert plan_more_labels([0] * 20, target_half_width=0.1).more_needed is None
