"""A small hand-made corpus: 6 runs, 13 agent-runs, 12 principal-runs, gold + human + judge labels.

Thresholds are 0.5 unless a test says otherwise.  The hand-worked facts used by every test:

run  family    alignment    status     agg   agg success (completed and agg >= 0.5)
r1   commerce  competitive  completed  1.0   yes
r2   commerce  competitive  completed  0.8   yes
r3   crm       cooperative  completed  0.4   no  (0.4 < 0.5)
r4   crm       mixed        failed     0.9   no  (status is not completed)
r5   legal     (none)       completed  NaN   no  (no score)
r6   legal     competitive  completed  0.5   yes (0.5 >= 0.5, boundary)

principal (run)    kind  flag   score  -> own success   numeric metrics
buyer (r1)         pers  False  0.20   F                surplus -640 (violations list ignored)
seller (r1)        org   True   0.90   T                surplus 640
buyer (r2)         pers  None   0.70   T (0.70>=0.5)    surplus 100 (int)
seller (r2)        org   None   0.30   F (0.30<0.5)     surplus -100 (bool deal_closed ignored)
client (r3)        pers  True   NaN    T                -
vendor (r3)        org   None   NaN    unknown          -
client (r4)        pers  None   0.50   T (boundary)     rounds 5
vendor (r4)        org   False  0.10   F                rounds 3 (string note ignored)
plaintiff (r5)     pers  True   1.00   T                -
defendant (r5)     org   False  0.00   F                -
buyer (r6)         pers  True   0.60   T                surplus NaN (ignored)
seller (r6)        org   True   0.55   T                -

agents (run: id -> principal, role, model, harness)
r1: buyer_agent -> buyer, buyer, model-a, hx      seller_agent -> seller, seller, model-b, hx
r2: buyer_agent -> buyer, buyer, model-b, hx      seller_agent -> seller, seller, model-a, hy
r3: client_agent -> client, client, model-a, hx   vendor_agent -> vendor, vendor, model-a, hx
r4: client_agent -> client, client, model-a, hx   vendor_agent -> vendor, vendor, model-b, hy
    helper_agent -> vendor, assistant, model-c, hx
r5: plaintiff_agent -> plaintiff, counsel, model-b, hx   defendant_agent -> defendant, counsel, model-b, hx
r6: buyer_agent -> buyer, buyer, model-a, hx      seller_agent -> seller, seller, model-a, hx

gold runs: r1 (labels CF1 + CF3 on buyer_agent), r6 (gold, no labels = no failure)
submissions: r1 alice bob; r2 alice bob carol; r3 alice bob; r4 alice; r6 alice
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from app.reports.outcomes import AGENT_COLUMNS, LABEL_COLUMNS, PRINCIPAL_COLUMNS, RUN_COLUMNS, resolve_labels

NAN = math.nan
HX, HY = "harness-x", "harness-y"
A, B, C = "model-a", "model-b", "model-c"


def make_runs() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("r1", "commerce/car/1", "commerce", "competitive", "completed", 1.0),
            ("r2", "commerce/car/1", "commerce", "competitive", "completed", 0.8),
            ("r3", "crm/ticket/1", "crm", "cooperative", "completed", 0.4),
            ("r4", "crm/ticket/2", "crm", "mixed", "failed", 0.9),
            ("r5", "legal/nda/1", "legal", None, "completed", NAN),
            ("r6", "legal/nda/2", "legal", "competitive", "completed", 0.5),
        ],
        columns=list(RUN_COLUMNS),
    )


def make_principals() -> pd.DataFrame:
    return pd.DataFrame(
        [
            (
                "r1",
                "buyer",
                "person",
                False,
                0.2,
                {"surplus": -640.0, "violations": ["signed_without_approval"]},
            ),
            ("r1", "seller", "organization", True, 0.9, {"surplus": 640.0}),
            ("r2", "buyer", "person", None, 0.7, {"surplus": 100}),
            ("r2", "seller", "organization", None, 0.3, {"surplus": -100.0, "deal_closed": True}),
            ("r3", "client", "person", True, NAN, None),
            ("r3", "vendor", "organization", None, NAN, {}),
            ("r4", "client", "person", None, 0.5, {"rounds": 5}),
            ("r4", "vendor", "organization", False, 0.1, {"rounds": 3, "note": "late"}),
            ("r5", "plaintiff", "person", True, 1.0, None),
            ("r5", "defendant", "organization", False, 0.0, None),
            ("r6", "buyer", "person", True, 0.6, {"surplus": NAN}),
            ("r6", "seller", "organization", True, 0.55, None),
        ],
        columns=list(PRINCIPAL_COLUMNS),
    )


def make_agents() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("r1", "buyer_agent", "buyer", "buyer", A, HX),
            ("r1", "seller_agent", "seller", "seller", B, HX),
            ("r2", "buyer_agent", "buyer", "buyer", B, HX),
            ("r2", "seller_agent", "seller", "seller", A, HY),
            ("r3", "client_agent", "client", "client", A, HX),
            ("r3", "vendor_agent", "vendor", "vendor", A, HX),
            ("r4", "client_agent", "client", "client", A, HX),
            ("r4", "vendor_agent", "vendor", "vendor", B, HY),
            ("r4", "helper_agent", "vendor", "assistant", C, HX),
            ("r5", "plaintiff_agent", "plaintiff", "counsel", B, HX),
            ("r5", "defendant_agent", "defendant", "counsel", B, HX),
            ("r6", "buyer_agent", "buyer", "buyer", A, HX),
            ("r6", "seller_agent", "seller", "seller", A, HX),
        ],
        columns=list(AGENT_COLUMNS),
    )


def make_raw_labels() -> pd.DataFrame:
    return pd.DataFrame(
        [
            # gold for r1 (adjudicated); r6 is gold with no labels
            ("r1", "adjudicator", "CF3", "CF", "buyer_agent", "gold"),
            ("r1", "adjudicator", "CF1", "CF", "buyer_agent", "gold"),
            # humans on r1 (overridden by gold in "auto")
            ("r1", "alice", "CF3", "CF", "buyer_agent", "human"),
            ("r1", "bob", "GR3", "GR", "seller_agent", "human"),
            # r2: 3 submitters -> majority needs >= 2 of 3
            ("r2", "alice", "GR3", "GR", "seller_agent", "human"),
            ("r2", "alice", "CF2", "CF", "buyer_agent", "human"),
            ("r2", "bob", "GR3", "GR", "seller_agent", "human"),
            ("r2", "carol", "GR3", "GR", "seller_agent", "human"),
            ("r2", "carol", "CF2", "CF", "buyer_agent", "human"),
            ("r2", "carol", "VF1", "VF", "buyer_agent", "human"),
            # r3: 2 submitters -> majority needs 2 of 2; GR1 is a 1-1 tie
            ("r3", "alice", "DD5", "DD", "vendor_agent", "human"),
            ("r3", "bob", "DD5", "DD", "vendor_agent", "human"),
            ("r3", "bob", "GR1", "GR", "client_agent", "human"),
            # r4: bob's label is a draft (bob did not submit r4); alice submitted "no failure"
            ("r4", "bob", "DD1", "DD", "client_agent", "human"),
            # r5: judge only
            ("r5", "judge-l2", "VF3", "VF", "plaintiff_agent", "judge"),
            # r6: human label, overridden by gold (no failure)
            ("r6", "alice", "CF4", "CF", "seller_agent", "human"),
        ],
        columns=list(LABEL_COLUMNS),
    )


def make_submissions() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("r1", "alice"),
            ("r1", "bob"),
            ("r2", "alice"),
            ("r2", "bob"),
            ("r2", "carol"),
            ("r3", "alice"),
            ("r3", "bob"),
            ("r4", "alice"),
            ("r6", "alice"),
        ],
        columns=["run_id", "annotator"],
    )


GOLD_RUNS = ("r1", "r6")
ALL_RUNS = ("r1", "r2", "r3", "r4", "r5", "r6")


@pytest.fixture
def runs() -> pd.DataFrame:
    return make_runs()


@pytest.fixture
def principals() -> pd.DataFrame:
    return make_principals()


@pytest.fixture
def agents() -> pd.DataFrame:
    return make_agents()


@pytest.fixture
def raw_labels() -> pd.DataFrame:
    return make_raw_labels()


@pytest.fixture
def submissions() -> pd.DataFrame:
    return make_submissions()


@pytest.fixture
def resolved() -> pd.DataFrame:
    frame, _ = resolve_labels(make_raw_labels(), make_submissions(), GOLD_RUNS, run_ids=ALL_RUNS)
    return frame


def assert_rows(frame: pd.DataFrame, columns: list[str], rows: list[tuple]) -> None:
    """Compare a report to hand-worked rows; None stands for NaN/missing, floats to 1e-12."""
    from app.reports.outcomes import to_records

    assert list(frame.columns) == columns
    got = to_records(frame)
    assert len(got) == len(rows), [tuple(r.values()) for r in got]
    for g, exp in zip(got, rows):
        assert len(exp) == len(columns)
        for col, e in zip(columns, exp):
            v = g[col]
            if isinstance(e, float):
                assert v == pytest.approx(e, abs=1e-12), (col, tuple(g.values()))
            else:
                assert v == e and type(v) is type(e), (col, v, e, tuple(g.values()))
