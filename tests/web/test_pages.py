"""The queue (home), runs list and run page, rendered through the app on SQLite and PostgreSQL."""
from __future__ import annotations

import re
import time

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.annotations.models import Annotation, Assignment
from app.main import create_app
from app.runs.service import get_run
from app.taxonomies.service import latest
from tests.web.helpers import XSS, login, page_run, store, user


@pytest.fixture
def app_client(engine):
    with Session(engine) as s:
        store(s, page_run("web-1"))
        store(s, page_run("web-2", family="legal"))
        store(s, page_run("web-3", n_events=4))
        ann = user(s, "ann")
        user(s, "rev", "reviewer")
        user(s, "boss", "admin")
        tax = latest(s, "a2-failures")
        for pos, rid in enumerate(["web-2", "web-1"]):
            s.add(Assignment(run_pk=get_run(s, rid).id, user_id=ann.id, taxonomy_pk=tax.id, position=pos,
                             batch="b1"))
        s.commit()
    return TestClient(create_app(engine))


def test_pages_need_login(app_client):
    for path in ("/", "/runs", "/runs/web-1"):
        r = app_client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")


def test_home_shows_queue_counts_and_start_button(app_client, engine):
    login(app_client, "ann")
    page = app_client.get("/").text
    assert re.search(r'id="start-next" href="/runs/web-2"', page)  # position 0 first
    assert re.search(r'<span class="n">2</span> assigned', page)
    assert re.search(r'<span class="n">0</span> submitted', page)
    # submit the first run: the button moves on to the second and the counts change
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        from app.auth.service import get_user

        s.add(Annotation(run_pk=get_run(s, "web-2").id, user_id=get_user(s, "ann").id, taxonomy_pk=tax.id,
                         status="submitted", no_failure=True))
        s.commit()
    page = app_client.get("/").text
    assert re.search(r'id="start-next" href="/runs/web-1"', page) and "Next run" in page
    assert re.search(r'<span class="n">1</span> submitted', page)
    assert re.search(r'<span class="n">1</span> remaining', page)


def test_home_without_assignments(app_client):
    login(app_client, "rev")
    page = app_client.get("/").text
    assert "No runs are assigned to you" in page and 'id="start-next"' not in page


def test_runs_list_filters_and_pages(app_client):
    login(app_client, "ann")
    page = app_client.get("/runs").text
    assert all(f'href="/runs/web-{i}"' in page for i in (1, 2, 3)) and "3 matching" in page
    legal = app_client.get("/runs", params={"family": "legal"}).text
    assert 'href="/runs/web-2"' in legal and 'href="/runs/web-1"' not in legal and "1 matching" in legal
    p1 = app_client.get("/runs", params={"page_size": 2}).text
    p2 = app_client.get("/runs", params={"page_size": 2, "page": 2}).text
    assert 'href="/runs/web-1"' in p1 and 'href="/runs/web-2"' in p1 and 'href="/runs/web-3"' not in p1
    assert 'href="/runs/web-3"' in p2 and "page 2 of 2" in p2
    assert 'rel="next"' in p1 and 'rel="next"' not in p2
    none = app_client.get("/runs", params={"status": "timeout"}).text
    assert "No runs match these filters" in none


def test_run_page_renders_lanes_anchors_and_context(app_client):
    login(app_client, "ann")
    r = app_client.get("/runs/web-1")
    assert r.status_code == 200
    page = r.text
    for seq in range(8):
        assert f'id="e-{seq}"' in page and f'href="#e-{seq}"' in page
    assert page.count('class="ev ') == 8
    assert 'class="ev shared k-message dir-right"' in page          # buyer_agent (lane 0) -> seller_agent
    assert 'class="ev principal k-message from_principal"' in page  # Dana -> her agent, in the agent's lane
    assert 'class="ev private k-tool_call"' in page
    assert "Dana (buyer)" in page and "Buy for at most $18,500" in page and "Do not reveal the budget" in page
    assert "blind spot" in page and "Dana (buyer)&#39;s own outcome failed" in page
    assert "&#34;budget_usd&#34;: 18500" in page or '"budget_usd": 18500' in page  # private state panel
    assert 'class="rc both"' in page  # buyer_agent found seller_agent and talked to it
    assert 'id="label-panel"' in page and "a2-failures@" in page
    assert 'id="run-config"' in page and 'data-mode="CF3"' in page


