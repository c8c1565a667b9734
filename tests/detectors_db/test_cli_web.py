"""`a2annotate detect`, the admin page and its button, hints only where an admin turned them on."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlmodel import Session, select

import app.cli.detect as cli_detect
from app.annotations.models import Annotation, Assignment
from app.annotations.service import resolve_taxonomy
from app.auth.models import User
from app.cli import cli
from app.core.config import get_settings
from app.detectors import service as det
from app.jobs.models import Job
from app.main import create_app
from app.runs.service import get_run
from tests.annotations.factories import make_user
from tests.api.clients import login

from .data import leaky_run
from .test_service import _anns, _store


@pytest.fixture
def site(engine):
    with Session(engine) as s:
        _store(s, leaky_run("r1"))
        _store(s, leaky_run("r2", leak=False))
        make_user(s, "adam", "admin")
        for name in ("alice", "bob"):
            make_user(s, name)
        tax = resolve_taxonomy(s, None)
        users = {u.username: u.id for u in s.exec(select(User)).all()}
        for run_id in ("r1", "r2"):
            pk = get_run(s, run_id).id
            s.add(Assignment(run_pk=pk, user_id=users["alice"], taxonomy_pk=tax.id, batch="pilot"))
            s.add(Assignment(run_pk=pk, user_id=users["bob"], taxonomy_pk=tax.id, batch="control"))
        s.commit()
    return create_app(engine), engine


def test_cli_detect_list_only_score(engine, monkeypatch, tmp_path):
    with Session(engine) as s:
        _store(s, leaky_run("r1"))
        s.commit()
    monkeypatch.setattr(cli_detect, "checked_engine", lambda: engine)
    run = CliRunner().invoke
    r = run(cli, ["detect", "--list"])
    assert r.exit_code == 0 and re.search(r"^leak\t1\tprivate-value-leak\tbuiltin", r.output, re.M), r.output
    r = run(cli, ["detect", "--only", "leak,handoff"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "detected on 1 runs: labels handoff 0, leak 1; errors 0"
    r = run(cli, ["detect", "--score", "--json", "--n-boot", "20"])
    rep = json.loads(r.output)
    assert [s["source"] for s in rep["sources"]] == ["detector:handoff", "detector:leak"]
    r = run(cli, ["detect", "--score"])
    assert "detector:leak" in r.output and "CF1" in r.output and "Wilson" in r.output
    r = run(cli, ["detect", "--only", "nope"])
    assert r.exit_code == 1 and r.output.startswith("Error: unknown detector 'nope'")
    # a user detector from the DETECTORS setting that raises: reported, exit 1, the others stored
    f = tmp_path / "bad.py"
    f.write_text("def broken(run):\n    raise KeyError('events')\n")
    monkeypatch.setattr(get_settings(), "detectors", f"{f}:broken")
    r = run(cli, ["detect"])
    assert r.exit_code == 1
    last = r.output.strip().splitlines()[-1]
    assert last == ("Error: 1 detector failure(s) (broken); first: run r1: detector broken: KeyError: 'events' "
                    "(bad.py:2) (--json lists them all)"), r.output
    r = run(cli, ["detect", "--json"])
    assert r.exit_code == 1 and json.loads(r.output[:r.output.rindex("}") + 1])["errors"][0]["detector"] == "broken"
    with Session(engine) as s:
        assert len(_anns(s, "detector:divergence")) == 1 and _anns(s, "detector:broken") == []


def test_admin_page_button_and_hints_per_batch(site):
    app, engine = site
    admin = TestClient(app)
    token = login(admin, "adam")
    assert 'action="/admin/detectors/run"' in admin.get("/admin").text
    page = admin.get("/admin/detectors")
    assert page.status_code == 200 and "private-value-leak" in page.text and "pilot" in page.text
    assert admin.post("/admin/detectors/run", data={}, follow_redirects=False).status_code == 403  # CSRF
    res = admin.post("/admin/detectors/run", data={"csrf_token": token, "only": "zzz"}, follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"] == "/admin/detectors"  # refused before any job
    assert "unknown detector" in admin.get("/admin/detectors").text
    res = admin.post("/admin/detectors/run", data={"csrf_token": token}, follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"].startswith("/jobs/")  # a detect job, shown
    job_page = admin.get(res.headers["location"])
    assert job_page.status_code == 200 and ": detect</h1>" in job_page.text
    assert 'id="job-state" class="job-done">done' in job_page.text
    assert 'id="result-runs">2<' in job_page.text and 'href="/admin/detectors"' in job_page.text
    with Session(engine) as s:
        job = s.get(Job, res.headers["location"].rsplit("/", 1)[1])
        assert job.kind == "detect" and job.result["runs"] == 2 and job.progress_done == 2
    page = admin.get("/admin/detectors")
    assert "detector:leak" in page.text and 'id="result-age"' in page.text  # the scores: a stored result

    alice, bob = TestClient(app), TestClient(app)
    login(alice, "alice")
    login(bob, "bob")
    # off by default: nobody sees hints
    for c in (alice, bob):
        assert 'id="detector-hints"' not in c.get("/runs/r1").text
    res = admin.post("/admin/detectors/hints", data={"csrf_token": token, "batch": "pilot", "on": "true"},
                     follow_redirects=False)
    assert res.status_code == 303
    with Session(engine) as s:  # a run the detectors never saw says so
        s.execute(Annotation.__table__.delete().where(Annotation.run_pk == get_run(s, "r2").id,
                                                      Annotation.origin == "detector"))
        s.commit()
    assert "No detector has run on this run yet." in alice.get("/runs/r2").text
    with Session(engine) as s:
        assert det.hint_batches(s) == ["pilot"]
    text = alice.get("/runs/r1").text
    assert 'id="detector-hints"' in text and "disclosed private budget_usd" in text and 'href="#e-2"' in text
    assert 'id="detector-hints"' not in bob.get("/runs/r1").text  # batch "control": no hints
    assert "No detector has run on this run yet." not in text
    # each annotation records whether hints were on while it was made
    a_tok = re.search(r'<meta name="csrf-token" content="([^"]+)">', alice.get("/runs/r1").text).group(1)
    b_tok = re.search(r'<meta name="csrf-token" content="([^"]+)">', bob.get("/runs/r1").text).group(1)
    body = {"run_id": "r1", "labels": [{"mode": "CF1", "agent": "buyer_agent", "evidence": [2]}], "status": "submitted"}
    ra = alice.post("/api/v1/annotations", json=body, headers={"X-CSRF-Token": a_tok})
    rb = bob.post("/api/v1/annotations", json=body, headers={"X-CSRF-Token": b_tok})
    assert ra.status_code in (200, 201) and rb.status_code in (200, 201), (ra.text, rb.text)
    assert ra.json()["hints_on"] is True and rb.json()["hints_on"] is False
    # turned off again later: alice's annotation stays marked as hinted when she saves again
    admin.post("/admin/detectors/hints", data={"csrf_token": token, "batch": "pilot", "on": "false"})
    assert 'id="detector-hints"' not in alice.get("/runs/r1").text
    ra = alice.post("/api/v1/annotations", json=body, headers={"X-CSRF-Token": a_tok})
    assert ra.json()["hints_on"] is True
    with Session(engine) as s:
        flags = {u: a.hints_on for u, a in s.execute(
            select(User.username, Annotation).join(Annotation, Annotation.user_id == User.id)
            .where(User.kind == "human"))}
        assert flags == {"alice": True, "bob": False}
        rep = det.score_report(s, n_boot=0)
        groups = {x["source"]: x["n_units"] for x in rep["sources"] if x["kind"] == "humans"}
        assert groups == {"humans, hints on": 1, "humans, hints off": 1}
    res = admin.post("/admin/detectors/hints", data={"csrf_token": token, "batch": "nope", "on": "true"})
    assert "no assignment batch &#39;nope&#39;" in res.text


def test_rest_api(site):
    app, engine = site
    with Session(engine) as s:
        from app.auth.service import create_token

        adam = s.exec(select(User).where(User.username == "adam")).one()
        alice = s.exec(select(User).where(User.username == "alice")).one()
        tok_admin, tok_alice = create_token(s, adam), create_token(s, alice)
        s.commit()
    c = TestClient(app)
    h = {"Authorization": f"Bearer {tok_admin}"}
    lst = c.get("/api/v1/detectors", headers={"Authorization": f"Bearer {tok_alice}"}).json()
    assert {d["name"]: d["mode"] for d in lst["detectors"]}["leak"] == "CF1"
    r = c.post("/api/v1/detectors/run", json={"only": ["leak"], "run_ids": ["r1"]}, headers=h)
    assert r.status_code == 200 and r.json()["labels"] == {"leak": 1} and r.json()["runs"] == 1
    assert r.headers["Content-Location"].startswith("/api/v1/jobs/")  # it ran as a detect job
    r = c.post("/api/v1/detectors/run", json={"only": ["zzz"]}, headers=h)
    assert r.status_code == 422 and "unknown detector 'zzz'" in r.json()["detail"]
    r = c.post("/api/v1/detectors/run", json={"run_ids": ["nope"]}, headers=h)  # fails inside the job
    assert r.status_code == 422 and "no run 'nope'" in r.json()["detail"] and r.json()["job"]
    r = c.post("/api/v1/detectors/run", json={"only": ["leak"]}, headers={**h, "Prefer": "respond-async"})
    assert r.status_code == 202
    job = c.get(r.headers["Location"], headers=h).json()
    assert job["kind"] == "detect" and job["state"] == "done" and job["result"]["labels"] == {"leak": 1}
    assert job["progress"]["done"] == job["progress"]["total"] == job["result"]["runs"]
    assert c.post("/api/v1/detectors/run", json={}, headers={"Authorization": f"Bearer {tok_alice}"}).status_code == 403
    r = c.get("/api/v1/detectors/scores?n_boot=10&level=agent", headers=h)
    assert r.status_code == 200 and r.json()["sources"][0]["source"] == "detector:leak"
    assert c.get("/api/v1/detectors/scores?reference=x", headers=h).status_code == 422
    assert c.get("/api/v1/detectors/scores", headers={"Authorization": f"Bearer {tok_alice}"}).status_code == 403
    with Session(engine) as s:
        from app.auth.service import create_token

        rita = make_user(s, "rita", "reviewer")
        tok_rita = create_token(s, rita)
        s.commit()
    hr = {"Authorization": f"Bearer {tok_rita}"}
    assert c.get("/api/v1/detectors/scores", headers=hr).status_code == 403  # the truth is for admins
    assert c.get("/api/v1/detectors/scores?reference=gold&n_boot=0", headers=hr).status_code == 200
