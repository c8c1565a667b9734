"""Report numbers worked out by hand from tests/reports_db/corpus.py (see its table), source auto."""
from __future__ import annotations

import math
from typing import Any

SOURCE_AUTO = "gold for 1 run, human majority for 3 runs, unlabelled 1 run"
MODES = [f"{c}{i}" for c in ("DD", "GR", "VF", "CF") for i in range(1, 6)]
CATS = ["DD", "GR", "VF", "CF"]


def _cats(**nonzero: float) -> dict[str, float]:
    return {f"cat:{c}": nonzero.get(c, 0.0) for c in CATS}


def _modes(**nonzero: float) -> dict[str, float]:
    return {f"mode:{m}": nonzero.get(m, 0.0) for m in MODES}


# by=model, unit agent-run (see corpus.py for the agent table)
BY_MODEL = [
    {
        # r1 buyer_agent, r2 seller_agent, r3 client_agent, r3 vendor_agent, r4 client_agent
        "model": "model-a", "runs": 4, "n": 5,
        "aggregate_success_rate": 2 / 5,          # r1, r2 are aggregate successes
        "principal_success_rate": 2 / 4,          # F, T, F, T known; r4 client unknown
        "success_gap": 2 / 5 - 2 / 4,
        "principal_known": 4, "principal_unknown": 1,
        "mean_principal_score": (0.2 + 0.6 + 0.4) / 3,  # r3 vendor and r4 client have no score
        "metric:surplus": -100.0,                 # only r1 buyer has it among these units
        "labelled_n": 4,                          # r4 is unlabelled
        "responsible_n": 4,
        "responsible_rate": 2 / 4,                # r1 buyer_agent (CF1), r2 seller_agent (VF1)
        **_cats(CF=1 / 4, VF=1 / 4), **_modes(CF1=1 / 4, VF1=1 / 4),
    },
    {
        # r1 seller_agent, r2 buyer_agent, r4 vendor_agent, r5 plaintiff_agent, r5 defendant_agent
        "model": "model-b", "runs": 4, "n": 5,
        "aggregate_success_rate": 4 / 5,          # all but r4
        "principal_success_rate": 4 / 5,          # all but r4 vendor
        "success_gap": 0.0,
        "principal_known": 5, "principal_unknown": 0,
        "mean_principal_score": (0.8 + 0.7 + 0.1 + 0.9 + 0.6) / 5,
        "metric:surplus": 50.0,                   # r2 buyer
        "labelled_n": 4, "responsible_n": 4, "responsible_rate": 0.0,
        **_cats(), **_modes(),
    },
]

# by=family, unit principal-run
BY_FAMILY = [
    {
        "family": "commerce", "runs": 2, "n": 4,
        "aggregate_success_rate": 1.0, "principal_success_rate": 3 / 4,   # r1 buyer failed
        "success_gap": 1.0 - 3 / 4, "principal_known": 4, "principal_unknown": 0,
        "mean_principal_score": (0.2 + 0.8 + 0.7 + 0.6) / 4,
        "metric:surplus": (-100 + 50) / 2,
        "labelled_n": 4, "responsible_n": 4, "responsible_rate": 2 / 4,
        **_cats(CF=2 / 4, VF=2 / 4),              # both principal-runs of r1 (CF1) and of r2 (VF1)
        **_modes(CF1=2 / 4, VF1=2 / 4),
    },
    {
        "family": "crm", "runs": 2, "n": 4,
        "aggregate_success_rate": 0.0, "principal_success_rate": 1 / 3,   # F, T, unknown, F
        "success_gap": 0.0 - 1 / 3, "principal_known": 3, "principal_unknown": 1,
        "mean_principal_score": (0.4 + 0.1) / 2,
        "metric:surplus": None,
        "labelled_n": 2, "responsible_n": 2, "responsible_rate": 0.0,   # r3 only ("no failure")
        **_cats(), **_modes(),
    },
    {
        "family": "legal", "runs": 1, "n": 2,
        "aggregate_success_rate": 1.0, "principal_success_rate": 1.0, "success_gap": 0.0,
        "principal_known": 2, "principal_unknown": 0, "mean_principal_score": (0.9 + 0.6) / 2,
        "metric:surplus": None, "labelled_n": 2, "responsible_n": 2, "responsible_rate": 0.0,
        **_cats(), **_modes(),
    },
]

