"""The columnar reports against the row-by-row ones they replaced (tests/reports/legacy_outcomes.py),
on the demo corpus stored in the database (both backends): demo runs, their judge audits and
simulated human annotators, plus gold for some runs; every grouping, label source and option the
API / CLI / pages / exports use."""
from __future__ import annotations

import pandas as pd
import pytest
from sqlmodel import Session

from app.auth.service import create_user
from app.demo.generator import generate_runs
from app.demo.seeding import DEMO_USERS, seed_annotations
from app.ingest.items import ImportItem
from app.ingest.loader import _after_store_default, load_items
from app.reports import service
from app.taxonomies.service import latest
from tests.reports import legacy_outcomes as old
from tests.reports.test_equivalence import assert_same

N_RUNS = 30


@pytest.fixture
def demo_data(engine):
    with Session(engine) as s:
        for name, (role, _, _) in DEMO_USERS.items():
            create_user(s, name, role)  # no password: argon2 is slow on purpose
        s.commit()
    summary = load_items(engine, (ImportItem(run=d.run, source="demo") for d in generate_runs(N_RUNS, 3)),
                         after_store=_after_store_default)
    assert summary.imported == N_RUNS, summary.errors
    with Session(engine) as s:
        tax_pk = latest(s, "a2-failures").id
    seed_annotations(engine, tax_pk, n_assigned=N_RUNS, n_simulated=N_RUNS - 5, seed=4)
    with Session(engine) as s:
        data = service.load_report_data(s, threshold=0.5)
        families = sorted(set(data.runs["family"]))
        by_family = service.load_report_data(s, threshold=0.6, family=families[0])
    # gold for every fourth run: the judge's labels there, adjudicated
    gold_runs = list(data.runs["run_id"][::4])
    judge = data.labels[(data.labels["source"] == "judge") & data.labels["run_id"].isin(gold_runs)]
    gold = judge.assign(annotator=None, source="gold").drop_duplicates(["run_id", "mode", "agent"])
    with_gold = pd.concat([data.labels, gold], ignore_index=True)
    return data, by_family, with_gold, gold_runs


def test_demo_corpus_same_reports(demo_data):
    data, by_family, with_gold, gold_runs = demo_data
    assert len(data.runs) == N_RUNS and len(data.labels) and len(data.submissions)
    judges = sorted(set(data.labels.loc[data.labels["source"] == "judge", "annotator"]))
    sources = ["auto", "gold", "majority", "annotator:alice", *(f"annotator:{j}" for j in judges)]
    for d, labels, gold in ((data, data.labels, data.gold_runs), (data, with_gold, gold_runs),
                            (by_family, by_family.labels, by_family.gold_runs)):
        for source in sources:
            resolved, _ = assert_same("resolve_labels", labels, d.submissions, gold, source=source,
                                      run_ids=list(d.runs["run_id"]))
            for by in service.OUTCOME_BY:
                for options in ({"modes": d.modes, "mode_category": d.mode_category},
                                {}):
                    rep = assert_same("outcome_report", d.runs, d.principals, d.agents, resolved, by,
                                      threshold=d.threshold, labelled_runs=resolved.attrs["labelled_runs"],
                                      label_source=resolved.attrs["label_source"], **options)
                    assert rep is not None and (len(rep) > 0) == (len(d.runs) > 0)
            assert_same("blind_spots", d.runs, d.principals, resolved, threshold=d.threshold)
            for by in service.BLIND_SPOT_RATE_BY:
                assert_same("blind_spot_rates", d.runs, d.principals, resolved, d.agents, by=by,
                            threshold=d.threshold)
        for by in service.CROSSPLAY_BY:
            assert_same("crossplay", d.runs, d.principals, d.agents, by=by, threshold=d.threshold)


def test_demo_corpus_payloads_same(demo_data, monkeypatch):
    """The service payloads (what the API, CLI, pages and exports send) with the old functions
    patched in are the payloads with the new ones."""
    data = demo_data[0]
    calls = [(service.outcomes_payload, by, source) for by in service.OUTCOME_BY
             for source in ("auto", "majority", "annotator:judge:judge-l2")]
    new_payloads = [fn(data, by, source) for fn, by, source in calls]
    new_blind = service.blind_spots_payload(data, "auto")
    for name in ("outcome_report", "resolve_labels", "blind_spots", "blind_spot_rates"):
        monkeypatch.setattr(service, name, getattr(old, name))
    assert [fn(data, by, source) for fn, by, source in calls] == new_payloads
    assert service.blind_spots_payload(data, "auto") == new_blind
