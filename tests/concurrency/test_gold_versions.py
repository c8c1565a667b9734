"""Gold labels carry a version too: two reviewers editing one gold label cannot both win, on
SQLite and PostgreSQL (issue 13, item 8)."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import GoldLabel
from app.annotations.service import save_annotation
from app.auth.service import create_token
from app.main import create_app
from app.taxonomies.service import latest
from tests.annotations.factories import make_run, make_user
from tests.api.clients import bearer

URL = "/api/v1/adjudication/r1"


@pytest.fixture
def api(engine):
    with Session(engine) as s:
        r1 = make_run(s, "r1")
        tax = latest(s, "a2-failures")
        for n in ("a", "b"):
            save_annotation(s, make_user(s, n, password=None), r1, tax,
                            [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        rev = bearer(create_token(s, make_user(s, "rev", role="reviewer", password=None)))
        s.commit()
    client = TestClient(create_app(engine))
    gold = client.get(URL, headers=rev).json()["gold"]
    assert [(g["origin"], g["version"]) for g in gold] == [("unanimity", 1)]
    return client, rev, gold[0]["id"]


def _edit(client, rev, gid, ev, version):
    return client.post(URL, headers=rev, json={"action": "edit", "gold_label_id": gid, "version": version,
                                               "label": {"mode": "CF1", "agent": "buyer_agent", "evidence": ev}})


def test_stale_gold_edit_is_409_with_current(api, engine):
    client, rev, gid = api
    first = _edit(client, rev, gid, [2], 1)
    assert first.status_code == 200, first.text
    assert [g["version"] for g in first.json()["gold"]] == [2]
    stale = _edit(client, rev, gid, [3], 1)
    assert stale.status_code == 409
    assert stale.json()["current"]["version"] == 2 and stale.json()["current"]["evidence"] == [2]
    undo = client.post(URL, headers=rev, json={"action": "undo", "gold_label_id": gid, "version": 1})
    assert undo.status_code == 409
    with Session(engine) as s:
        g = s.exec(select(GoldLabel)).one()
        assert (g.evidence, g.accepted, g.version) == ([2], True, 2)
    assert _edit(client, rev, gid, [3], 2).status_code == 200


def test_concurrent_gold_edits_one_wins(api, engine):
    client, rev, gid = api
    n = 6
    barrier = threading.Barrier(n)

    def go(i):
        barrier.wait()
        return _edit(client, rev, gid, [i % 5], 1).status_code

    with ThreadPoolExecutor(n) as pool:
        codes = sorted(pool.map(go, range(n)))
    assert codes == [200] + [409] * (n - 1)
    with Session(engine) as s:
        assert s.exec(select(GoldLabel.version)).all() == [2]
