"""Estimates from the database (SQLite and PostgreSQL): which labels count for each unit, the
three methods against the pure functions on arrays built by hand, the API, the CLI and blind mode."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.annotations.models import GoldLabel, GoldRun
from app.annotations.service import save_annotation
from app.auth.service import create_token, get_user, judge_user
from app.estimates import rates
from app.estimates.service import EstimateError, estimates_payload
from app.taxonomies.service import latest
from tests.annotations.factories import make_run, make_user

N = 40
TRUE = {i for i in range(N) if i % 5 == 0}           # CF1 by buyer_agent: runs 0, 5, 10, ...
JUDGE_FP = {i for i in range(N) if i % 7 == 1}       # the judge also flags these (seller_agent)
JUDGE_FN = {10}                                      # and misses this one
HUMAN_A = range(0, 20)                               # alice labels runs 0..19 as they are
HUMAN_B = range(0, 6)                                # bob too, but also flags run 3
GOLD = {3: False, 6: True}                           # gold overrides: run 3 no CF1, run 6 CF1 (buyer)


def cf1(i: int, agent: str = "buyer_agent") -> list[dict]:
    return [{"mode": "CF1", "agent": agent, "evidence": [1]}]


@pytest.fixture
def corpus(engine):
    with Session(engine) as s:
        runs = [make_run(s, f"r{i:02d}", family="commerce" if i < 30 else "travel") for i in range(N)]
        tax = latest(s, "a2-failures")
        alice, bob = make_user(s, "alice", password=None), make_user(s, "bob", password=None)
        make_user(s, "rev", role="reviewer", password=None)
        judge = judge_user(s, "j1")
        for i in HUMAN_A:
            labs = cf1(i) if i in TRUE else []
            save_annotation(s, alice, runs[i], tax, labs, no_failure=not labs, status="submitted")
        for i in HUMAN_B:
            labs = cf1(i) if i in TRUE or i == 3 else []
            save_annotation(s, bob, runs[i], tax, labs, no_failure=not labs, status="submitted")
        for i in range(N):
            labs = (cf1(i) if i in TRUE - JUDGE_FN else []) + (cf1(i, "seller_agent") if i in JUDGE_FP else [])
            save_annotation(s, judge, runs[i], tax, labs, no_failure=not labs, status="submitted")
        for i, present in GOLD.items():
            g = GoldRun(run_pk=runs[i].id, taxonomy_pk=tax.id, status="adjudicated", no_failure=not present)
            s.add(g)
            s.flush()
            if present:
                s.add(GoldLabel(gold_run_id=g.id, mode="CF1", agent="buyer_agent", origin="adjudication"))
        s.commit()
    return engine


def human_truth() -> dict[int, float]:
    """Run -> the human label by hand: gold where adjudicated, else the strict majority."""
    out = {}
    for i in range(20):
        if i in GOLD:
            out[i] = float(GOLD[i])
        elif i in HUMAN_B:  # two submitters: both must flag
            out[i] = float(i in TRUE and True)
        else:
            out[i] = float(i in TRUE)
    return out


def judge_run(i: int) -> float:
    return float(i in (TRUE - JUDGE_FN) or i in JUDGE_FP)


def rows_by_method(payload, group="all"):
    return {r["method"]: r for r in payload["rows"] if r["group"] == group}


def test_run_level_rates_equal_the_hand_built_arrays(corpus):
    with Session(corpus) as s:
        p = estimates_payload(s, mode="CF1", judge="j1")
    h = human_truth()
    labelled = sorted(h)
    y = np.array([h[i] for i in labelled])
    yhat = np.array([judge_run(i) for i in labelled])
    yu = np.array([judge_run(i) for i in range(N) if i not in h])
    rows = rows_by_method(p)
    want_h = rates.human_rate(y)
    want_p = rates.ppi_rate(y, yhat, yu)
    assert rows["human"]["n_human"] == 20 and rows["human"]["rate"] == pytest.approx(want_h.rate)
    assert (rows["human"]["ci_low"], rows["human"]["ci_high"]) == pytest.approx((want_h.ci_low, want_h.ci_high))
    assert rows["judge"]["n_judge"] == N
    assert rows["judge"]["rate"] == pytest.approx(np.mean([judge_run(i) for i in range(N)]))
    assert rows["ppi"]["rate"] == pytest.approx(want_p.rate, abs=1e-12)
    assert (rows["ppi"]["ci_low"], rows["ppi"]["ci_high"]) == pytest.approx((want_p.ci_low, want_p.ci_high), abs=1e-12)
    assert p["judge"] == "judge:j1" and p["n_units"] == N and not p["weighted"]
    # gold run 6 counts as CF1 although no human marked it; run 3 (bob alone) does not
    assert h[6] == 1.0 and h[3] == 0.0


def test_agent_level_and_groups(corpus):
    with Session(corpus) as s:
        by_agent = estimates_payload(s, mode="CF1", judge="j1", by="agent")
        by_family = estimates_payload(s, mode="CF1", by="family")
        by_principal = estimates_payload(s, category="CF", judge="j1", by="principal")
    seller = rows_by_method(by_agent, "seller_agent")
    assert seller["human"]["rate"] == 0.0 and seller["human"]["n_human"] == 20
    assert seller["judge"]["rate"] == pytest.approx(len(JUDGE_FP) / N)
    buyer = rows_by_method(by_agent, "buyer_agent")
    assert buyer["judge"]["rate"] == pytest.approx(len(TRUE - JUDGE_FN) / N)
    fam = {r["group"]: r for r in by_family["rows"]}
    assert set(fam) == {"commerce", "travel"}
    assert fam["travel"]["n_human"] == 0 and fam["travel"]["rate"] is None
    assert fam["commerce"]["n_human"] == 20
    assert {r["group"] for r in by_principal["rows"]} == {"buyer", "seller"}
    assert rows_by_method(by_principal, "seller")["judge"]["rate"] == pytest.approx(len(JUDGE_FP) / N)


def test_inclusion_probabilities_weight_the_human_rows(corpus):
    inclusion = {f"r{i:02d}": (0.5 if i in TRUE else 0.1) for i in range(N)}
    with Session(corpus) as s:
        p = estimates_payload(s, mode="CF1", inclusion=inclusion)
    h = human_truth()
    labelled = sorted(h)
    want = rates.human_rate([h[i] for i in labelled], [1 / inclusion[f"r{i:02d}"] for i in labelled])
    row = rows_by_method(p)["human"]
    assert p["weighted"] and row["rate"] == pytest.approx(want.rate) and row["n_effective"] == pytest.approx(want.n_effective)
    with Session(corpus) as s:  # labelled runs with no inclusion probability are not in the sample
        only = estimates_payload(s, mode="CF1", inclusion={"r00": 0.5})
    assert rows_by_method(only)["human"]["n_human"] == 1
    assert any("19 humanly labelled run(s) outside" in n for n in only["notes"])


def test_bad_requests_name_the_field(corpus):
    with Session(corpus) as s:
        for kw, field in [({"mode": "XX9"}, "mode"), ({"category": "ZZ"}, "category"), ({}, "mode"),
                          ({"mode": "CF1", "judge": "nobody"}, "judge"), ({"mode": "CF1", "by": "moon"}, "by")]:
            with pytest.raises(EstimateError) as err:
                estimates_payload(s, **kw)
            assert err.value.field == field


def test_planner_rows(corpus):
    with Session(corpus) as s:
        p = estimates_payload(s, mode="CF1", judge="j1", target_half_width=0.2)
    plans = {r["method"]: r for r in p["plan"]}
    assert set(plans) == {"human", "ppi"}
    for plan in plans.values():
        assert plan["more_needed"] is not None
        if plan["half_width_now"] > 0.2:
            assert plan["more_needed"] > 0


def _header(engine, name):
    with Session(engine) as s:
        tok = create_token(s, get_user(s, name))
        s.commit()
    return {"Authorization": f"Bearer {tok}"}


def test_api_json_csv_parquet_and_blind_mode(corpus):
    from app.main import create_app

    client = TestClient(create_app(corpus))
    rev = _header(corpus, "rev")
    r = client.get("/api/v1/estimates", params={"mode": "CF1", "judge": "j1"}, headers=rev)
    assert r.status_code == 200, r.text
    with Session(corpus) as s:
        assert r.json()["rows"] == estimates_payload(s, mode="CF1", judge="j1")["rows"]
    csv = client.get("/api/v1/estimates", params={"mode": "CF1", "judge": "j1", "format": "csv"}, headers=rev)
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    frame = pd.read_csv(io.StringIO(csv.text))
    assert list(frame["method"]) == ["human", "judge", "ppi"]
    pq = client.get("/api/v1/estimates", params={"mode": "CF1", "format": "parquet"}, headers=rev)
    assert pd.read_parquet(io.BytesIO(pq.content))["rate"].iloc[0] == pytest.approx(r.json()["rows"][0]["rate"])
    bad = client.get("/api/v1/estimates", params={"mode": "XX9"}, headers=rev)
    assert bad.status_code == 422 and bad.json()["detail"].startswith("mode:")
    # an annotator under blind mode sees no estimate (they aggregate everybody's labels and the judge's)
    blind = client.get("/api/v1/estimates", params={"mode": "CF1", "judge": "j1"}, headers=_header(corpus, "alice"))
    assert blind.status_code == 403


def test_cli(corpus, monkeypatch, tmp_path):
    import app.cli.estimate as cli_estimate
    from app.cli import cli

    monkeypatch.setattr(cli_estimate, "checked_engine", lambda: corpus)
    out = tmp_path / "est.parquet"
    res = CliRunner().invoke(cli, ["estimate", "--mode", "CF1", "--judge", "j1", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.output)
    assert [r["method"] for r in payload["rows"]] == ["human", "judge", "ppi"]
    assert len(pd.read_parquet(out)) == 3
    text = CliRunner().invoke(cli, ["estimate", "--category", "CF", "--by", "agent", "--target-half-width", "0.1"])
    assert text.exit_code == 0 and "buyer_agent" in text.output and "Planner" in text.output
    bad = CliRunner().invoke(cli, ["estimate", "--mode", "XX9"])
    assert bad.exit_code == 1 and "mode: unknown mode" in bad.output
    usage = CliRunner().invoke(cli, ["estimate"])
    assert usage.exit_code == 2 and "--mode, --category or --attribution" in usage.output


def test_page_forest_plot_table_and_files(corpus):
    from app.main import create_app
    from tests.web.helpers import login, user

    with Session(corpus) as s:
        user(s, "lead", role="reviewer")
        user(s, "ann")
        s.commit()
    client = TestClient(create_app(corpus))
    login(client, "lead")
    empty = client.get("/estimates")
    assert empty.status_code == 200 and "category CF" in empty.text and "judge:j1" in empty.text
    page = client.get("/estimates", params={"target": "mode:CF1", "judge": "judge:j1", "by": "agent", "half_width": "0.1"})
    assert page.status_code == 200, page.text
    assert "<svg" in page.text and "Forest plot" in page.text and "buyer_agent" in page.text
    assert page.text.count("<circle") >= 6  # two groups x three methods (plus the legend)
    assert 'id="plan-table"' in page.text and "&amp;plusmn" not in page.text
    with Session(corpus) as s:
        want = estimates_payload(s, mode="CF1", judge="judge:j1", by="agent")
    csv = client.get("/estimates/data.csv", params={"target": "mode:CF1", "judge": "judge:j1", "by": "agent"})
    frame = pd.read_csv(io.StringIO(csv.text))
    assert list(frame["group"]) == [r["group"] for r in want["rows"]]
    want_rates = [np.nan if r["rate"] is None else r["rate"] for r in want["rows"]]
    assert frame["rate"].tolist() == pytest.approx(want_rates, nan_ok=True)
    assert frame["rate"].isna().sum() == 1  # seller_agent's PPI: its human labels do not vary
    bad = client.get("/estimates", params={"target": "mode:XX9"})
    assert bad.status_code == 422 and "unknown mode" in bad.text
    # annotators never reach the page
    other = TestClient(create_app(corpus))
    login(other, "ann")
    assert other.get("/estimates", params={"target": "mode:CF1"}, follow_redirects=False).status_code in (303, 403)


def test_a_study_scopes_the_runs_and_weights_by_its_batches(corpus):
    """In a study the estimate reads only its runs and weights human labels by the inclusion
    probabilities its random batch recorded; labelled runs the batch did not draw are left out
    (they are not in the sample), and the payload says so."""
    from app.annotations.assignments import RunFilter, create_assignments
    from app.studies.service import create_study
    from app.taxonomies.service import latest

    with Session(corpus) as s:
        tax = latest(s, "a2-failures")
        study = create_study(s, "commerce-only", selection={"family": "commerce"})
        res = create_assignments(s, RunFilter(), 10, 7, ["alice"], 1, tax, batch="pilot", study=study)
        s.commit()
        drawn = {p[0] for p in res.picks}
        p_all = estimates_payload(s, mode="CF1", judge="j1")
        p = estimates_payload(s, mode="CF1", judge="j1", study=study)
    assert len(drawn) == 10 and all(int(r[1:]) < 30 for r in drawn)  # drawn from the commerce runs
    assert p["study"] == "commerce-only" and p["n_units"] == 30 and p_all["n_units"] == N
    h = human_truth()
    sampled = sorted(i for i in h if f"r{i:02d}" in drawn)
    human = rows_by_method(p)["human"]
    assert p["weighted"] and human["n_human"] == len(sampled)
    assert human["rate"] == pytest.approx(np.mean([h[i] for i in sampled]))  # equal weights: 10 of 30 each
    assert any(f"{20 - len(sampled)} humanly labelled run(s) outside" in n for n in p["notes"])
    assert rows_by_method(p)["judge"]["n_judge"] == 30


def test_attribution_rates_per_agent(engine):
    """Mode-less attribution labels (Who&When's: which agent failed) give agent-level rates: the
    dataset's source labels count as human labels, a judge's attributions as the judge's."""
    from app.annotations.service import imported_human_user

    with Session(engine) as s:
        runs = [make_run(s, f"w{i}") for i in range(12)]
        tax = latest(s, "who-and-when")
        source = imported_human_user(s, "whowhen:annotators")
        judge = judge_user(s, "attr")
        for i, run in enumerate(runs):
            blamed = "buyer_agent" if i < 8 else "seller_agent"
            guess = "buyer_agent" if i < 6 or i == 11 else "seller_agent"
            if i < 10:  # the dataset labelled ten runs
                save_annotation(s, source, run, tax, [{"mode": None, "agent": blamed, "evidence": [1]}],
                                status="submitted", imported=True)
            save_annotation(s, judge, run, tax, [{"mode": None, "agent": guess, "evidence": [2]}],
                            status="submitted", imported=True)
        s.commit()
        p = estimates_payload(s, attribution=True, by="agent", judge="attr", taxonomy="who-and-when")
        with pytest.raises(EstimateError):
            estimates_payload(s, attribution=True, mode="CF1")
    assert p["kind"] == "attribution" and p["target"] == "attribution"
    buyer, seller = rows_by_method(p, "buyer_agent"), rows_by_method(p, "seller_agent")
    assert buyer["human"]["n_human"] == 10 and buyer["human"]["rate"] == pytest.approx(0.8)
    assert seller["human"]["rate"] == pytest.approx(0.2)
    assert buyer["judge"]["rate"] == pytest.approx(7 / 12) and seller["judge"]["rate"] == pytest.approx(5 / 12)
    assert buyer["ppi"]["n_human"] == 10 and buyer["ppi"]["n_judge"] == 12
