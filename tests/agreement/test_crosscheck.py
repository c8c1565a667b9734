"""Cross-checks against reference implementations on seeded random data with missing ratings.

Libraries: krippendorff (alpha, all levels), statsmodels (Fleiss, equal rater counts),
scikit-learn (Cohen, unweighted / linear / quadratic), irrCAC (Fleiss, Gwet AC1, Krippendorff,
Conger, observed agreement pa), nltk AnnotationTask (alpha with MASI / Jaccard / interval
distances, pairwise kappa, multi-pi).  Tolerance 1e-6 everywhere the definitions match.
"""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import pandas as pd
import pytest
from irrCAC.raw import CAC
from nltk.metrics.agreement import AnnotationTask
from nltk.metrics.distance import interval_distance
from nltk.metrics.distance import jaccard_distance as nltk_jaccard
from nltk.metrics.distance import masi_distance as nltk_masi
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from app.agreement import compute, encode_ratings, pairwise_cohen_kappa
from app.agreement.coefficients import _AlphaStat, _delta_matrix, _patterns

from ._data import SHAPES, random_ratings, to_float_matrix

TOL = 1e-6
# irrCAC's CAC mutates a slice of its input frame
pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.SettingWithCopyWarning")
CASES = [(seed, *shape) for seed, shape in enumerate(SHAPES)]


def _irr(ratings, categories=None):
    df = pd.DataFrame(to_float_matrix(ratings))
    return CAC(df, categories=categories, digits=15)


@pytest.mark.parametrize("seed,n_units,n_raters,values,p_missing", CASES)
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_matches_krippendorff_package(seed, n_units, n_raters, values, p_missing, level):
    ratings = random_ratings(seed, n_units, n_raters, values, p_missing)
    expected = krippendorff.alpha(reliability_data=to_float_matrix(ratings).T, level_of_measurement=level)
    assert compute("krippendorff_alpha", ratings, level=level, n_boot=0).value == pytest.approx(
        expected, abs=TOL
    )


@pytest.mark.parametrize("seed,n_units,n_raters,values,p_missing", CASES)
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_own_alpha_formula_used_by_bootstrap_matches_package(
    seed, n_units, n_raters, values, p_missing, level
):
    """The vectorised alpha evaluated on bootstrap weights, at the data's own weights."""
    ratings = random_ratings(seed + 100, n_units, n_raters, values, p_missing)
    coded = encode_ratings(ratings)
    sub = coded.codes[(coded.codes >= 0).sum(axis=1) >= 2]
    pat = _patterns(sub, len(coded.domain))
    stat = _AlphaStat(pat, None if level == "ordinal" else _delta_matrix(coded, level, None))
    own = stat(pat.counts[None, :].astype(float))[0]
    expected = krippendorff.alpha(reliability_data=to_float_matrix(ratings).T, level_of_measurement=level)
    assert own == pytest.approx(expected, abs=TOL)


def test_ordinal_alpha_with_string_categories_follows_category_order():
    order = ["low", "mid", "high", "very high"]
    ratings = random_ratings(7, 40, 3, (0, 1, 2, 3), 0.2)
    as_str = [[None if x is None else order[x] for x in row] for row in ratings]
    data = np.array([["nan" if x is None else x for x in row] for row in as_str]).T
    for level in ("nominal", "ordinal"):
        expected = krippendorff.alpha(reliability_data=data, value_domain=order, level_of_measurement=level)
        got = compute("krippendorff_alpha", as_str, level=level, categories=order, n_boot=0).value
        assert got == pytest.approx(expected, abs=TOL)
    # interval on non-numeric categories uses positions 1..k
    expected = krippendorff.alpha(
        reliability_data=to_float_matrix(ratings).T + 1, level_of_measurement="interval"
    )
    got = compute("krippendorff_alpha", as_str, level="interval", categories=order, n_boot=0).value
    assert got == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("seed,n_units,n_raters,values,p_missing", CASES)
def test_interval_alpha_matches_nltk(seed, n_units, n_raters, values, p_missing):
    ratings = random_ratings(seed + 200, min(n_units, 40), n_raters, values, p_missing)
    task = AnnotationTask(
        [(r, u, float(x)) for u, row in enumerate(ratings) for r, x in enumerate(row) if x is not None],
        distance=interval_distance,
    )
    got = compute("krippendorff_alpha", ratings, level="interval", n_boot=0).value
    assert got == pytest.approx(task.alpha(), abs=TOL)


