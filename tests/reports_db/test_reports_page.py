"""The /reports page and the CSV data behind its charts (reviewers and admins only)."""
from __future__ import annotations

import csv
import io
import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from tests.api.clients import login
from tests.reports_db import corpus
from tests.reports_db.expected import SOURCE_AUTO, same


@pytest.fixture
def page_client(engine):
    with Session(engine) as s:
        corpus.build(s, passwords=("rita", "alice"))
        s.commit()
    with TestClient(create_app(engine)) as c:
        yield c


def _csv(res) -> list[dict[str, str]]:
    assert res.status_code == 200, res.text
    assert res.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(res.text)))


def test_reports_page_for_a_reviewer(page_client):
    c = page_client
    assert c.get("/reports", follow_redirects=False).status_code == 303  # anonymous -> login
    login(c, "rita", corpus.PASSWORD)
    res = c.get("/reports?by=model")
    assert res.status_code == 200
    html = res.text
    assert f"{SOURCE_AUTO}." in html
    assert html.count("<svg") == 3  # dumbbell, bar chart, heatmap, all inline
    assert re.search(r'(src|href)="(https?:)?//(?!testserver/)', html) is None  # offline: no CDN, no external asset
    # blind spots r1 and r2 link to their runs; r5 (a success with nothing wrong) is not listed
    assert 'href="/runs/r1"' in html and 'href="/runs/r2"' in html and 'href="/runs/r5"' not in html
    assert "principal buyer failed (score 0.20); labelled CF1 (buyer_agent)" in html
    # model-a: gap 2/5 - 2/4 = -10%; model-b: 0
    assert "-10%" in html and "+0%" in html
    for name in ("outcomes", "success", "prevalence", "crossplay", "blind-spots"):
        assert f"/reports/data/{name}.csv?" in html

    bad = c.get("/reports?source=bogus")
    assert bad.status_code == 422 and "source" in bad.text


def test_chart_data_as_csv(page_client):
    c = page_client
    login(c, "rita", corpus.PASSWORD)
    q = "by=model&source=auto&crossplay=model"
    prevalence = _csv(c.get(f"/reports/data/prevalence.csv?{q}"))
    # model-a: 5 agent-runs, 4 labelled, CF and VF each 1 of 4; model-b: nothing labelled on its agents
    assert [(r["model"], r["agent_runs"], r["labelled_agent_runs"]) for r in prevalence] == [
        ("model-a", "5", "4"), ("model-b", "5", "4")]
    assert same(float(prevalence[0]["cat:CF"]), 0.25) and same(float(prevalence[0]["cat:VF"]), 0.25)
    assert float(prevalence[1]["cat:CF"]) == 0.0

    success = _csv(c.get(f"/reports/data/success.csv?{q}"))
    assert same([float(success[0]["aggregate_success_rate"]), float(success[0]["principal_success_rate"])],
                [2 / 5, 2 / 4])

    cross = _csv(c.get(f"/reports/data/crossplay.csv?{q}"))
    assert [(r["a"], r["b"], r["n"]) for r in cross] == [("model-a", "model-b", "3"), ("model-b", "model-a", "3"),
                                                         ("model-b", "model-b", "2")]
    spots = _csv(c.get(f"/reports/data/blind-spots.csv?{q}"))
    assert [r["run_id"] for r in spots] == ["r1", "r2"]
    assert spots[0]["reasons"] == "principal buyer failed (score 0.20); labelled CF1 (buyer_agent)"
    outcomes = _csv(c.get("/reports/data/outcomes.csv?by=family"))
    assert [r["family"] for r in outcomes] == ["commerce", "crm", "legal"]
    assert outcomes[1]["metric:surplus"] == ""  # no crm principal has the metric: empty, not "nan"
    assert c.get("/reports/data/nothing.csv").status_code == 404


def test_annotators_do_not_get_the_reports_page(page_client):
    login(page_client, "alice", corpus.PASSWORD)
    assert page_client.get("/reports").status_code == 403
    assert page_client.get("/reports/data/outcomes.csv").status_code == 403


def test_the_page_is_a_stored_result_shared_by_every_app(page_client, engine):
    """A second app on the same database (its own engine) serves the page computed by the first."""
    from app.core.db import make_engine
    from app.results.service import COMPUTATIONS

    login(page_client, "rita", corpus.PASSWORD)
    n = COMPUTATIONS["reports_page"]
    first = page_client.get("/reports?by=family&sort=n")
    assert first.status_code == 200 and 'id="result-age"' in first.text
    assert COMPUTATIONS["reports_page"] == n + 1
    # the CSV links serve the page's stored result: every table of it, nothing computed again
    for name in ("outcomes", "prevalence", "success", "crossplay", "blind-spots"):
        res = page_client.get(f"/reports/data/{name}.csv?by=family&sort=n")
        assert res.status_code == 200 and int(res.headers["Age"]) >= 0, name
    assert COMPUTATIONS["reports_page"] == n + 1
    other = make_engine(engine.url.render_as_string(hide_password=False))
    try:
        with TestClient(create_app(other)) as c2:
            login(c2, "rita", corpus.PASSWORD)
            again = c2.get("/reports?by=family&dir=asc")  # sorting is not part of the result's key
            assert again.status_code == 200 and "blind-spot runs" in again.text
    finally:
        other.dispose()
    assert COMPUTATIONS["reports_page"] == n + 1
