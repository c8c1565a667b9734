"""Published worked examples, to 3 decimals, each also checked against a reference library."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from irrCAC.datasets import raw_4raters
from irrCAC.raw import CAC
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from app.agreement import compute

pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.SettingWithCopyWarning")

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", reliability data matrix:
# 4 coders (rows) x 12 units (columns), "." = missing.
KRIPP_CODERS = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
KRIPP_UNITS = [list(col) for col in zip(*KRIPP_CODERS)]


@pytest.mark.parametrize(
    "level,published",
    [
        ("nominal", 0.743),
        ("ordinal", 0.815),
        ("interval", 0.849),
        ("ratio", 0.797),
    ],
)
def test_krippendorff_2011_example(level, published):
    got = compute("krippendorff_alpha", KRIPP_UNITS, level=level, n_boot=0)
    assert round(got.value, 3) == published
    assert got.n_units == 11  # unit 12 has a single rating and is not pairable
    data = np.array([[np.nan if x is None else x for x in row] for row in KRIPP_CODERS], dtype=float)
    assert round(krippendorff.alpha(reliability_data=data, level_of_measurement=level), 3) == published


# Fleiss (1971) example as on Wikipedia ("Fleiss' kappa"): 10 subjects, 14 raters each,
# counts of raters per category 1..5; kappa = 0.210 (P-bar = 0.378, P-bar_e = 0.213).
FLEISS_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_1971_wikipedia_example():
    ratings = [[c + 1 for c, n in enumerate(row) for _ in range(n)] for row in FLEISS_TABLE]
    assert all(len(r) == 14 for r in ratings)
    got = compute("fleiss_kappa", ratings, n_boot=0)
    assert round(got.value, 3) == 0.210
    assert round(compute("percent", ratings, n_boot=0).value, 3) == 0.378  # P-bar
    assert round(sm_fleiss(np.array(FLEISS_TABLE), method="fleiss"), 3) == 0.210


def test_cohen_wikipedia_example():
    # 20 yes-yes, 5 yes-no (A yes, B no), 10 no-yes, 15 no-no: p_o = 0.7, p_e = 0.5, kappa = 0.4
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    ratings = [list(p) for p in pairs]
    got = compute("cohen_kappa", ratings, n_boot=0)
    assert got.value == pytest.approx(0.4, abs=1e-12)
    assert got.n_units == 50
    assert cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs]) == pytest.approx(0.4, abs=1e-12)


def test_gwet_ac1_irrcac_documented_example():
    # irrCAC's documented example (raw_4raters; Gwet 2014): AC1 = 0.77544, pa = 0.81818,
    # Fleiss' kappa = 0.76117.
    df = raw_4raters()
    ratings = [[None if np.isnan(x) else x for x in row] for row in df.to_numpy().tolist()]
    assert round(compute("gwet_ac1", ratings, n_boot=0).value, 5) == 0.77544
    assert round(compute("percent", ratings, n_boot=0).value, 5) == 0.81818
    assert round(compute("fleiss_kappa", ratings, n_boot=0).value, 5) == 0.76117
    assert CAC(df).gwet()["est"]["coefficient_value"] == 0.77544
