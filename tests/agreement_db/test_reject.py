"""Rejecting a candidate is a stored decision (a gold label with accepted=False): a reload shows it
rejected, it is told apart from "not decided yet", it follows the gold label version / 409 rules,
two reviewers deciding one candidate at once cannot both win, and nothing that reads gold takes it
for gold (agreement, exports, the annotator's locked run page). On SQLite and PostgreSQL."""
from __future__ import annotations

import json
import re
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
from tests.annotations.factories import make_run
from tests.api.clients import bearer
from tests.web.helpers import XSS, login, user

URL = "/api/v1/adjudication/r1"
HTML = {"Accept": "text/html"}


def _label(mode, agent, ev, note=None):
    return {"mode": mode, "agent": agent, "evidence": ev, **({"note": note} if note else {})}


@pytest.fixture
def world(engine):
    """r1: humans a, b, c and a judge. Candidates: CF1/buyer unanimity (pre-accepted), GR1/seller
    majority, VF1/buyer minority, CF2/seller judge only."""
    with Session(engine) as s:
        r1 = make_run(s, "r1", audits=[{"source": "judge-l2", "mode": "CF2", "agent": "seller_agent", "evidence": [4]}])
        users = {n: user(s, n) for n in ("a", "b", "c")}
        rev = user(s, "rev", "reviewer")
        user(s, "rev2", "reviewer")
        tax = latest(s, "a2-failures")
        labels = {
            "a": [_label("CF1", "buyer_agent", [1]), _label("GR1", "seller_agent", [2])],
            "b": [_label("CF1", "buyer_agent", [1, 3]), _label("GR1", "seller_agent", [2])],
            "c": [_label("CF1", "buyer_agent", [0]), _label("VF1", "buyer_agent", [4], note=XSS)],
        }
        for n, labs in labels.items():
            save_annotation(s, users[n], r1, tax, labs, status="submitted")
        headers = bearer(create_token(s, rev))
        s.commit()
    client = TestClient(create_app(engine))
    return client, headers


def _cand(view, mode):
    return next(c for c in view["candidates"] if c["mode"] == mode)


def test_reject_is_stored_distinct_from_undecided_and_not_gold(world, engine):
    client, rev = world
    view = client.get(URL, headers=rev).json()
    assert view["decided"] == {"candidates": 4, "accepted": 1, "rejected": 0, "undecided": 3}
    vf1 = _cand(view, "VF1")
    assert (vf1["decision"], vf1["gold_label_id"], vf1["gold_version"]) == (None, None, 0)
    r = client.post(URL, headers=rev, json={"action": "reject", "mode": "VF1", "agent": "buyer_agent", "version": 0,
                                            "rationale": "event 4 is a proposal, not a claim"})
    assert r.status_code == 200, r.text
    assert r.json()["message"] == "rejected VF1 (buyer_agent): not gold"
    again = client.get(URL, headers=rev).json()  # a reload still shows the decision
    vf1 = _cand(again, "VF1")
    assert (vf1["decision"], vf1["accepted"], vf1["gold_version"]) == ("rejected", False, 1)
    assert _cand(again, "CF2")["decision"] is None  # still undecided: not the same as rejected
    assert again["decided"] == {"candidates": 4, "accepted": 1, "rejected": 1, "undecided": 2}
    (row,) = [g for g in again["gold"] if g["mode"] == "VF1"]
    assert (row["accepted"], row["origin"], row["evidence"], row["rationale"], row["created_by"]) == (
        False, "adjudication", [4], "event 4 is a proposal, not a claim", "rev")
    # the pre-accepted unanimity label, rejected by its pair and version
    cf1 = _cand(again, "CF1")
    r = client.post(URL, headers=rev, json={"action": "reject", "mode": "CF1", "agent": "buyer_agent",
                                            "version": cf1["gold_version"]})
    assert r.status_code == 200 and _cand(r.json(), "CF1")["decision"] == "rejected"
    assert r.json()["decided"]["accepted"] == 0
    r = client.post(URL, headers=rev, json={"action": "accept", "mode": "GR1", "agent": "seller_agent", "version": 0})
    assert r.status_code == 200 and _cand(r.json(), "GR1")["decision"] == "accepted"
    # reopening the adjudication (every GET opens it) keeps the rejections
    assert client.get(URL, headers=rev).json()["decided"] == {"candidates": 4, "accepted": 1, "rejected": 2,
                                                              "undecided": 1}
    r = client.post(URL, headers=rev, json={"action": "finish", "rationale": "GR1 only"})
    assert r.status_code == 200 and r.json()["no_failure"] is False
    with Session(engine) as s:
        rows = {(g.mode, g.accepted) for g in s.exec(select(GoldLabel))}
    assert rows == {("CF1", False), ("VF1", False), ("GR1", True)}

    # gold is GR1 alone: agreement with gold
    g = client.get("/api/v1/agreement/gold", params={"n_boot": 0}, headers=rev).json()
    assert g["n_reference_runs"] == 1 and g["gold_origins"] == {"unanimity": 0, "majority": 1, "adjudication": 0}
    per = {a["annotator"]: a["micro"] for a in g["annotators"]}
    assert (per["a"]["tp"], per["a"]["fp"], per["a"]["fn"]) == (1, 1, 0)  # CF1 is not gold
    assert (per["c"]["tp"], per["c"]["fp"], per["c"]["fn"]) == (0, 2, 1)  # nor VF1
    # the export lists the decisions, rejected ones with accepted false
    exp = client.get("/api/v1/exports/gold_labels.jsonl", headers=rev)
    assert exp.status_code == 200, exp.text
    got = {(x["mode"], x["accepted"]) for x in map(json.loads, exp.text.splitlines())}
    assert got == {("CF1", False), ("VF1", False), ("GR1", True)}
    # the annotator's locked run page shows the gold beside their own labels: GR1 only
    login(client, "c")
    page = client.get("/runs/r1", headers=HTML).text
    beside = page[page.index('id="gold-beside"'):]
    beside = beside[:beside.index("</div>")]
    assert "GR1" in beside and "VF1" not in beside and "CF1" not in beside


