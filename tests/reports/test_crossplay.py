"""Cross-play cells: mixed / competitive runs between agents of different principals."""

from __future__ import annotations

import pytest

from app.reports.outcomes import CROSSPLAY_COLUMNS, ReportInputError, crossplay, crossplay_matrix

from .conftest import HX, HY, A, B, C, assert_rows

COLS = list(CROSSPLAY_COLUMNS)

# Used runs: r1, r2 (competitive), r4 (mixed), r6 (competitive). r3 is cooperative and r5 has no
# alignment, so both are left out.  Principal outcomes: r1 buyer .2 F / seller .9 T;
# r2 buyer .7 T / seller .3 F; r4 client .5 T / vendor .1 F; r6 buyer .6 T / seller .55 T.


def test_crossplay_by_model(runs, principals, agents):
    cells = crossplay(runs, principals, agents, by="model")
    assert_rows(
        cells,
        COLS,
        [
            # r6 self-play: (buyer a, seller a) and (seller a, buyer a) -> 2 observations;
            # A mean (.6+.55)/2 = .575, B the same
            (A, A, 1, 2, 0.575, 0.575, 1.0, 1.0, 0, 0),
            # a vs b: r1 buyer(a) .2F vs seller(b) .9T; r2 seller(a) .3F vs buyer(b) .7T;
            # r4 client(a) .5T vs vendor(b, vendor_agent) .1F
            # A: (.2+.3+.5)/3 = 1/3, success 1/3; B: (.9+.7+.1)/3 = 1.7/3, success 2/3
            (A, B, 3, 3, 1 / 3, 1.7 / 3, 1 / 3, 2 / 3, 0, 0),
            # a vs c: r4 client(a) vs vendor(c, helper_agent)
            (A, C, 1, 1, 0.5, 0.1, 1.0, 0.0, 0, 0),
            # mirror of (a, b)
            (B, A, 3, 3, 1.7 / 3, 1 / 3, 2 / 3, 1 / 3, 0, 0),
            (C, A, 1, 1, 0.1, 0.5, 0.0, 1.0, 0, 0),
        ],
    )


def test_crossplay_by_harness_dedupes_sides(runs, principals, agents):
    cells = crossplay(runs, principals, agents, by="harness")
    assert_rows(
        cells,
        COLS,
        [
            # (hx, hx): r1 both orders (.2/.9, .9/.2); r4 client(hx) vs vendor(hx via helper) both
            # orders (.5/.1, .1/.5); r6 both orders (.6/.55, .55/.6) -> 6 observations, 3 runs.
            # A mean (.2+.9+.5+.1+.6+.55)/6 = 2.85/6 = .475, B the same; success F T T F T T = 4/6
            (HX, HX, 3, 6, 0.475, 0.475, 4 / 6, 4 / 6, 0, 0),
            # (hx, hy): r2 buyer(hx) .7T vs seller(hy) .3F; r4 client(hx) .5T vs vendor(hy) .1F
            (HX, HY, 2, 2, 0.6, 0.2, 1.0, 0.0, 0, 0),
            (HY, HX, 2, 2, 0.2, 0.6, 0.0, 1.0, 0, 0),
        ],
    )


def test_crossplay_matrix_is_square_with_gaps(runs, principals, agents):
    rows, cols, values = crossplay_matrix(crossplay(runs, principals, agents, by="model"))
    assert rows == cols == [A, B, C]
    assert values[0] == pytest.approx([0.575, 1 / 3, 0.5], abs=1e-12)
    assert values[1][0] == pytest.approx(1.7 / 3, abs=1e-12)
    assert values[1][1:] == [None, None]
    assert values[2][0] == pytest.approx(0.1, abs=1e-12) and values[2][1:] == [None, None]
    _, _, succ = crossplay_matrix(crossplay(runs, principals, agents, by="model"), value="b_success_rate")
    assert succ[0][1] == pytest.approx(2 / 3, abs=1e-12)


def test_unknown_outcomes_are_counted_not_rated(runs, principals, agents):
    # make r6's seller unknown: no flag, no score
    p = principals.copy()
    idx = p.index[(p.run_id == "r6") & (p.principal_id == "seller")][0]
    p.at[idx, "success"] = None
    p.at[idx, "score"] = float("nan")
    cells = crossplay(runs, p, agents, by="model")
    aa = cells.iloc[0]
    # observations (buyer .6 T, seller ?) and (seller ?, buyer .6 T)
    assert (aa["a_mean_score"], aa["a_success_rate"], aa["a_success_unknown"]) == (0.6, 1.0, 1)
    assert (aa["b_mean_score"], aa["b_success_rate"], aa["b_success_unknown"]) == (0.6, 1.0, 1)


def test_crossplay_errors(runs, principals, agents):
    with pytest.raises(ReportInputError, match="by must be 'model' or 'harness'"):
        crossplay(runs, principals, agents, by="role")
    with pytest.raises(ReportInputError, match="value must be one of"):
        crossplay_matrix(crossplay(runs, principals, agents), value="a")
