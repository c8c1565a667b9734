"""The reviewer pages on a small hand-built set: the kappa-paradox flag and its note, the
disagreement list with evidence links, filters."""
from __future__ import annotations

import functools
import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.annotations.service import save_annotation
from app.auth.security import hash_password
from app.taxonomies.service import latest
from tests.annotations.factories import PASSWORD, make_run, make_user
from tests.api.clients import login

N = 12


@functools.lru_cache
def _hash() -> str:
    return hash_password(PASSWORD)


@pytest.fixture
def rare(engine):
    """12 runs, annotators a and b; a marks CF1 on r00, b on r01, nothing else: prevalence 2/24,
    percent 10/12, Fleiss' kappa (10/12 - p_e) / (1 - p_e) with p_e = (1/12)^2 + (11/12)^2 < 0."""
    with Session(engine) as s:
        runs = [make_run(s, f"r{i:02d}") for i in range(N)]
        a, b = make_user(s, "a", password=None), make_user(s, "b", password=None)
        rev = make_user(s, "rev", role="reviewer", password=None)
        rev.password_hash = _hash()
        tax = latest(s, "a2-failures")
        for i, run in enumerate(runs):
            for user, mine in ((a, 0), (b, 1)):
                labels = [{"mode": "CF1", "agent": "buyer_agent", "evidence": [i % 5]}] if i == mine else []
                save_annotation(s, user, run, tax, labels, no_failure=not labels, status="submitted")
        s.commit()
    return engine


def test_paradox_flag_note_and_disagreements(rare, app, token_for):
    body = TestClient(app).get("/api/v1/agreement", params={"n_boot": 0}, headers=token_for("rev")).json()
    cf1 = next(m for m in body["modes"] if m["mode"] == "CF1")
    p_e = (1 / 12) ** 2 + (11 / 12) ** 2
    assert cf1["prevalence"] == pytest.approx(2 / 24) and cf1["percent"]["value"] == pytest.approx(10 / 12)
    assert cf1["fleiss_kappa"]["value"] == pytest.approx((10 / 12 - p_e) / (1 - p_e))
    assert cf1["kappa_paradox"] is True and "AC1" in cf1["advice"]
    # AC1 stays high: p_e = 2 (1/12)(11/12)
    pe1 = 2 * (1 / 12) * (11 / 12)
    assert cf1["gwet_ac1"]["value"] == pytest.approx((10 / 12 - pe1) / (1 - pe1))

    client = TestClient(app)
    login(client, "rev")
    page = client.get("/agreement", params={"n_boot": 20})
    assert page.status_code == 200
    note = re.search(r'<div class="note" id="paradox-note".*?</div>', page.text, re.DOTALL)
    assert note and "Gwet's AC1" in note.group(0)
    row = re.search(r'<tr class="flagged" id="mode-CF1">.*?</tr>', page.text, re.DOTALL)
    assert row and "read AC1" in row.group(0)
    assert re.search(r'<tr class="" id="mode-DD1">.*?undefined.*?</tr>', page.text, re.DOTALL)  # nobody marked DD1
    # the per-mode forest plot: server-rendered SVG, CF1's kappa in the paradox colour and marked
    forest = re.search(r'<section class="card" id="mode-forest">.*?</section>', page.text, re.DOTALL)
    assert forest and "<svg" in forest.group(0) and "<script" not in forest.group(0)
    assert "CF1 ⚑ paradox" in forest.group(0) and 'stroke="#d35400"' in forest.group(0)
    assert "read AC1" in forest.group(0) and ">DD1<" not in forest.group(0)  # nobody marked DD1: left out

    dis = client.get("/disagreements")
    assert dis.status_code == 200
    listed = re.findall(r'<h2><a href="/runs/([^"]+)">', dis.text)
    assert listed[:2] == ["r00", "r01"] and sorted(listed[2:]) == [f"r{i:02d}" for i in range(2, N)]
    assert dis.text.count('<span class="badge warn">disputed</span>') == 2
    assert 'href="/runs/r00#e-0"' in dis.text and 'href="/runs/r01#e-1"' in dis.text
    assert 'href="/adjudicate/r00?taxonomy=' in dis.text
    one = client.get("/disagreements", params={"page_size": 1})
    assert len(re.findall(r'<section class="card disagreement"', one.text)) == 1 and f"page 1 of {N}" in one.text
    assert client.get("/disagreements", params={"annotators": "zed"}).status_code == 422
