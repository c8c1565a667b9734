"""A small hand-built set of annotations whose agreement is worked out by hand.

Runs r1..r3 (family commerce) and r4 (family travel); agents buyer_agent / seller_agent; events
0..4.  Submitted annotations under a2-failures (latest):

    run  a                         b                       c
    r1   CF1 buyer  [1, 2]         CF1 buyer  [2]          CF1 seller [2, 3]
    r2   CF1 buyer  [1]            no failure              GR1 seller [4]
    r3   no failure                no failure              no failure
    r4   GR1 seller [3]            GR1 seller [3]          (draft only: missing)

plus noise that must not count: d's draft on r1, a's annotation of r3 under MAST, and the
judge `judge:judge-l2` (an audit on r1: CF1 buyer [1]) unless judges are included.

Hand-worked values (run level, mode CF1): per-unit pair agreement r1 1, r2 1/3, r3 1, r4 1 ->
percent 10/12; category shares pi_1 = (1 + 1/3 + 0 + 0) / 4 = 1/3 -> Fleiss p_e = 5/9, kappa
(5/6 - 5/9) / (4/9) = 0.625; AC1 p_e = 2 (1/3)(2/3) = 4/9 -> (5/6 - 4/9) / (5/9) = 0.7;
coincidences o11 = 3, o10 = o01 = 1, o00 = 6, n = 11, n_1 = 4, n_0 = 7 -> alpha
1 - 10 * 2 / (2 * 4 * 7) = 9/14; pairwise Cohen (a,b) 0.5, (a,c) 0.4, (b,c) 1 -> mean 19/30;
prevalence 4/11.  Blame: 4 pairs marked the same (run, mode), 2 name the same agent -> 0.5.
Evidence overlap: 1/2, 1/3, 1/2, 1 -> 7/12.  Agent level CF1 percent: units r1-buyer 1/3,
r1-seller 1/3, r2-buyer 1/3, the other five 1 -> 6/8.
"""
from __future__ import annotations

import pandas as pd
from sqlmodel import Session

from app.annotations.service import save_annotation
from app.taxonomies.service import latest
from tests.annotations.factories import make_run, make_user

CF1 = "CF1"
LABELS = {
    ("a", "r1"): [("CF1", "buyer_agent", [1, 2])],
    ("b", "r1"): [("CF1", "buyer_agent", [2])],
    ("c", "r1"): [("CF1", "seller_agent", [2, 3])],
    ("a", "r2"): [("CF1", "buyer_agent", [1])],
    ("b", "r2"): [],
    ("c", "r2"): [("GR1", "seller_agent", [4])],
    ("a", "r3"): [],
    ("b", "r3"): [],
    ("c", "r3"): [],
    ("a", "r4"): [("GR1", "seller_agent", [3])],
    ("b", "r4"): [("GR1", "seller_agent", [3])],
}


def build(session: Session) -> dict:
    """Create the runs, users and annotations above; returns {name: User} (also `rev`, `ann`)."""
    runs = {
        "r1": make_run(session, "r1", audits=[{"source": "judge-l2", "mode": "CF1", "agent": "buyer_agent",
                                               "evidence": [1]}]),
        "r2": make_run(session, "r2"),
        "r3": make_run(session, "r3"),
        "r4": make_run(session, "r4", family="travel"),
    }
    users = {n: make_user(session, n, password=None) for n in ("a", "b", "c", "d", "ann")}
    users["rev"] = make_user(session, "rev", role="reviewer", password=None)
    tax = latest(session, "a2-failures")
    mast = latest(session, "mast")
    for (name, run_id), labs in LABELS.items():
        save_annotation(session, users[name], runs[run_id], tax,
                        [{"mode": m, "agent": ag, "evidence": ev} for m, ag, ev in labs],
                        no_failure=not labs, status="submitted")
    save_annotation(session, users["c"], runs["r4"], tax, [{"mode": "GR1", "agent": "seller_agent"}], status="draft")
    save_annotation(session, users["d"], runs["r1"], tax, [{"mode": "DD1", "agent": "buyer_agent"}], status="draft")
    save_annotation(session, users["a"], runs["r3"], mast,
                    [{"mode": mast.definition["modes"][0]["code"], "agent": "buyer_agent", "evidence": [0]}],
                    status="submitted")
    session.commit()
    return users


def frames(family: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The same data written out by hand as the pure module's frames (labels, submissions, agents)."""
    runs = ["r1", "r2", "r3"] + ([] if family == "commerce" else ["r4"])
    labels = [(a, r, m, ag, ev) for (a, r), labs in LABELS.items() if r in runs for m, ag, ev in labs]
    subs = [(a, r) for (a, r) in LABELS if r in runs]
    agents = [(r, ag) for r in runs for ag in ("buyer_agent", "seller_agent")]
    return (pd.DataFrame(labels, columns=["annotator", "run_id", "mode", "agent", "evidence"]),
            pd.DataFrame(subs, columns=["annotator", "run_id"]),
            pd.DataFrame(agents, columns=["run_id", "agent_id"]))
