"""Label-source resolution: gold > human majority > none, the tie rule, single annotators."""

from __future__ import annotations

import pandas as pd
import pytest

from app.reports.outcomes import RESOLVED_LABEL_COLUMNS, ReportInputError, resolve_labels

from .conftest import ALL_RUNS, GOLD_RUNS, assert_rows

COLS = list(RESOLVED_LABEL_COLUMNS)


def test_auto_prefers_gold_then_majority_then_none(raw_labels, submissions):
    frame, summary = resolve_labels(raw_labels, submissions, GOLD_RUNS, run_ids=ALL_RUNS)
    # r1 gold: CF1 + CF3 on buyer_agent (alice's CF3 / bob's GR3 ignored)
    # r2 majority of 3: GR3 seller 3/3 = 1.0 kept; CF2 buyer 2/3 kept (2*2 > 3); VF1 1/3 dropped
    # r3 majority of 2: DD5 vendor 2/2 kept; GR1 client 1/2 is a tie -> dropped (2*1 > 2 is false)
    # r4 alice submitted nothing; bob's DD1 is a draft (bob did not submit r4) -> no failure
    # r5 judge only -> unlabelled;  r6 gold without labels -> no failure (alice's CF4 ignored)
    assert_rows(
        frame,
        COLS,
        [
            ("r1", "CF1", "CF", "buyer_agent", "gold", 1.0),
            ("r1", "CF3", "CF", "buyer_agent", "gold", 1.0),
            ("r2", "CF2", "CF", "buyer_agent", "majority", 2 / 3),
            ("r2", "GR3", "GR", "seller_agent", "majority", 1.0),
            ("r3", "DD5", "DD", "vendor_agent", "majority", 1.0),
        ],
    )
    assert summary == "gold for 2 runs, human majority for 3 runs, unlabelled 1 run"
    assert frame.attrs["labelled_runs"] == ["r1", "r2", "r3", "r4", "r6"]
    assert frame.attrs["label_source"] == summary


def test_default_universe_is_every_run_mentioned(raw_labels, submissions):
    # gold_runs {r1, r6} | submitted {r1, r2, r3, r4, r6} | labelled {r1..r6} = 6 runs
    _, summary = resolve_labels(raw_labels, submissions, pd.Series(list(GOLD_RUNS)))
    assert summary == "gold for 2 runs, human majority for 3 runs, unlabelled 1 run"


def test_gold_label_marks_run_gold_even_without_gold_runs(raw_labels, submissions):
    # no gold_runs: r1 still gold (it has gold labels); r6 now falls to alice alone: CF4 1/1 kept
    frame, summary = resolve_labels(raw_labels, submissions, None, run_ids=ALL_RUNS)
    assert summary == "gold for 1 run, human majority for 4 runs, unlabelled 1 run"
    r6 = frame[frame.run_id == "r6"]
    assert list(zip(r6["mode"], r6["agent"], r6["source"], r6["support"])) == [
        ("CF4", "seller_agent", "majority", 1.0)
    ]


def test_gold_only_source(raw_labels, submissions):
    frame, summary = resolve_labels(raw_labels, submissions, GOLD_RUNS, source="gold", run_ids=ALL_RUNS)
    assert summary == "gold for 2 runs, unlabelled 4 runs"
    assert list(zip(frame.run_id, frame["mode"])) == [("r1", "CF1"), ("r1", "CF3")]
    assert frame.attrs["labelled_runs"] == ["r1", "r6"]


def test_majority_only_source_ignores_gold(raw_labels, submissions):
    frame, summary = resolve_labels(raw_labels, submissions, GOLD_RUNS, source="majority", run_ids=ALL_RUNS)
    # r1: alice CF3 1/2 and bob GR3 1/2 are ties -> none; r6: alice alone, CF4 1/1 kept
    assert summary == "human majority for 5 runs, unlabelled 1 run"
    assert list(zip(frame.run_id, frame["mode"], frame.agent)) == [
        ("r2", "CF2", "buyer_agent"),
        ("r2", "GR3", "seller_agent"),
        ("r3", "DD5", "vendor_agent"),
        ("r6", "CF4", "seller_agent"),
    ]


def test_single_human_annotator_ignores_drafts(raw_labels, submissions):
    frame, summary = resolve_labels(
        raw_labels, submissions, GOLD_RUNS, source="annotator:bob", run_ids=ALL_RUNS
    )
    # bob submitted r1, r2, r3; his r4 DD1 is a draft and does not count
    assert summary == "annotator bob for 3 runs, unlabelled 3 runs"
    assert_rows(
        frame,
        COLS,
        [
            ("r1", "GR3", "GR", "seller_agent", "annotator:bob", 1.0),
            ("r2", "GR3", "GR", "seller_agent", "annotator:bob", 1.0),
            ("r3", "DD5", "DD", "vendor_agent", "annotator:bob", 1.0),
            ("r3", "GR1", "GR", "client_agent", "annotator:bob", 1.0),
        ],
    )
    assert frame.attrs["labelled_runs"] == ["r1", "r2", "r3"]


def test_single_annotator_counts_submitted_no_failure_runs(raw_labels, submissions):
    frame, summary = resolve_labels(
        raw_labels, submissions, GOLD_RUNS, source="annotator:alice", run_ids=ALL_RUNS
    )
    # alice submitted r1, r2, r3, r4 (empty), r6
    assert summary == "annotator alice for 5 runs, unlabelled 1 run"
    assert frame.attrs["labelled_runs"] == ["r1", "r2", "r3", "r4", "r6"]
    assert list(zip(frame.run_id, frame["mode"])) == [
        ("r1", "CF3"),
        ("r2", "CF2"),
        ("r2", "GR3"),
        ("r3", "DD5"),
        ("r6", "CF4"),
    ]


