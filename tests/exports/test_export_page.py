"""The export page by what a user wants (labels for analysis with the wide file, the full dataset,
Hugging Face, MAD, reports, every table), its batch filter carried into every download link, and
blind mode on it; the queue page's columns. Corpus: tests/reports_db/corpus.py, both databases."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.annotations.blind import set_revealed
from app.annotations.models import Assignment
from app.auth.service import get_user
from app.main import create_app
from app.runs.service import get_run
from app.taxonomies.service import latest
from tests.api.clients import login
from tests.reports_db import corpus


@pytest.fixture
def site(engine):
    with Session(engine) as s:
        corpus.build(s, passwords=("alice", "rita"))
        tax = latest(s, "a2-failures")
        for pos, rid in enumerate(("r2", "r4")):
            s.add(Assignment(run_pk=get_run(s, rid).id, user_id=get_user(s, "alice").id, taxonomy_pk=tax.id,
                             position=pos, batch="week-1"))
        s.commit()
    with TestClient(create_app(engine)) as c:
        yield c, engine


def test_export_page_sections_batch_filter_and_blind_mode(site):
    client, engine = site
    login(client, "rita", corpus.PASSWORD)
    page = client.get("/exports").text
    order = [page.index(f'id="{sid}"') for sid in ("export-scope", "export-labels", "export-dataset", "export-hf",
                                                   "export-mad", "export-reports", "export-all")]
    assert order == sorted(order)
    labels = page.split('id="export-labels"')[1].split("</section>")[0]
    assert "/api/v1/exports/labels_wide.csv" in labels and "&lt;annotator&gt;.&lt;mode&gt;" in labels
    assert "/api/v1/exports/annotations.parquet" in labels and "/api/v1/exports/gold_labels.csv" in labels
    assert 'href="/api/v1/exports/hf.zip"' in page and 'action="/api/v1/exports/mad.json"' in page
    assert '<option value="week-1">week-1</option>' in page
    assert 'style="' not in page and "<script" not in page

    # a batch: every run-scoped download carries it; the wide file also the taxonomy chosen
    scoped = client.get("/exports", params={"batch": "week-1", "taxonomy": "a2-failures@1"}).text
    assert "/api/v1/exports/runs.csv?batch=week-1" in scoped and "/api/v1/exports/events.parquet?batch=week-1" in scoped
    assert re.search(r"/api/v1/exports/labels_wide\.csv\?batch=week-1&amp;taxonomy=a2-failures%401", scoped)
    assert "batch <strong>week-1</strong>" in scoped
    res = client.get("/api/v1/exports/runs.csv?batch=week-1")
    assert sorted(line.split(",")[0] for line in res.text.splitlines()[1:]) == ["r2", "r4"]
    assert "?batch=" not in client.get("/exports", params={"batch": "no-such"}).text  # unknown: every run

    # the HF and MAD exports are reachable from the page (the links answer)
    assert client.get("/api/v1/exports/hf.zip").headers["content-type"] == "application/zip"
    assert client.get("/api/v1/exports/mad.json").status_code == 200

    # blind mode: an annotator is offered none of the files that combine everyone's labels
    ann = TestClient(client.app)
    login(ann, "alice", corpus.PASSWORD)
    blind = ann.get("/exports").text
    assert "/api/v1/exports/labels_wide.csv" not in blind and "/api/v1/exports/hf.zip" not in blind
    assert "/api/v1/exports/mad.json" not in blind and "/api/v1/exports/gold_labels.csv" not in blind
    assert "Only your own labels" in blind
    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert "/api/v1/exports/labels_wide.csv" in ann.get("/exports").text


def test_queue_page_shows_title_family_events_and_batch(site):
    client, engine = site
    login(client, "alice", corpus.PASSWORD)
    page = client.get("/").text
    table = page.split('id="queue-table"')[1].split("</table>")[0]
    assert "Due batch" in table and "Family" in table and "Events" in table
    with Session(engine) as s:
        r2 = get_run(s, "r2")
        from sqlmodel import func, select

        from app.runs.models import Event, Scenario

        n = s.exec(select(func.count(Event.id)).where(Event.run_pk == r2.id)).one()
        sc = s.get(Scenario, r2.scenario_id)
    row = re.search(r"<tr[^>]*>\s*<td class=\"num\">1</td>.*?</tr>", table, re.S).group(0)
    assert "r2" in row and sc.family in row and f'<td class="num">{n}</td>' in row and "week-1" in row
    if sc.title:
        assert sc.title in row
    assert "js/queue.js" in page and "<kbd>]</kbd>" in page
