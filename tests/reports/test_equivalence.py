"""The columnar reports against the row-by-row ones they replaced (tests/reports/legacy_outcomes.py).

For generated input (missing, NaN and non-numeric scores, booleans and 0/1 numbers as flags,
unknown principals and agents, duplicates, empty and single runs, ties, unicode ids, bad values)
every public function must give the same frame (columns, dtypes, values bit for bit, attrs) or
raise the same error with the same message.  The demo corpus in the database is compared in
tests/reports_db/test_reports_equivalence.py.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.reports import outcomes as new
from tests.reports import legacy_outcomes as old

from .conftest import GOLD_RUNS, make_agents, make_principals, make_raw_labels, make_runs, make_submissions

NAN = math.nan
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _outcome(module, fn: str, *args, **kwargs):
    """('ok', result) or ('error', class name, message) of ``module.fn(*args, **kwargs)``; the frames
    are copied so that neither implementation can see what the other did to them."""
    args = tuple(a.copy() if isinstance(a, pd.DataFrame) else a for a in args)
    try:
        return ("ok", getattr(module, fn)(*args, **kwargs))
    except (ValueError, TypeError, KeyError) as exc:
        return ("error", type(exc).__name__, str(exc))


def _frame_text(frame: pd.DataFrame) -> str:
    """Everything that is observable about a report frame, as text that differs when any float
    differs in its last bit (json writes the shortest repr that round-trips)."""
    return json.dumps({
        "columns": [str(c) for c in frame.columns],
        "dtypes": [str(t) for t in frame.dtypes],
        "index": [str(i) for i in frame.index],
        "attrs": old._json_safe(dict(frame.attrs)),
        "rows": old.to_records(frame),
        "types": [[type(v).__name__ for v in row] for row in frame.itertuples(index=False, name=None)],
    })


def _same_value(a, b) -> bool:
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and _frame_text(a) == _frame_text(b)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return json.dumps(old._json_safe(a)) == json.dumps(old._json_safe(b)) and type(a) is type(b)


def assert_same(fn: str, *args, **kwargs):
    """Call ``fn`` in both implementations; assert the same result or the same error; return it."""
    got = _outcome(new, fn, *args, **kwargs)
    want = _outcome(old, fn, *args, **kwargs)
    if want[0] == "error" or got[0] == "error":
        assert got == want, (fn, got, want)
        return None
    assert _same_value(got[1], want[1]), (fn, kwargs, got[1], want[1])
    if isinstance(got[1], pd.DataFrame):
        pd.testing.assert_frame_equal(got[1], want[1], check_exact=True)
    return got[1]


# --------------------------------------------------------------------------------------------
# generated corpora

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
def corpora(draw, bad: bool = True):
    """(runs, principals, agents, raw labels, submissions, gold runs) frames."""
    def b(values):
        return values if bad else []

    n_runs = draw(st.integers(0, 5))
    run_ids = draw(st.lists(st.sampled_from(RUN_IDS), min_size=n_runs, max_size=n_runs, unique=True))
    runs = []
    for rid in run_ids:
        runs.append((
            draw(rare(st.just(rid), b(["", 5, None]))),
            draw(rare(st.sampled_from(SCENARIOS), b([None]))),
            draw(rare(st.sampled_from(FAMILIES), b([3.5]))),
            draw(rare(st.sampled_from([*old.ALIGNMENTS, None, NAN]), b(["hostile"]))),
            draw(rare(st.sampled_from(old.STATUSES), b(["done", None]))),
            draw(rare(SCORES, b(["high", True]))),
        ))
    if bad and runs and draw(st.integers(0, 30)) == 0:
        runs.append(runs[0])  # duplicate run id
    principals, agents = [], []
    for rid in run_ids:
        pids = draw(st.lists(st.sampled_from(PIDS), max_size=3, unique=True))
        for pid in pids:
            principals.append((
                draw(rare(st.just(rid), b(["nowhere"]))),
                pid,
                draw(rare(st.sampled_from([*old.PRINCIPAL_KINDS, None, NAN]), b(["robot"]))),
                draw(rare(FLAGS, b(["yes", 2]))),
                draw(rare(SCORES, b(["0.5", False]))),
                draw(rare(METRICS, b(["surplus=3", ["a"]]))),
            ))
        if bad and pids and draw(st.integers(0, 30)) == 0:
            principals.append(principals[-1])  # duplicate principal
        aids = draw(st.lists(st.sampled_from(AIDS), max_size=3, unique=True))
        for aid in aids:
            if not pids:
                break
            agents.append((
                rid, aid,
                draw(rare(st.sampled_from(pids), b(["landlord"]))),
                draw(rare(st.sampled_from(ROLES), b([7]))),
                draw(st.sampled_from(MODELS)),
                draw(rare(st.sampled_from(["hx", "hy", "Hz", None]), b([1.5]))),
            ))
    agent_ids = {(a[0], a[1]) for a in agents}
    labels = []
    for _ in range(draw(st.integers(0, 14))):
        if not run_ids:
            break
        rid = draw(rare(st.sampled_from(run_ids), b(["nowhere"])))
        mode = draw(rare(st.sampled_from(MODES), b([""])))
        run_agents = sorted(a for r, a in agent_ids if r == rid)
        agent = draw(st.sampled_from([*run_agents, None, None] if run_agents else [None]))
        if bad and draw(st.integers(0, 25)) == 0:
            agent = "ghost_agent"
        cat = CATS.get(mode) if draw(st.integers(0, 6)) else draw(st.sampled_from([None, "XX"]))
        labels.append((rid, draw(rare(st.sampled_from([*ANNOTATORS, None]), b([4]))), mode, cat, agent,
                       draw(rare(st.sampled_from(old.LABEL_SOURCES), b(["robot"])))))
    subs = sorted({(r, a) for r in run_ids for a in ANNOTATORS[:3] if draw(st.integers(0, 2)) == 0})
    gold = sorted(r for r in run_ids if draw(st.integers(0, 3)) == 0)

    def frame(rows, columns):
        df = pd.DataFrame(rows, columns=list(columns))
        if draw(st.integers(0, 4)) == 0:
            df = df.astype(object)  # the same values without pandas' type inference
        return df

    return (frame(runs, old.RUN_COLUMNS), frame(principals, old.PRINCIPAL_COLUMNS),
            frame(agents, old.AGENT_COLUMNS), frame(labels, old.LABEL_COLUMNS),
            frame(subs, old.SUBMISSION_COLUMNS), gold)


SOURCES = st.sampled_from(["auto", "gold", "majority", "annotator:alice", "annotator:judge-l2",
                           "annotator:nobody", "annotator:", "bogus"])
OPTIONS = st.fixed_dictionaries({
    "modes": st.sampled_from([None, ["CF1", "GR3"], ["CF1", "CF1", "ZZ9"], [], "CF1", ["CF1", ""]]),
    "mode_category": st.sampled_from([None, {"CF1": "CF", "GR3": "GR", "ZZ9": "ZZ"}, {"CF1": "XX"},
                                      {m: c for m, c in CATS.items()}, ["CF1"]]),
    "threshold": st.sampled_from([0.5, 0.0, 1.0, 0.3, 1, np.float64(0.7), NAN, "0.5", True]),
})


# --------------------------------------------------------------------------------------------
# generated tests


@SETTINGS
@given(corpora(), SOURCES, st.booleans())
def test_resolve_labels_same(corpus, source, with_universe):
    runs, _, _, labels, subs, gold = corpus
    run_ids = list(runs["run_id"]) if with_universe else None
    assert_same("resolve_labels", labels, subs, gold, source=source, run_ids=run_ids)


@SETTINGS
@given(corpora(), st.sampled_from(sorted(old.GROUPINGS) + ["colour"]), OPTIONS,
       st.sampled_from([None, "subset", "all", "bad"]), SOURCES, st.booleans())
def test_outcome_report_same(corpus, by, options, labelled, source, raw):
    runs, principals, agents, labels, subs, gold = corpus
    if raw:  # the report's own checks on unresolved labels
        report_labels = labels
    else:
        res = _outcome(old, "resolve_labels", labels, subs, gold, source=source)
        if res[0] == "error":
            return
        report_labels = res[1][0]
    ids = [r for r in runs["run_id"] if isinstance(r, str)]
    labelled_runs = {None: None, "subset": ids[::2], "all": ids, "bad": "r1"}[labelled]
    assert_same("outcome_report", runs, principals, agents, report_labels, by,
                labelled_runs=labelled_runs, label_source="from a test", **options)


@SETTINGS
@given(corpora(), st.sampled_from(list(old.BLIND_SPOT_RATE_GROUPINGS) + ["colour"]),
       st.sampled_from([0.5, 0.0, 1.0, 0.3]), st.booleans())
def test_blind_spots_same(corpus, by, threshold, with_agents):
    runs, principals, agents, labels, subs, gold = corpus
    res = _outcome(old, "resolve_labels", labels, subs, gold)
    report_labels = res[1][0] if res[0] == "ok" else labels
    assert_same("blind_spots", runs, principals, report_labels, threshold=threshold)
    assert_same("blind_spot_rates", runs, principals, report_labels, agents if with_agents else None, by=by,
                threshold=threshold)


@SETTINGS
@given(corpora(), st.sampled_from(["model", "harness", "role"]), st.sampled_from([0.5, 0.0, 1.0, 0.3]))
def test_crossplay_same(corpus, by, threshold):
    runs, principals, agents, _, _, _ = corpus
    cells = assert_same("crossplay", runs, principals, agents, by=by, threshold=threshold)
    if cells is not None:
        for value in ("a_mean_score", "b_success_rate", "n", "bogus"):
            assert_same("crossplay_matrix", cells, value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora(bad=False), st.sampled_from(sorted(old.GROUPINGS)), OPTIONS, SOURCES)
def test_clean_corpora_same(corpus, by, options, source):
    """Well-formed input only, so that every example reaches the computation."""
    runs, principals, agents, labels, subs, gold = corpus
    res = assert_same("resolve_labels", labels, subs, gold, source=source, run_ids=list(runs["run_id"]))
    if res is None:
        return
    resolved, _ = res
    assert_same("outcome_report", runs, principals, agents, resolved, by,
                labelled_runs=resolved.attrs["labelled_runs"], label_source=resolved.attrs["label_source"],
                **options)


# --------------------------------------------------------------------------------------------
# the hand-made corpus of conftest, every option


@pytest.mark.parametrize("source", ["auto", "gold", "majority", "annotator:alice", "annotator:judge-l2"])
@pytest.mark.parametrize("by", sorted(old.GROUPINGS))
def test_hand_corpus_every_option(by, source):
    resolved, _ = assert_same("resolve_labels", make_raw_labels(), make_submissions(), GOLD_RUNS, source=source,
                              run_ids=list(make_runs()["run_id"]))
    for options in ({}, {"modes": ["CF1", "GR3", "ZZ9"]}, {"mode_category": CATS}, {"threshold": 0.7},
                    {"labelled_runs": resolved.attrs["labelled_runs"]}, {"labelled_runs": []}):
        assert_same("outcome_report", make_runs(), make_principals(), make_agents(), resolved, by, **options)
    assert_same("blind_spots", make_runs(), make_principals(), resolved)


def test_large_generated_corpus_same():
    """Many runs at once (the vectorised paths only pay off here): a seeded random corpus."""
    rng = np.random.default_rng(7)
    n = 400
    runs = pd.DataFrame({
        "run_id": [f"run-{i:04d}" for i in range(n)],
        "scenario_id": rng.choice(SCENARIOS, n),
        "family": rng.choice(FAMILIES, n),
        "alignment": rng.choice(np.array([*old.ALIGNMENTS, None], dtype=object), n),
        "status": rng.choice(old.STATUSES, n, p=[0.7, 0.1, 0.1, 0.1]),
        "aggregate_score": np.where(rng.random(n) < 0.1, np.nan, rng.random(n)),
    })
    prows, arows, lrows = [], [], []
    for rid in runs["run_id"]:
        for j, pid in enumerate(PIDS[: rng.integers(1, 4)]):
            flag = rng.choice(np.array([True, False, None], dtype=object))
            score = None if rng.random() < 0.15 else float(rng.random())
            metrics = {"surplus": float(rng.normal() * 100), "rounds": int(rng.integers(1, 9))} if j else {}
            prows.append((rid, pid, rng.choice(np.array([*old.PRINCIPAL_KINDS, None], dtype=object)), flag, score,
                          metrics))
            for k in range(rng.integers(0, 3)):
                aid = f"{pid}_agent{k}"
                arows.append((rid, aid, pid, rng.choice(np.array(ROLES[:4], dtype=object)),
                              rng.choice(np.array(MODELS[:5], dtype=object)), rng.choice(["hx", "hy"])))
                for _ in range(rng.integers(0, 3)):
                    mode = str(rng.choice(MODES))
                    lrows.append((rid, str(rng.choice(ANNOTATORS[:3] + ["judge-l2"])), mode, CATS[mode],
                                  aid if rng.random() < 0.8 else None,
                                  "judge" if rng.random() < 0.3 else "human"))
    principals = pd.DataFrame(prows, columns=list(old.PRINCIPAL_COLUMNS))
    agents = pd.DataFrame(arows, columns=list(old.AGENT_COLUMNS))
    labels = pd.DataFrame(lrows, columns=list(old.LABEL_COLUMNS))
    subs = labels[labels["source"] == "human"][["run_id", "annotator"]].drop_duplicates()
    gold = list(runs["run_id"][::17])
    for source in ("auto", "majority", "annotator:judge-l2", "annotator:alice"):
        resolved, _ = assert_same("resolve_labels", labels, subs, gold, source=source, run_ids=list(runs["run_id"]))
        for by in sorted(old.GROUPINGS):
            assert_same("outcome_report", runs, principals, agents, resolved, by, modes=MODES[:4],
                        mode_category=CATS, labelled_runs=resolved.attrs["labelled_runs"])
        assert_same("blind_spots", runs, principals, resolved)
        for by in old.BLIND_SPOT_RATE_GROUPINGS:
            assert_same("blind_spot_rates", runs, principals, resolved, agents, by=by)
    for by in ("model", "harness"):
        assert_same("crossplay", runs, principals, agents, by=by)