def test_single_judge_annotator(raw_labels, submissions):
    frame, summary = resolve_labels(
        raw_labels, submissions, GOLD_RUNS, source="annotator:judge-l2", run_ids=ALL_RUNS
    )
    assert summary == "annotator judge-l2 for 1 run, unlabelled 5 runs"
    assert list(zip(frame.run_id, frame["mode"], frame.agent)) == [("r5", "VF3", "plaintiff_agent")]


def _votes(rows, submitters):
    labels = pd.DataFrame(
        [("x", who, mode, None, agent, "human") for who, mode, agent in rows],
        columns=["run_id", "annotator", "mode", "category", "agent", "source"],
    )
    subs = pd.DataFrame([("x", s) for s in submitters], columns=["run_id", "annotator"])
    return resolve_labels(labels, subs)


def test_tie_rule_half_is_not_a_majority():
    # 4 submitters: GR1 by 2 (2*2 > 4 false -> dropped), CF3 by 3 (6 > 4 -> kept, support 0.75)
    frame, summary = _votes(
        [("a", "GR1", "x1"), ("b", "GR1", "x1"), ("a", "CF3", "x2"), ("b", "CF3", "x2"), ("c", "CF3", "x2")],
        ["a", "b", "c", "d"],
    )
    assert list(zip(frame["mode"], frame.support)) == [("CF3", 0.75)]
    assert summary == "gold for 0 runs, human majority for 1 run, unlabelled 0 runs"


def test_same_pair_needs_same_agent_and_counts_an_annotator_once():
    # a labels GR3/x1 twice (two pieces of evidence) -> still one vote of 3 -> dropped.
    # GR3/x2 by b and c -> 2 of 3 kept; a's GR3 on x1 is a different pair.
    frame, _ = _votes(
        [("a", "GR3", "x1"), ("a", "GR3", "x1"), ("b", "GR3", "x2"), ("c", "GR3", "x2")],
        ["a", "b", "c"],
    )
    assert list(zip(frame["mode"], frame.agent, frame.support)) == [("GR3", "x2", 2 / 3)]


def test_labels_without_agent_are_kept_as_their_own_pair():
    frame, _ = _votes([("a", "1.3", None), ("b", "1.3", None)], ["a", "b"])
    assert frame["agent"].tolist() == [None]


def test_run_ids_restricts_and_extends_universe(raw_labels, submissions):
    frame, summary = resolve_labels(raw_labels, submissions, GOLD_RUNS, run_ids=["r1", "r2", "r7"])
    assert summary == "gold for 1 run, human majority for 1 run, unlabelled 1 run"
    assert sorted(set(frame.run_id)) == ["r1", "r2"]


def test_empty_inputs_give_empty_frame():
    labels = pd.DataFrame(columns=["run_id", "annotator", "mode", "category", "agent", "source"])
    subs = pd.DataFrame(columns=["run_id", "annotator"])
    frame, summary = resolve_labels(labels, subs, [])
    assert list(frame.columns) == COLS and len(frame) == 0
    assert summary == "gold for 0 runs, human majority for 0 runs, unlabelled 0 runs"


def test_bad_source_and_bad_rows_are_named(raw_labels, submissions):
    with pytest.raises(ReportInputError, match="source must be"):
        resolve_labels(raw_labels, submissions, GOLD_RUNS, source="best")
    with pytest.raises(ReportInputError, match="annotator name"):
        resolve_labels(raw_labels, submissions, GOLD_RUNS, source="annotator:")
    bad = raw_labels.copy()
    bad.loc[3, "source"] = "robot"
    with pytest.raises(ReportInputError, match=r"labels row 3 \(run_id='r1'\): field 'source' = 'robot'"):
        resolve_labels(bad, submissions, GOLD_RUNS)
    with pytest.raises(ReportInputError, match="submissions: missing column"):
        resolve_labels(raw_labels, submissions.rename(columns={"annotator": "user"}), GOLD_RUNS)
    with pytest.raises(ReportInputError, match="gold_runs"):
        resolve_labels(raw_labels, submissions, "r1")


def test_gold_labels_need_no_annotator_but_human_labels_do(raw_labels, submissions):
    labels = raw_labels.copy()
    labels.loc[0, "annotator"] = None  # r1 gold CF3
    frame, _ = resolve_labels(labels, submissions, GOLD_RUNS, run_ids=ALL_RUNS)
    assert list(frame[frame.run_id == "r1"]["mode"]) == ["CF1", "CF3"]
    labels.loc[2, "annotator"] = None  # r1 alice (human)
    with pytest.raises(ReportInputError, match=r"labels row 2 \(run_id='r1'\): field 'annotator'"):
        resolve_labels(labels, submissions, GOLD_RUNS)


def test_conflicting_categories_for_one_mode_are_an_error(raw_labels, submissions):
    bad = raw_labels.copy()
    bad.loc[7, "category"] = "VF"  # carol's GR3 on r2 now says category VF
    with pytest.raises(ReportInputError, match="run 'r2' mode 'GR3'.*conflicting categories"):
        resolve_labels(bad, submissions, GOLD_RUNS)