BLIND_SPOT_RUNS = [
    {"run_id": "r1", "family": "commerce", "alignment": "competitive", "status": "completed", "aggregate_score": 0.9,
     "failed_principals": ["buyer"], "labelled_modes": ["CF1"],
     "reasons": ["principal buyer failed (score 0.20)", "labelled CF1 (buyer_agent)"]},
    {"run_id": "r2", "family": "commerce", "alignment": "competitive", "status": "completed", "aggregate_score": 0.6,
     "failed_principals": [], "labelled_modes": ["VF1"], "reasons": ["labelled VF1 (seller_agent)"]},
]
BLIND_SPOT_RATES = {
    "family": [("commerce", 2, 2, 2, 1.0), ("crm", 2, 0, 0, None), ("legal", 1, 1, 0, 0.0)],
    # model-a is in r1-r4 (aggregate successes r1, r2); model-b in r1, r2, r4, r5 (r1, r2, r5)
    "model": [("model-a", 4, 2, 2, 1.0), ("model-b", 4, 3, 2, 2 / 3)],
    "alignment": [("competitive", 3, 3, 2, 2 / 3), ("cooperative", 1, 0, 0, None), ("mixed", 1, 0, 0, None)],
}

# cross-play by model: r1, r2, r4, r5 (r3 is cooperative)
CROSSPLAY_MODEL = [
    # (a, b) = (model-a, model-b): r1 buyer(.2, F) vs seller(.8, T); r2 seller(.6, T) vs buyer(.7, T);
    # r4 client(no score, unknown) vs vendor(.1, F)
    {"a": "model-a", "b": "model-b", "runs": 3, "n": 3, "a_mean_score": (0.2 + 0.6) / 2,
     "b_mean_score": (0.8 + 0.7 + 0.1) / 3, "a_success_rate": 1 / 2, "b_success_rate": 2 / 3,
     "a_success_unknown": 1, "b_success_unknown": 0},
    {"a": "model-b", "b": "model-a", "runs": 3, "n": 3, "a_mean_score": (0.8 + 0.7 + 0.1) / 3,
     "b_mean_score": (0.2 + 0.6) / 2, "a_success_rate": 2 / 3, "b_success_rate": 1 / 2,
     "a_success_unknown": 0, "b_success_unknown": 1},
    # r5: plaintiff (.9) and defendant (.6), both model-b, both orders
    {"a": "model-b", "b": "model-b", "runs": 1, "n": 2, "a_mean_score": (0.9 + 0.6) / 2,
     "b_mean_score": (0.9 + 0.6) / 2, "a_success_rate": 1.0, "b_success_rate": 1.0,
     "a_success_unknown": 0, "b_success_unknown": 0},
]
CROSSPLAY_MATRIX = {"value": "a_mean_score", "rows": ["model-a", "model-b"], "cols": ["model-a", "model-b"],
                    "values": [[None, 0.4], [1.6 / 3, 0.75]]}


def same(actual: Any, expected: Any) -> bool:
    """Equal, with floats compared to 1e-12 (the hand values are computed in another order)."""
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return math.isclose(actual, expected, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(same(a, e) for a, e in zip(actual, expected))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(same(actual[k], expected[k]) for k in expected)
    return actual == expected


def assert_rows(rows: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Every expected row, in order, with exactly its keys' values (rows may have more keys)."""
    assert len(rows) == len(expected), [r.get("model") or r.get("family") for r in rows]
    for row, exp in zip(rows, expected):
        for k, v in exp.items():
            assert k in row, f"missing column {k}"
            assert same(row[k], v), (k, row[k], v)

