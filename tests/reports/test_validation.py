"""Bad input is named precisely; empty input gives empty reports; to_records is JSON-safe."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from app.reports.outcomes import (
    AGENT_COLUMNS,
    LABEL_COLUMNS,
    PRINCIPAL_COLUMNS,
    RUN_COLUMNS,
    ReportInputError,
    aggregate_success,
    blind_spots,
    crossplay,
    outcome_report,
    principal_success,
    to_records,
)


def test_success_definitions():
    assert aggregate_success("completed", 0.5, 0.5) is True
    assert aggregate_success("completed", 0.49, 0.5) is False
    assert aggregate_success("failed", 1.0, 0.5) is False
    assert aggregate_success("completed", math.nan, 0.5) is False
    assert aggregate_success("completed", None, 0.0) is False
    assert principal_success(False, 0.9, 0.5) is False  # the flag wins over the score
    assert principal_success(None, 0.5, 0.5) is True  # boundary counts as success
    assert principal_success(math.nan, 0.2, 0.5) is False
    assert principal_success(None, math.nan, 0.5) is None  # unknown


def test_missing_columns_and_wrong_types(runs, principals, agents, resolved):
    with pytest.raises(ReportInputError, match=r"runs: missing column\(s\) aggregate_score"):
        outcome_report(runs.drop(columns=["aggregate_score"]), principals, agents, resolved)
    with pytest.raises(ReportInputError, match="agents: expected a pandas DataFrame, got list"):
        outcome_report(runs, principals, [], resolved)
    with pytest.raises(ReportInputError, match=r"labels: missing column\(s\) agent"):
        blind_spots(runs, principals, resolved.drop(columns=["agent"]))


def test_bad_values_name_row_and_field(runs, principals, agents, resolved):
    bad = runs.copy()
    bad.loc[2, "status"] = "done"
    with pytest.raises(ReportInputError, match=r"runs row 2 \(run_id='r3'\): field 'status' = 'done'"):
        outcome_report(bad, principals, agents, resolved)
    bad = runs.copy()
    bad.loc[4, "run_id"] = "r1"
    with pytest.raises(ReportInputError, match="runs row 4: duplicate run_id 'r1'"):
        outcome_report(bad, principals, agents, resolved)
    bad = runs.astype({"aggregate_score": object})
    bad.loc[0, "aggregate_score"] = "high"
    with pytest.raises(ReportInputError, match="field 'aggregate_score' must be a number"):
        crossplay(bad, principals, agents)
    bad = principals.copy()
    bad.at[1, "success"] = "yes"
    with pytest.raises(ReportInputError, match=r"principals row 1 \(run_id='r1'\): field 'success'"):
        outcome_report(runs, bad, agents, resolved)
    bad = principals.copy()
    bad.at[0, "metrics"] = "surplus=3"
    with pytest.raises(ReportInputError, match="principals row 0 .*'metrics' must be a dict"):
        outcome_report(runs, bad, agents, resolved)
    bad = principals.copy()
    bad.loc[0, "run_id"] = "r9"
    with pytest.raises(ReportInputError, match="principals row 0: run_id 'r9' is not in runs"):
        outcome_report(runs, bad, agents, resolved)
    bad = agents.copy()
    bad.loc[3, "principal_id"] = "buyer"  # r2 seller_agent -> r2 buyer exists, fine
    outcome_report(runs, principals, bad, resolved)
    bad.loc[3, "principal_id"] = "landlord"
    with pytest.raises(ReportInputError, match=r"agents row 3 .*principal_id 'landlord' is not a principal"):
        outcome_report(runs, principals, bad, resolved)
    bad = principals.copy()
    bad.loc[2, "kind"] = "robot"
    with pytest.raises(ReportInputError, match="field 'kind' = 'robot' is not one of person, organization"):
        outcome_report(runs, bad, agents, resolved)


def test_empty_inputs_give_empty_reports():
    runs = pd.DataFrame(columns=list(RUN_COLUMNS))
    principals = pd.DataFrame(columns=list(PRINCIPAL_COLUMNS))
    agents = pd.DataFrame(columns=list(AGENT_COLUMNS))
    labels = pd.DataFrame(columns=list(LABEL_COLUMNS))
    rep = outcome_report(runs, principals, agents, labels, by="agent")
    assert len(rep) == 0 and list(rep.columns[:4]) == ["model", "harness", "role", "runs"]
    assert to_records(rep) == []
    assert len(blind_spots(runs, principals, labels)) == 0
    assert len(crossplay(runs, principals, agents)) == 0


def test_to_records_is_json_safe():
    frame = pd.DataFrame(
        {
            "a": [np.int64(3), np.int64(4)],
            "b": [np.float64(0.5), np.nan],
            "c": [["x", np.float64(math.inf)], {"k": np.nan}],
            "d": [pd.Timestamp("2026-05-01T10:00:00Z"), None],
            "e": [np.bool_(True), False],
        }
    )
    recs = to_records(frame)
    assert recs == [
        {"a": 3, "b": 0.5, "c": ["x", None], "d": "2026-05-01T10:00:00+00:00", "e": True},
        {"a": 4, "b": None, "c": {"k": None}, "d": None, "e": False},
    ]
    assert type(recs[0]["a"]) is int and type(recs[0]["e"]) is bool
    json.dumps(recs, allow_nan=False)


def test_the_first_bad_row_wins_then_the_first_field_in_row_order(runs, principals, agents, resolved):
    bad = runs.astype(object)
    bad.loc[1, "aggregate_score"] = "high"  # row 1, last field
    bad.loc[3, "run_id"] = ""  # row 3, first field
    with pytest.raises(ReportInputError, match=r"^runs row 1 \(run_id='r2'\): field 'aggregate_score'"):
        outcome_report(bad, principals, agents, resolved)
    bad.loc[1, "status"] = "done"  # an earlier field of the same row
    with pytest.raises(ReportInputError, match=r"^runs row 1 \(run_id='r2'\): field 'status' = 'done'"):
        outcome_report(bad, principals, agents, resolved)
    bad = principals.astype(object)
    bad.loc[3, "kind"] = "robot"
    bad.loc[3, "principal_id"] = bad.loc[2, "principal_id"]  # duplicate, checked before kind
    with pytest.raises(ReportInputError, match=r"^principals row 3: duplicate principal 'buyer' in run 'r2'"):
        outcome_report(runs, bad, agents, resolved)
    bad = agents.copy()
    bad.loc[5, "model"] = 7
    bad.loc[5, "principal_id"] = "landlord"  # checked before model
    with pytest.raises(ReportInputError, match=r"^agents row 5 .*principal_id 'landlord' is not a principal"):
        outcome_report(runs, principals, bad, resolved)


def test_every_missing_marker_and_number_type_is_read_alike(runs, principals, agents, resolved):
    """None, NaN, pd.NA and NaT are missing; numpy and Python numbers are numbers; 0 and 1 are flags."""
    want = outcome_report(runs, principals, agents, resolved, by="family")
    other = principals.astype(object)
    other["score"] = [pd.NA if v != v else np.float32(v) if i % 2 else v for i, v in enumerate(principals["score"])]
    other["success"] = [pd.NaT if v is None else int(v) if i % 3 == 0 else np.bool_(v)
                        for i, v in enumerate(principals["success"])]
    got = outcome_report(runs, other, agents, resolved, by="family")
    pd.testing.assert_frame_equal(got.drop(columns=["mean_principal_score"]),
                                  want.drop(columns=["mean_principal_score"]), check_exact=True)
    assert np.allclose(got["mean_principal_score"], want["mean_principal_score"], equal_nan=True)


def test_means_are_correctly_rounded():
    runs = pd.DataFrame([("r1", "s", "f", None, "completed", 1.0)], columns=list(RUN_COLUMNS))
    principals = pd.DataFrame([("r1", f"p{i}", None, None, s, {"m": s}) for i, s in enumerate([0.1, 0.2, 0.3])],
                              columns=list(PRINCIPAL_COLUMNS))
    agents = pd.DataFrame(columns=list(AGENT_COLUMNS))
    labels = pd.DataFrame(columns=list(LABEL_COLUMNS))
    rep = outcome_report(runs, principals, agents, labels, by="family")
    # the sum is correctly rounded (0.6, where adding in order gives 0.6000000000000001), then
    # divided: 0.6 / 3 = 0.19999999999999998, not (0.1 + 0.2 + 0.3) / 3 = 0.20000000000000004
    assert rep["mean_principal_score"].tolist() == [0.6 / 3] == [0.19999999999999998]
    assert rep["metric:m"].tolist() == [0.6 / 3]
    assert rep["principal_unknown"].tolist() == [0] and rep["principal_success_rate"].tolist() == [0.0]