def test_accept_and_reject_follow_the_version_rules(world, engine):
    client, rev = world

    def post(**body):
        return client.post(URL, headers=rev, json=body)

    client.get(URL, headers=rev)
    assert post(action="reject", mode="VF1", agent="buyer_agent", version=0).status_code == 200
    # a second reviewer still looking at "undecided" (version 0) is told it was decided meanwhile
    stale = post(action="accept", mode="VF1", agent="buyer_agent", version=0)
    assert stale.status_code == 409
    assert "decided elsewhere" in stale.json()["detail"]
    assert (stale.json()["current"]["accepted"], stale.json()["current"]["version"]) == (False, 1)
    assert post(action="reject", mode="VF1", agent="buyer_agent", version=0).status_code == 409
    ok = post(action="accept", mode="VF1", agent="buyer_agent", version=1)
    assert ok.status_code == 200 and _cand(ok.json(), "VF1")["gold_version"] == 2
    old = post(action="reject", mode="VF1", agent="buyer_agent", version=1)
    assert old.status_code == 409 and old.json()["current"]["version"] == 2
    with Session(engine) as s:
        (g,) = s.exec(select(GoldLabel).where(GoldLabel.mode == "VF1")).all()
        assert (g.accepted, g.version) == (True, 2)  # nothing written by the stale ones
        gid = g.id
    assert post(action="remove", gold_label_id=gid, version=2).status_code == 200
    gone = post(action="reject", mode="VF1", agent="buyer_agent", version=2)
    assert gone.status_code == 409 and gone.json()["current"] is None and "removed elsewhere" in gone.json()["detail"]
    # without a version the decision is simply taken (as for the other actions)
    assert _cand(post(action="reject", mode="VF1", agent="buyer_agent").json(), "VF1")["decision"] == "rejected"
    # version 0 only means "no gold label" for accept / reject
    assert post(action="undo", gold_label_id=gid, version=0).status_code == 422
    assert post(action="reject", mode="VF1", agent="buyer_agent", version=-1).status_code == 422
    bad = post(action="reject", mode="DD1", agent="buyer_agent")
    assert bad.status_code == 422 and bad.json()["detail"].startswith("mode: no submitted label")
    assert post(action="finish", rationale="done").status_code == 200
    locked = post(action="reject", mode="GR1", agent="seller_agent")
    assert locked.status_code == 409 and "reopen" in locked.json()["detail"]