@pytest.mark.parametrize("seed,n_units,n_raters,values,p_missing", CASES)
def test_fleiss_ac1_alpha_percent_match_irrcac(seed, n_units, n_raters, values, p_missing):
    ratings = random_ratings(seed + 300, n_units, n_raters, values, p_missing)
    irr = _irr(ratings)
    gwet = irr.gwet()["est"]
    assert compute("gwet_ac1", ratings, n_boot=0).value == pytest.approx(gwet["coefficient_value"], abs=TOL)
    assert compute("percent", ratings, n_boot=0).value == pytest.approx(gwet["pa"], abs=TOL)
    fleiss = irr.fleiss()["est"]["coefficient_value"]
    assert compute("fleiss_kappa", ratings, n_boot=0).value == pytest.approx(fleiss, abs=TOL)
    alpha = irr.krippendorff()["est"]["coefficient_value"]
    assert compute("krippendorff_alpha", ratings, n_boot=0).value == pytest.approx(alpha, abs=TOL)


def test_ac1_counts_unused_categories_like_irrcac():
    ratings = random_ratings(11, 50, 3, (1, 2, 3), 0.1)
    cats = [1, 2, 3, 4, 5]
    expected = _irr(ratings, categories=[float(c) for c in cats]).gwet()["est"]["coefficient_value"]
    got = compute("gwet_ac1", ratings, categories=cats, n_boot=0).value
    assert got == pytest.approx(expected, abs=TOL)
    # and it differs from the AC1 over the observed categories only (q changes p_e)
    assert abs(got - compute("gwet_ac1", ratings, n_boot=0).value) > 1e-3


@pytest.mark.parametrize("seed,n_units,n_raters,values,p_missing", CASES)
def test_fleiss_matches_statsmodels_on_complete_data(seed, n_units, n_raters, values, p_missing):
    ratings = random_ratings(seed + 400, n_units, n_raters, values, 0.0)
    table, _ = aggregate_raters(np.array(ratings))
    expected = sm_fleiss(table, method="fleiss")
    assert compute("fleiss_kappa", ratings, n_boot=0).value == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weights", ["unweighted", "linear", "quadratic"])
def test_cohen_matches_sklearn(seed, weights):
    cats = [1, 2, 3, 4, 5]  # 5 is never used: positions still count for weights
    ratings = random_ratings(seed + 500, 70, 2, (1, 2, 3, 4), 0.2)
    both = [(a, b) for a, b in ratings if a is not None and b is not None]
    expected = cohen_kappa_score(
        [a for a, _ in both],
        [b for _, b in both],
        labels=cats,
        weights=None if weights == "unweighted" else weights,
    )
    got = compute("cohen_kappa", ratings, weights=weights, categories=cats, n_boot=0)
    assert got.value == pytest.approx(expected, abs=TOL)
    assert got.n_units == len(both)


