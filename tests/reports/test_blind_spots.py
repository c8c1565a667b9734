"""Blind spots: aggregate success while a principal failed or a failure mode was labelled."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from app.reports.outcomes import (
    BLIND_SPOT_COLUMNS,
    LABEL_COLUMNS,
    PRINCIPAL_COLUMNS,
    RUN_COLUMNS,
    ReportInputError,
    blind_spot_rates,
    blind_spots,
    to_records,
)

from .conftest import HX, HY, A, B, C, assert_rows

N = None


def test_blind_spots_reasons(runs, principals, resolved):
    spots = blind_spots(runs, principals, resolved)
    # aggregate successes: r1 (1.0), r2 (0.8), r6 (0.5). r6: all principals succeed, gold says
    # no failure -> not a blind spot.
    assert_rows(
        spots,
        list(BLIND_SPOT_COLUMNS),
        [
            (
                "r1",
                "commerce/car/1",
                "commerce",
                "competitive",
                "completed",
                1.0,
                ["buyer"],
                ["CF1", "CF3"],
                [
                    "principal buyer failed (score 0.20)",
                    "labelled CF1 (buyer_agent)",
                    "labelled CF3 (buyer_agent)",
                ],
            ),
            # r2 seller has no flag, score 0.3 < 0.5 -> failed
            (
                "r2",
                "commerce/car/1",
                "commerce",
                "competitive",
                "completed",
                0.8,
                ["seller"],
                ["CF2", "GR3"],
                [
                    "principal seller failed (score 0.30)",
                    "labelled CF2 (buyer_agent)",
                    "labelled GR3 (seller_agent)",
                ],
            ),
        ],
    )


def test_blind_spots_threshold(runs, principals, resolved):
    spots = blind_spots(runs, principals, resolved, threshold=0.75)
    # agg >= 0.75: r1, r2 (r6 drops out). r2 buyer 0.70 < 0.75 now fails too.
    assert spots["run_id"].tolist() == ["r1", "r2"]
    assert spots["reasons"].iloc[1] == [
        "principal buyer failed (score 0.70)",
        "principal seller failed (score 0.30)",
        "labelled CF2 (buyer_agent)",
        "labelled GR3 (seller_agent)",
    ]
    # threshold above every aggregate score: no aggregate success, no blind spot
    assert len(blind_spots(runs, principals, resolved, threshold=1.01)) == 0


def test_blind_spots_without_labels_use_principal_outcomes_only(runs, principals):
    empty = pd.DataFrame(columns=["run_id", "mode", "category", "agent"])
    spots = blind_spots(runs, principals, empty)
    assert to_records(spots[["run_id", "reasons"]]) == [
        {"run_id": "r1", "reasons": ["principal buyer failed (score 0.20)"]},
        {"run_id": "r2", "reasons": ["principal seller failed (score 0.30)"]},
    ]


def test_flag_only_failure_unknown_outcome_and_unnamed_agent():
    runs = pd.DataFrame(
        [("z", "s", "f", "mixed", "completed", 0.9), ("y", "s", "f", "mixed", "completed", 0.9)],
        columns=list(RUN_COLUMNS),
    )
    principals = pd.DataFrame(
        [
            ("z", "p", "person", False, math.nan, None),
            ("z", "q", "organization", None, math.nan, None),
            ("y", "q", "organization", None, math.nan, None),
        ],
        columns=list(PRINCIPAL_COLUMNS),
    )
    labels = pd.DataFrame([("z", "mast", "2.3", None, None, "human")], columns=list(LABEL_COLUMNS))
    spots = blind_spots(runs, principals, labels)
    # y: only an unknown outcome and no label -> not a blind spot; z: p failed by flag alone
    assert spots["run_id"].tolist() == ["z"]
    assert spots["reasons"].iloc[0] == ["principal p failed (no score)", "labelled 2.3 (no agent named)"]
    assert spots["failed_principals"].iloc[0] == ["p"]


RATE_TAIL = ["runs", "aggregate_success_runs", "blind_spot_runs", "blind_spot_rate"]


def test_blind_spot_rates_by_family(runs, principals, resolved):
    rates = blind_spot_rates(runs, principals, resolved, by="family")
    assert_rows(
        rates,
        ["family", *RATE_TAIL],
        [
            ("commerce", 2, 2, 2, 1.0),  # r1, r2 both successes, both blind spots
            ("crm", 2, 0, 0, N),  # no aggregate success -> rate undefined
            ("legal", 2, 1, 0, 0.0),  # r6 success, clean
        ],
    )


def test_blind_spot_rates_by_model(runs, principals, agents, resolved):
    rates = blind_spot_rates(runs, principals, resolved, agents, by="model")
    assert_rows(
        rates,
        ["model", *RATE_TAIL],
        [
            (A, 5, 3, 2, 2 / 3),  # runs r1 r2 r3 r4 r6; successes r1 r2 r6; blind r1 r2
            (B, 4, 2, 2, 1.0),  # runs r1 r2 r4 r5; successes r1 r2; both blind
            (C, 1, 0, 0, N),  # r4 only
        ],
    )


def test_blind_spot_rates_by_alignment_and_harness(runs, principals, agents, resolved):
    rates = blind_spot_rates(runs, principals, resolved, agents, by="alignment")
    assert_rows(
        rates,
        ["alignment", *RATE_TAIL],
        [
            ("competitive", 3, 3, 2, 2 / 3),
            ("cooperative", 1, 0, 0, N),
            ("mixed", 1, 0, 0, N),
            (N, 1, 0, 0, N),
        ],
    )
    rates = blind_spot_rates(runs, principals, resolved, agents, by="harness")
    assert_rows(
        rates,
        ["harness", *RATE_TAIL],
        [
            (HX, 6, 3, 2, 2 / 3),  # every run has a harness-x agent
            (HY, 2, 1, 1, 1.0),  # r2 (success, blind) and r4
        ],
    )


def test_blind_spot_rates_errors(runs, principals, resolved):
    with pytest.raises(ReportInputError, match="needs the agents frame"):
        blind_spot_rates(runs, principals, resolved, by="model")
    with pytest.raises(ReportInputError, match="by must be one of"):
        blind_spot_rates(runs, principals, resolved, by="principal")
