"""The run page embeds the caller's own annotation (no 404 request per fresh run) and says when a
run is adjudicated (read-only); the adjudication page keeps a refused form filled in and shows an
open edit form on its own line."""
from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.agreement import adjudication
from app.annotations.service import save_annotation
from app.main import create_app
from app.runs.service import get_run
from app.taxonomies.service import latest
from tests.web.helpers import XSS, login, page_run, store, user

HTML = {"Accept": "text/html"}


def _config(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="run-config">(.*?)</script>', html, re.DOTALL)
    return json.loads(m.group(1))


@pytest.fixture
def client(engine):
    with Session(engine) as s:
        store(s, page_run("qa-1"))
        store(s, page_run("qa-2"))
        ann, bob = user(s, "ann"), user(s, "bob")
        rev = user(s, "rev", "reviewer")
        tax = latest(s, "a2-failures")
        label = {"mode": "CF1", "agent": "buyer_agent", "evidence": [1], "note": XSS}
        for who in (ann, bob):
            save_annotation(s, who, get_run(s, "qa-1"), tax, [label], status="submitted")
        save_annotation(s, bob, get_run(s, "qa-2"), tax, [label], status="submitted")
        run = get_run(s, "qa-1")
        adjudication.open_adjudication(s, run, tax, rev)
        adjudication.apply_action(s, run, tax, rev, "finish", {"rationale": "agreed"})
        s.commit()
    return TestClient(create_app(engine))


def test_run_page_embeds_own_annotation_only(client):
    login(client, "ann")
    cfg = _config(client.get("/runs/qa-1").text)
    assert cfg["mine"]["annotator"] == "ann" and cfg["mine"]["status"] == "submitted"
    assert [lab["mode"] for lab in cfg["mine"]["labels"]] == ["CF1"]
    assert cfg["mine"]["labels"][0]["note"] == XSS  # JSON data, put in the page with textContent
    html = client.get("/runs/qa-2").text
    assert _config(html)["mine"] is None  # bob's annotation of qa-2 is not ann's (blind mode)
    assert XSS not in html


def test_embedded_annotation_matches_the_api(client):
    login(client, "ann")
    cfg = _config(client.get("/runs/qa-1").text)
    api = client.get("/api/v1/annotations/mine", params={"run_id": "qa-1", "taxonomy": cfg["taxonomy"]}).json()
    assert cfg["mine"] == api


def test_adjudicated_run_is_marked_read_only(client):
    login(client, "ann")
    html = client.get("/runs/qa-1").text
    assert _config(html)["locked"] is True
    assert 'id="lp-locked"' in html and "adjudicated under a2-failures@" in html
    html = client.get("/runs/qa-2").text
    assert _config(html)["locked"] is False and 'id="lp-locked"' not in html


def test_login_page_carries_the_session_token_for_a_stale_page(client):
    """labeling.js reads the current token from /login's <meta> after a 403 naming CSRF."""
    token = login(client, "ann")
    assert f'<meta name="csrf-token" content="{token}">' in client.get("/login").text


def _adjudicate(client, token, run_id, **fields):
    data = {"csrf_token": token, "taxonomy": "a2-failures@1", **fields}
    return client.post(f"/adjudicate/{run_id}", data=data, headers=HTML, follow_redirects=True)


def test_refused_add_form_comes_back_filled_in(client):
    token = login(client, "rev")
    page = _adjudicate(client, token, "qa-2", action="add", label_mode="CF2", label_agent="seller_agent",
                       label_evidence="3, abc", label_principals="seller", rationale="because <b>x</b>")
    assert page.status_code == 200
    assert "must be an event seq" in page.text
    add = page.text[page.text.index('id="add-form"'):]
    add = add[:add.index("</form>")]
    assert '<option value="CF2" selected>' in add
    assert '<option value="seller_agent" selected>' in add
    assert 'value="3, abc"' in add
    assert 'value="seller" checked' in add
    assert "because &lt;b&gt;x&lt;/b&gt;</textarea>" in add
    again = client.get("/adjudicate/qa-2", headers=HTML).text  # shown once, then forgotten
    add = again[again.index('id="add-form"'):]
    assert 'value="3, abc"' not in add[:add.index("</form>")]


def test_refused_edit_reopens_that_gold_label_filled_in(client):
    token = login(client, "rev")
    page = _adjudicate(client, token, "qa-2", action="add", label_mode="CF1", label_agent="buyer_agent",
                       label_evidence="1", rationale="")
    gid = re.search(r'data-gold-id="(\d+)"', page.text).group(1)
    assert "<details class=\"edit\" open>" not in page.text
    page = _adjudicate(client, token, "qa-2", action="edit", gold_label_id=gid, label_mode="CF2",
                       label_agent="buyer_agent", label_evidence="1, 99999", rationale="kept edit")
    assert "99999" in page.text and "is not an event seq" in page.text
    row = page.text[page.text.index(f'data-gold-id="{gid}"'):]
    row = row[:row.index("</tr>")]
    assert '<details class="edit" open>' in row
    assert 'value="1, 99999"' in row and "kept edit</textarea>" in row
    assert '<option value="CF2" selected>' in row


def test_a_refused_form_too_big_for_the_session_cookie_is_not_kept(client):
    token = login(client, "rev")
    page = _adjudicate(client, token, "qa-2", action="add", label_mode="CF2", label_agent="seller_agent",
                       label_evidence="abc", rationale="x" * 2000)
    assert "must be an event seq" in page.text  # the message still shows
    add = page.text[page.text.index('id="add-form"'):]
    add = add[:add.index("</form>")]
    assert 'value="abc"' not in add and "xxxx" not in add
    assert client.get("/", headers=HTML).status_code == 200  # the session cookie still works


def test_open_edit_form_sits_on_its_own_line(client):
    login(client, "rev")
    html = client.get("/adjudicate/qa-2", headers=HTML).text
    assert "/static/css/agreement.css" in html  # the page's CSS is a static file (strict CSP)
    assert "details.edit[open] { display: block;" in client.get("/static/css/agreement.css").text
