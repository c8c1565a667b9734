"""Skip and flag through the REST API and the pages: the queue moves on, reviewers see flags,
resolving one puts the run back in the annotator's queue."""
from __future__ import annotations

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.annotations.models import Assignment
from app.annotations.service import resolve_taxonomy
from app.main import create_app
from tests.annotations.factories import make_run, make_user
from tests.api.clients import login


def _setup(engine) -> TestClient:
    with Session(engine) as s:
        tax = resolve_taxonomy(s, None)
        ann = make_user(s, "ann")
        make_user(s, "rev", "reviewer")
        for pos, rid in enumerate(["r1", "r2", "r3"]):
            run = make_run(s, rid)
            s.add(Assignment(run_pk=run.id, user_id=ann.id, taxonomy_pk=tax.id, position=pos, batch="b"))
        s.commit()
    return TestClient(create_app(engine))


def test_flag_and_skip_move_the_queue_on_and_reviewers_see_them(engine):
    client = _setup(engine)
    token = login(client, "ann")
    h = {"X-CSRF-Token": token}
    assert client.get("/api/v1/queue/next").json()["run_id"] == "r1"
    r = client.post("/api/v1/flags", json={"run_id": "r1", "kind": "flag", "reason": "broken_log",
                                           "note": "events 4-9 missing"}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["next_run_id"] == "r2" and r.json()["kind"] == "flag"
    r = client.post("/api/v1/flags", json={"run_id": "r2", "kind": "skip", "reason": "needs_expert"}, headers=h)
    assert r.json()["next_run_id"] == "r3"
    q = client.get("/api/v1/queue").json()
    assert [i["status"] for i in q["items"]] == ["flagged", "skipped", "new"] and q["set_aside"] == 2
    assert q["items"][0]["reason"] == "broken_log"
    home = client.get("/").text
    assert "skipped or flagged" in home and "/runs/r3" in home.split('id="start-next"')[1][:200]
    page = client.get("/runs/r1").text
    config = page.split('id="run-config">')[1].split("</script>")[0]
    assert '"kind": "flag"' in config and '"reason": "broken_log"' in config

    # 'other' needs a note; an unknown reason is refused naming the field
    r = client.post("/api/v1/flags", json={"run_id": "r3", "kind": "flag", "reason": "other"}, headers=h)
    assert r.status_code == 422 and "note" in r.json()["detail"]
    r = client.post("/api/v1/flags", json={"run_id": "r3", "kind": "flag", "reason": "bored"}, headers=h)
    assert r.status_code == 422 and "reason" in r.json()["detail"]
    assert client.get("/api/v1/flags").status_code == 403  # annotators do not list everyone's flags

    rev = TestClient(client.app)
    rtoken = login(rev, "rev")
    flags = rev.get("/api/v1/flags").json()
    assert [(f["run_id"], f["kind"], f["annotator"]) for f in flags] == [("r1", "flag", "ann"), ("r2", "skip", "ann")]
    page = rev.get("/flagged").text
    assert "events 4-9 missing" in page and "broken log" in page
    assert "Flagged by annotators" in rev.get("/runs/r1").text
    r = rev.post(f"/flagged/{flags[0]['id']}/resolve", data={"csrf_token": rtoken}, follow_redirects=False)
    assert r.status_code == 303
    assert [f["run_id"] for f in rev.get("/api/v1/flags").json()] == ["r2"]

    # resolved: r1 is first in the queue again; taking back the skip returns r2 as well
    assert client.get("/api/v1/queue/next").json()["run_id"] == "r1"
    assert client.delete("/api/v1/flags", params={"run_id": "r2"}, headers=h).status_code == 200
    assert [i["status"] for i in client.get("/api/v1/queue").json()["items"]] == ["new", "new", "new"]
    assert client.delete("/api/v1/flags", params={"run_id": "r2"}, headers=h).status_code == 404
