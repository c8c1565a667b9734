"""Coefficients on list input against the reference libraries on the same matrix.

2,500 runs x 20 modes x 3 annotators pooled: 50,000 units x 3 raters of 0/1 with 5 % missing
(the list of lists the calculator API takes).  Baselines, in the same run: ``krippendorff.alpha``
on the float matrix, scikit-learn ``cohen_kappa_score`` on every rater pair (complete data),
statsmodels ``fleiss_kappa(aggregate_raters(...))`` (complete data).
"""
from __future__ import annotations

import numpy as np

from bench.common import median_time, row


def _data(n_units: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    truth = rng.random(n_units) < 0.1
    m = np.stack([(truth ^ (rng.random(n_units) < 0.08)).astype(int) for _ in range(3)], axis=1)
    miss = rng.random((n_units, 3)) < 0.05
    with_gaps = [[None if miss[u, r] else int(m[u, r]) for r in range(3)] for u in range(n_units)]
    full = m.tolist()
    return m, miss, with_gaps, full


def main(quick: bool = False) -> list[str]:
    import krippendorff
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    from app.agreement import compute

    n_runs = 50 if quick else 2500
    n = n_runs * 20
    m, miss, with_gaps, full = _data(n)
    size = f"{n_runs} runs x 20 modes x 3 annotators ({n:,} units), list input"
    fm = np.where(miss, np.nan, m).T.astype(float)
    rows = []

    base = median_time(lambda: krippendorff.alpha(reliability_data=fm, level_of_measurement="nominal"))
    ours = median_time(lambda: compute("krippendorff_alpha", with_gaps, n_boot=0))
    a = compute("krippendorff_alpha", with_gaps, n_boot=0).value
    b = krippendorff.alpha(reliability_data=fm, level_of_measurement="nominal")
    assert abs(a - b) < 1e-9, (a, b)
    rows.append(row(f"Krippendorff alpha (nominal), {size}", f"{ours:.3f} s",
                    f"`krippendorff.alpha` on the float matrix: {base:.3f} s", ours / base, "within 1.5x"))

    pairs = ((0, 1), (0, 2), (1, 2))
    base = median_time(lambda: [cohen_kappa_score(m[:, i], m[:, j]) for i, j in pairs])
    ours = median_time(lambda: compute("cohen_kappa", full, n_boot=0))
    rows.append(row(f"Cohen kappa (mean of the 3 pairs), {size} (complete)", f"{ours:.3f} s",
                    f"scikit-learn `cohen_kappa_score` x3: {base:.3f} s", ours / base, "within 1.5x"))

    base = median_time(lambda: fleiss_kappa(aggregate_raters(m)[0]))
    ours = median_time(lambda: compute("fleiss_kappa", full, n_boot=0))
    a = compute("fleiss_kappa", full, n_boot=0).value
    assert abs(a - fleiss_kappa(aggregate_raters(m)[0])) < 1e-9
    rows.append(row(f"Fleiss kappa, {size} (complete)", f"{ours:.3f} s",
                    f"statsmodels `fleiss_kappa(aggregate_raters(...))`: {base:.3f} s", ours / base, "within 1.5x"))
    return rows


if __name__ == "__main__":
    import sys

    print("\n".join(main("--quick" in sys.argv)))