def test_two_reviewers_deciding_one_candidate_at_once_one_wins(world, engine):
    """Both saw VF1 undecided (version 0); one accepts, the others reject, at the same moment:
    exactly one decision is stored, the others get 409 (the GoldRun row lock on PostgreSQL, the
    write transaction on SQLite)."""
    client, rev = world
    client.get(URL, headers=rev)
    n = 6
    with Session(engine) as s:  # one reviewer each: one shared token would serialise the requests on its row
        heads = [bearer(create_token(s, user(s, f"reviewer{i}", "reviewer"))) for i in range(n)]
        s.commit()
    barrier = threading.Barrier(n)

    def go(i):
        barrier.wait()
        body = {"action": "accept" if i == 0 else "reject", "mode": "VF1", "agent": "buyer_agent", "version": 0}
        return client.post(URL, headers=heads[i], json=body).status_code

    with ThreadPoolExecutor(n) as pool:
        codes = sorted(pool.map(go, range(n)))
    assert codes == [200] + [409] * (n - 1)
    with Session(engine) as s:
        assert len(s.exec(select(GoldLabel).where(GoldLabel.mode == "VF1")).all()) == 1


def test_reject_from_the_page_and_the_fragment(world):
    client, _ = world
    token = login(client, "rev")
    page = client.get("/adjudicate/r1", headers=HTML).text
    row = page[page.index('<tr class="undecided" data-status="minority"'):]
    row = row[:row.index("</tr>")]
    form = row[row.index('<form class="inline reject-form"'):]
    assert 'name="action" value="reject"' in form and 'name="version" value="0"' in form
    r = client.post("/adjudicate/r1", headers=HTML, follow_redirects=True,
                    data={"csrf_token": token, "taxonomy": "a2-failures@1", "action": "reject", "mode": "VF1",
                          "agent": "buyer_agent", "version": "0"})
    assert r.status_code == 200 and "Rejected VF1 (buyer_agent): not gold." in r.text
    reload = client.get("/adjudicate/r1", headers=HTML).text
    row = reload[reload.index('<tr class="rejected" data-status="minority"'):]
    row = row[:row.index("</tr>")]
    assert 'data-decision="rejected"' in row and ">rejected</span>" in row
    assert "reject-form" not in row and "accept-form" in row  # it can still be accepted
    assert re.search(r'id="decided">2 of 4 decided: 1 accepted, 1 rejected<', reload)
    # a stale page (version 0 for a decided candidate) is refused with a message, nothing changed
    r = client.post("/adjudicate/r1", headers=HTML, follow_redirects=True,
                    data={"csrf_token": token, "taxonomy": "a2-failures@1", "action": "accept", "mode": "VF1",
                          "agent": "buyer_agent", "version": "0"})
    assert "Not saved" in r.text and "decided elsewhere" in r.text
    assert 'data-decision="rejected"' in r.text

    # the fragment adjudicate.js swaps in: the same panel and trace, as JSON, escaped, no inline script
    f = client.get("/adjudicate/r1", params={"taxonomy": "a2-failures@1", "fragment": "1"})
    assert f.status_code == 200 and f.headers["content-type"].startswith("application/json")
    assert f.headers["cache-control"] == "no-store"
    d = f.json()
    assert (d["run_id"], d["taxonomy"], d["url"]) == ("r1", "a2-failures@1", "/adjudicate/r1?taxonomy=a2-failures%401")
    assert d["title"] == "Adjudicate r1 · a2annotate"
    assert 'id="candidates"' in d["panel_html"] and 'data-decision="rejected"' in d["panel_html"]
    assert 'id="adj-title"' in d["panel_html"] and 'id="trace"' in d["trace_html"]
    assert XSS not in d["panel_html"] and "&lt;script&gt;" in d["panel_html"]  # c's note, escaped
    for html in (d["panel_html"], d["trace_html"]):
        assert "<script" not in html and " style=" not in html and " onclick=" not in html
    assert f'value="{token}"' in d["panel_html"]  # its forms carry the session's CSRF token
    login(client, "a")
    assert client.get("/adjudicate/r1", params={"fragment": "1"}).status_code == 403  # reviewers only


def test_dataset_card_counts_only_accepted_gold_labels_by_origin(tmp_path):
    """The Hugging Face card's provenance: rejected rows (accepted false) are listed as not gold,
    not counted among the gold labels by origin."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from app.exports.hf import SHARD, _provenance

    d = tmp_path / "gold_labels"
    d.mkdir()
    pq.write_table(pa.table({"taxonomy": ["a2-failures@1"] * 4, "origin": ["majority", "adjudication", "unanimity", None],
                             "gold_status": ["adjudicated", "adjudicated", "open", "open"],
                             "accepted": [True, False, False, None]}), d / SHARD)
    gold = _provenance(tmp_path)["gold_labels"]
    assert gold == {"by_origin": {"majority": 1}, "adjudicated_rows": 2, "not_gold_rows": 2, "total_rows": 4}