@pytest.mark.parametrize("seed,n_units,n_raters,values,p_missing", CASES)
def test_pairwise_cohen_table_matches_sklearn(seed, n_units, n_raters, values, p_missing):
    ratings = random_ratings(seed + 600, n_units, n_raters, values, p_missing)
    out = pairwise_cohen_kappa(ratings)
    kappas = []
    for i, j in itertools.combinations(range(n_raters), 2):
        both = [(row[i], row[j]) for row in ratings if row[i] is not None and row[j] is not None]
        expected = cohen_kappa_score([a for a, _ in both], [b for _, b in both])
        kappas.append(expected)
        assert out["matrix"][i][j] == pytest.approx(expected, abs=TOL)
        assert out["matrix"][j][i] == out["matrix"][i][j]
        assert out["n_units"][i][j] == len(both)
    assert out["mean"]["value"] == pytest.approx(np.mean(kappas), abs=TOL)
    assert compute("cohen_kappa", ratings, n_boot=0).value == pytest.approx(np.mean(kappas), abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_two_rater_cohen_equals_irrcac_conger(seed):
    """Conger's kappa reduces to Cohen's kappa for two raters with complete data."""
    ratings = random_ratings(seed + 700, 40, 2, (1, 2, 3), 0.0)
    expected = _irr(ratings).conger()["est"]["coefficient_value"]
    assert compute("cohen_kappa", ratings, n_boot=0).value == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_nltk_kappa_and_pi_on_complete_data(seed):
    """nltk kappa() is the mean pairwise Cohen kappa; nltk pi() is Fleiss' kappa (multi-pi).

    nltk's multi_kappa() (Davies & Fleiss 1982) pools the pairwise expected agreements before
    correcting, a different definition from the mean of pairwise kappas, so it is not compared.
    """
    ratings = random_ratings(seed + 800, 30, 3, (1, 2, 3), 0.0)
    task = AnnotationTask([(r, str(u), x) for u, row in enumerate(ratings) for r, x in enumerate(row)])
    assert compute("cohen_kappa", ratings, n_boot=0).value == pytest.approx(task.kappa(), abs=TOL)
    assert compute("fleiss_kappa", ratings, n_boot=0).value == pytest.approx(task.pi(), abs=TOL)


def _random_sets(seed: int, n_units: int, n_raters: int, p_missing: float) -> list[list]:
    rng = np.random.default_rng(seed)
    labels = ["DD1", "GR2", "VF3", "CF4"]
    out = []
    for _ in range(n_units):
        base = {lab for lab in labels if rng.random() < 0.3}
        row = []
        for _ in range(n_raters):
            if rng.random() < p_missing:
                row.append(None)
            else:
                s = set(base)
                for lab in labels:
                    if rng.random() < 0.15:
                        s ^= {lab}
                row.append(sorted(s))
        out.append(row)
    return out


def _nltk_set_distance(fn):
    # nltk evaluates distance(l, l); its masi/jaccard divide by zero for two empty sets.
    return lambda a, b: 0.0 if a == b else fn(a, b)


@pytest.mark.parametrize("seed,n_raters,p_missing", [(0, 2, 0.0), (1, 3, 0.2), (2, 4, 0.3)])
@pytest.mark.parametrize("distance", ["masi", "jaccard"])
def test_set_alpha_matches_nltk(seed, n_raters, p_missing, distance):
    ratings = _random_sets(seed, 35, n_raters, p_missing)
    fn = nltk_masi if distance == "masi" else nltk_jaccard
    task = AnnotationTask(
        [
            (r, str(u), frozenset(x))
            for u, row in enumerate(ratings)
            for r, x in enumerate(row)
            if x is not None
        ],
        distance=_nltk_set_distance(fn),
    )
    got = compute("krippendorff_alpha", ratings, distance=distance, n_boot=0)
    assert got.value == pytest.approx(task.alpha(), abs=TOL)
    assert got.value != pytest.approx(
        compute("krippendorff_alpha", ratings, n_boot=0).value, abs=1e-4
    )  # partial credit changes the value versus exact-match (nominal) alpha


def test_bootstrap_replicate_equals_recomputation_on_resampled_units():
    """One bootstrap replicate evaluated by weights equals the coefficient on the resample."""
    from app.agreement.bootstrap import replicate_weights
    from app.agreement.coefficients import _ChanceStat, _kappa_disagreement, _PairKappaStat, _PercentStat

    ratings = random_ratings(42, 50, 3, (1, 2, 3), 0.2)
    coded = encode_ratings(ratings)
    sub = coded.codes[(coded.codes >= 0).sum(axis=1) >= 2]
    pat = _patterns(sub, len(coded.domain))
    rng = np.random.default_rng(3)
    w = next(replicate_weights(pat.counts, 3, rng, unit_pattern=pat.inverse))
    dom = coded.domain
    for b in range(3):
        rows = np.repeat(pat.rows, w[b].astype(int), axis=0)
        resampled = [[None if c < 0 else dom[c] for c in row] for row in rows]
        irr = _irr(resampled, categories=[float(c) for c in dom])
        alpha = _AlphaStat(pat, _delta_matrix(coded, "interval", None))(w[b : b + 1])[0]
        assert alpha == pytest.approx(
            krippendorff.alpha(
                reliability_data=to_float_matrix(resampled).T, level_of_measurement="interval"
            ),
            abs=TOL,
        )
        assert _ChanceStat(pat, "fleiss")(w[b : b + 1])[0] == pytest.approx(
            irr.fleiss()["est"]["coefficient_value"], abs=TOL
        )
        assert _ChanceStat(pat, "ac1")(w[b : b + 1])[0] == pytest.approx(
            irr.gwet()["est"]["coefficient_value"], abs=TOL
        )
        assert _PercentStat(pat)(w[b : b + 1])[0] == pytest.approx(irr.gwet()["est"]["pa"], abs=TOL)
        kap = _PairKappaStat(pat, [(0, 1)], _kappa_disagreement(3, "unweighted"))(w[b : b + 1])[0]
        both = [(r[0], r[1]) for r in resampled if r[0] is not None and r[1] is not None]
        assert kap == pytest.approx(cohen_kappa_score([a for a, _ in both], [c for _, c in both]), abs=TOL)
