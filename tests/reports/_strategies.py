"""Generated report input for the property tests: small corpora of runs, principals, agents,
raw labels, submissions and gold runs with missing, NaN and non-numeric scores, booleans and 0/1
numbers as flags, unknown principals and agents, duplicates, empty and single runs, ties, unicode
ids and (with ``bad=True``) a small chance of a malformed value in any field."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from app.reports import outcomes

NAN = math.nan
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RUN_IDS = ["r1", "r2", "r3", "r 4", "run-ü", "r10"]
SCENARIOS = ["commerce/car/1", "crm/ticket/1", "légal/nda/ß"]
FAMILIES = ["commerce", "crm", "légal", "Zeta", "alpha"]
PIDS = ["buyer", "seller", "vendor", "Ärztin"]
AIDS = ["buyer_agent", "seller_agent", "helper", "агент"]
MODELS = ["model-a", "model-b", "Model-C", "模型", None, NAN]
ROLES = ["buyer", "seller", "assistant", "B", None, NAN]
MODES = ["CF1", "CF2", "GR3", "DD5", "VF1"]
CATS = {"CF1": "CF", "CF2": "CF", "GR3": "GR", "DD5": "DD", "VF1": "VF"}
ANNOTATORS = ["alice", "bob", "carol", "judge-l2", "ädmin"]


def rare(good, bad, p_bad: float = 0.04):
    """``good`` values, with a small chance of one of ``bad`` (malformed input)."""
    if not bad:
        return good
    return st.one_of(*([good] * int(1 / p_bad)), st.sampled_from(bad))


SCORES = st.sampled_from([None, NAN, 0.0, 0.2, 0.5, 0.49999999999999994, 0.7, 1.0, 1, 0, 0.1 + 0.2,
                          1e-300, np.float64(0.55), np.int64(1), 1 / 3])
FLAGS = st.sampled_from([True, False, None, NAN, np.bool_(True), np.bool_(False), 1, 0, 1.0, 0.0])
METRICS = st.sampled_from([
    None, NAN, {}, {"surplus": -640.0, "violations": ["x"]}, {"surplus": 640.0}, {"surplus": 100},
    {"surplus": 0.1, "rounds": 3}, {"rounds": 5, "note": "late"}, {"deal_closed": True, "surplus": -100.0},
    {"surplus": NAN}, {"surplus": math.inf}, {"rounds": np.int64(7)}, {"rounds": 1 / 3, "ü": 2.5},
    {"rounds": np.bool_(True)}, {3: 1.5},
])


@st.composite
def corpora(draw, bad: bool = True, p_bad: float = 0.04):
    """(runs, principals, agents, raw labels, submissions, gold runs) frames."""
    def b(values):
        return values if bad else []

    def rare_(good, bad_values):
        return rare(good, bad_values, p_bad)

    n_runs = draw(st.integers(0, 5))
    run_ids = draw(st.lists(st.sampled_from(RUN_IDS), min_size=n_runs, max_size=n_runs, unique=True))
    runs = []
    for rid in run_ids:
        runs.append((
            draw(rare_(st.just(rid), b(["", 5, None]))),
            draw(rare_(st.sampled_from(SCENARIOS), b([None]))),
            draw(rare_(st.sampled_from(FAMILIES), b([3.5]))),
            draw(rare_(st.sampled_from([*outcomes.ALIGNMENTS, None, NAN]), b(["hostile"]))),
            draw(rare_(st.sampled_from(outcomes.STATUSES), b(["done", None]))),
            draw(rare_(SCORES, b(["high", True]))),
        ))
    if bad and runs and draw(st.integers(0, 30)) == 0:
        runs.append(runs[0])  # duplicate run id
    principals, agents = [], []
    for rid in run_ids:
        pids = draw(st.lists(st.sampled_from(PIDS), max_size=3, unique=True))
        for pid in pids:
            principals.append((
                draw(rare_(st.just(rid), b(["nowhere"]))),
                pid,
                draw(rare_(st.sampled_from([*outcomes.PRINCIPAL_KINDS, None, NAN]), b(["robot"]))),
                draw(rare_(FLAGS, b(["yes", 2]))),
                draw(rare_(SCORES, b(["0.5", False]))),
                draw(rare_(METRICS, b(["surplus=3", ["a"]]))),
            ))
        if bad and pids and draw(st.integers(0, 30)) == 0:
            principals.append(principals[-1])  # duplicate principal
        aids = draw(st.lists(st.sampled_from(AIDS), max_size=3, unique=True))
        for aid in aids:
            if not pids:
                break
            agents.append((
                rid, aid,
                draw(rare_(st.sampled_from(pids), b(["landlord"]))),
                draw(rare_(st.sampled_from(ROLES), b([7]))),
                draw(st.sampled_from(MODELS)),
                draw(rare_(st.sampled_from(["hx", "hy", "Hz", None]), b([1.5]))),
            ))
    agent_ids = {(a[0], a[1]) for a in agents}
    labels = []
    for _ in range(draw(st.integers(0, 14))):
        if not run_ids:
            break
        rid = draw(rare_(st.sampled_from(run_ids), b(["nowhere"])))
        mode = draw(rare_(st.sampled_from(MODES), b([""])))
        run_agents = sorted(a for r, a in agent_ids if r == rid)
        agent = draw(st.sampled_from([*run_agents, None, None] if run_agents else [None]))
        if bad and draw(st.integers(0, 25)) == 0:
            agent = "ghost_agent"
        cat = CATS.get(mode) if draw(st.integers(0, 6)) else draw(st.sampled_from([None, "XX"]))
        labels.append((rid, draw(rare_(st.sampled_from([*ANNOTATORS, None]), b([4]))), mode, cat, agent,
                       draw(rare_(st.sampled_from(outcomes.LABEL_SOURCES), b(["robot"])))))
    subs = sorted({(r, a) for r in run_ids for a in ANNOTATORS[:3] if draw(st.integers(0, 2)) == 0})
    gold = sorted(r for r in run_ids if draw(st.integers(0, 3)) == 0)

    def frame(rows, columns):
        df = pd.DataFrame(rows, columns=list(columns))
        if draw(st.integers(0, 4)) == 0:
            df = df.astype(object)  # the same values without pandas' type inference
        return df

    return (frame(runs, outcomes.RUN_COLUMNS), frame(principals, outcomes.PRINCIPAL_COLUMNS),
            frame(agents, outcomes.AGENT_COLUMNS), frame(labels, outcomes.LABEL_COLUMNS),
            frame(subs, outcomes.SUBMISSION_COLUMNS), gold)


SOURCES = st.sampled_from(["auto", "gold", "majority", "annotator:alice", "annotator:judge-l2",
                           "annotator:nobody", "annotator:", "bogus"])
OPTIONS = st.fixed_dictionaries({
    "modes": st.sampled_from([None, ["CF1", "GR3"], ["CF1", "CF1", "ZZ9"], [], "CF1", ["CF1", ""]]),
    "mode_category": st.sampled_from([None, {"CF1": "CF", "GR3": "GR", "ZZ9": "ZZ"}, {"CF1": "XX"},
                                      {m: c for m, c in CATS.items()}, ["CF1"]]),
    "threshold": st.sampled_from([0.5, 0.0, 1.0, 0.3, 1, np.float64(0.7), NAN, "0.5", True]),
})