def test_run_page_escapes_content(app_client, engine):
    raw = page_run("xss", content_extra=XSS)
    raw["scenario"] = dict(raw["scenario"], id="x/1", title=XSS, description=XSS)
    raw["agents"][0]["private_state"] = {"note": XSS}
    with Session(engine) as s:
        store(s, raw)
        s.commit()
    login(app_client, "ann")
    page = app_client.get("/runs/xss").text
    assert XSS not in page
    escaped = "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"  # the text is there, escaped
    assert page.count(escaped) >= 3  # title, description, event content (and the private state JSON)
    config = re.search(r'<script type="application/json" id="run-config">(.*?)</script>', page, re.DOTALL).group(1)
    assert "<" not in config  # tojson escapes markup inside the script element


def test_demo_truth_and_audits_hidden_from_annotators(app_client):
    login(app_client, "ann")
    page = app_client.get("/runs/web-1").text
    assert "TRUTH-MARKER-4411" not in page and "demo_truth" not in page and "Demo truth" not in page
    assert "AUDIT-NOTE-7731" not in page  # machine audits are other annotators' labels: blind mode


def test_reviewer_sees_audits_but_not_demo_truth(app_client):
    login(app_client, "rev")
    page = app_client.get("/runs/web-1").text
    assert "AUDIT-NOTE-7731" in page
    assert "TRUTH-MARKER-4411" not in page


def test_admin_sees_demo_truth(app_client):
    login(app_client, "boss")
    page = app_client.get("/runs/web-1").text
    assert "TRUTH-MARKER-4411" in page and "Demo truth (admins only)" in page


def test_run_page_unknown_run_and_taxonomy(app_client):
    login(app_client, "ann")
    assert app_client.get("/runs/nope").status_code == 404
    assert app_client.get("/runs/web-1", params={"taxonomy": "nope@9"}).status_code == 404
    mast = app_client.get("/runs/web-1", params={"taxonomy": "mast"})
    assert mast.status_code == 200 and 'data-mode="1.1"' in mast.text and 'data-mode="CF3"' not in mast.text


def test_large_run_renders_fast_enough(app_client, engine):
    with Session(engine) as s:
        store(s, page_run("big", n_events=2000, content_extra="lorem ipsum dolor sit amet " * 4))
        s.commit()
    login(app_client, "ann")
    t0 = time.perf_counter()
    r = app_client.get("/runs/big")
    elapsed = time.perf_counter() - t0
    assert r.status_code == 200
    assert r.text.count('class="ev ') == 2000 and 'id="e-1999"' in r.text
    assert elapsed < 8.0, f"2,000-event run took {elapsed:.1f}s"
    assert len(r.content) < 8_000_000, f"2,000-event run page is {len(r.content)} bytes"


def _label_by(engine, name: str, run_id: str, note: str) -> None:
    from app.annotations.service import save_annotation
    from app.auth.service import get_user

    with Session(engine) as s:
        save_annotation(s, get_user(s, name), get_run(s, run_id), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [2], "note": note}],
                        status="submitted")
        s.commit()


def _what_annotator_sees(client) -> dict[str, bool]:
    """Whether bob's note and the machine audit reach the annotator on the run page, in the REST
    API (annotations list, the run's audits) and in the annotations export."""
    page = client.get("/runs/web-1").text
    listing = client.get("/api/v1/annotations", params={"run_id": "web-1"}).text
    run = client.get("/api/v1/runs/web-1").json()
    export = client.get("/api/v1/exports/annotations.csv")
    assert export.status_code == 200, export.text
    return {"page": "BOB-NOTE-5150" in page and "AUDIT-NOTE-7731" in page,
            "api": "BOB-NOTE-5150" in listing and bool(run["audits"]),
            "export": "BOB-NOTE-5150" in export.text}


def test_reveal_labels_applies_to_run_pages_api_and_exports_alike(app_client, engine):
    from app.annotations.blind import set_revealed

    with Session(engine) as s:
        user(s, "bob")
        s.commit()
    _label_by(engine, "bob", "web-1", "BOB-NOTE-5150")
    login(app_client, "ann")
    assert _what_annotator_sees(app_client) == {"page": False, "api": False, "export": False}
    page = app_client.get("/runs/web-1").text
    assert "Labels on this run" not in page and "Machine audits" not in page
    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert _what_annotator_sees(app_client) == {"page": True, "api": True, "export": True}
    page = app_client.get("/runs/web-1").text
    assert "Labels on this run" in page and "TRUTH-MARKER-4411" not in page  # the demo truth stays admin-only


def test_reviewer_sees_labels_on_this_run(app_client, engine):
    with Session(engine) as s:
        user(s, "bob")
        s.commit()
    _label_by(engine, "bob", "web-1", "BOB-NOTE-5150")
    login(app_client, "rev")
    page = app_client.get("/runs/web-1").text
    assert "Labels on this run" in page and "BOB-NOTE-5150" in page
    assert re.search(r"<strong>bob</strong>", page) and "judge:judge-l2" in page
