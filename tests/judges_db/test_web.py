"""REST and pages of the judges; blind annotators see no judge label anywhere (pages, API, exports)."""
from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Assignment
from app.annotations.service import resolve_taxonomy
from app.auth.models import User
from app.auth.service import create_token
from app.judges.models import JudgeRun
from app.main import create_app
from app.runs.service import get_run
from tests.annotations.factories import make_user
from tests.api.clients import bearer, login
from tests.judges.helpers import judge_file, load_demo, truth_answer
from tests.judges.standin import StandIn, answer

SECRET = "JUDGE-RATIONALE-XYZ"


@pytest.fixture
def site(engine):
    runs = load_demo(engine, 4)
    with Session(engine) as s:
        tokens = {}
        for name, role in (("adam", "admin"), ("rita", "reviewer"), ("ann", "annotator")):
            tokens[name] = create_token(s, make_user(s, name, role))
        tax = resolve_taxonomy(s, None)
        ann = s.exec(select(User).where(User.username == "ann")).one()
        for rid in runs:
            s.add(Assignment(run_pk=get_run(s, rid).id, user_id=ann.id, taxonomy_pk=tax.id, batch="b1"))
        s.commit()

    def script(req):
        ans = truth_answer(runs[req.run_id])
        if not ans["labels"]:
            agent = runs[req.run_id]["agents"][0]["id"]
            ans = {"verdict": "failure", "labels": [{"mode": "DD5", "agent": agent, "evidence": [0]}]}
        for lab in ans["labels"]:
            lab["rationale"] = SECRET
        return answer(ans)

    with StandIn(script) as srv:
        yield create_app(engine), engine, runs, tokens, srv


def _wait(client, url, headers, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = client.get(url, headers=headers).json()
        if st["state"] not in ("queued", "running"):
            return st
        time.sleep(0.1)
    raise AssertionError(f"judge run still {st['state']}")


def test_rest_register_launch_watch_results_score(site):
    app, engine, runs, tokens, srv = site
    rev = bearer(tokens["rita"])
    with TestClient(app) as c:
        bad = c.post("/api/v1/judges", json={"file": judge_file(srv.base_url) + "limits: {concurency: 2}\n"},
                     headers=rev)
        assert bad.status_code == 422 and bad.json()["detail"].startswith("file: limits.concurency: unknown key")
        r = c.post("/api/v1/judges", json={"file": judge_file(srv.base_url)}, headers=rev)
        assert r.status_code == 201 and r.json()["created"] is True
        version = r.json()["version"]
        assert c.post("/api/v1/judges", json={"file": judge_file(srv.base_url)}, headers=rev).json()["created"] is False
        listed = c.get("/api/v1/judges", headers=rev).json()["judges"]
        assert listed[0]["name"] == "tj" and listed[0]["versions"][0]["version"] == version
        dry = c.post("/api/v1/judges/tj/runs", json={"dry_run": True}, headers=rev)
        assert dry.status_code == 200 and dry.json()["runs"] == 4 and dry.json()["calls"] == 4
        assert c.post("/api/v1/judges/nope/runs", json={}, headers=rev).status_code == 404
        assert c.post("/api/v1/judges/tj/runs", json={"run_ids": ["nope"]}, headers=rev).status_code == 422
        r = c.post("/api/v1/judges/tj/runs", json={}, headers=rev)
        assert r.status_code == 202, r.text
        url = r.headers["location"]
        assert url == r.json()["status_url"] and url.startswith("/api/v1/judges/tj/runs/")
        assert r.json()["state"] in ("queued", "running", "done") and r.json()["progress"]["total"] == 4
        st = _wait(c, url, rev)
        assert st["state"] == "done" and st["progress"] == {"done": 4, "total": 4} and st["calls"] == 4
        assert st["states"] == {"done": 4} and st["tokens_in"] == 400
        assert c.post(url + "/cancel", headers=rev).status_code == 409
        res = c.get("/api/v1/judges/tj/results", headers=rev).json()
        assert res["total"] == 4 and {x["state"] for x in res["results"]} == {"done"}
        assert all(lab["rationale"] == SECRET for x in res["results"] for lab in x["answer"]["labels"])
        sc = c.get("/api/v1/judges/tj/score?n_boot=0", headers=rev)
        assert sc.status_code == 200 and sc.json()["version"] == version and sc.json()["n_judged"] == 4
        assert c.get("/api/v1/judges/tj/runs", headers=rev).json()["runs"][0]["id"] == st["id"]
        again = c.post("/api/v1/judges/tj/runs", json={}, headers=rev)
        assert again.status_code == 202 and _wait(c, again.headers["location"], rev)["skipped"] == 4
        assert len(srv.log) == 4
        # humans vs judges: the judge appears in agreement like imported judges do
        ag = c.get("/api/v1/agreement?include_judges=true&n_boot=0", headers=rev)
        assert ag.status_code == 200 and "judge:tj" in json.dumps(ag.json())
        labs = c.get("/api/v1/annotations?annotator=judge:tj", headers=rev).json()
        items = labs["items"] if isinstance(labs, dict) else labs
        assert len(items) == 4


def test_rest_launch_with_two_processes(site):
    """A judge file asking for 2 processes, launched as a job: every run judged once, counters right."""
    app, engine, runs, tokens, srv = site
    rev = bearer(tokens["rita"])
    with TestClient(app) as c:
        text = judge_file(srv.base_url) + "limits: {concurrency: 2, processes: 2}\n"
        assert c.post("/api/v1/judges", json={"file": text}, headers=rev).status_code == 201
        r = c.post("/api/v1/judges/tj/runs", json={}, headers=rev)
        assert r.status_code == 202, r.text
        st = _wait(c, r.headers["location"], rev)
        assert st["state"] == "done" and st["progress"] == {"done": 4, "total": 4} and st["calls"] == 4
        assert st["states"] == {"done": 4} and st["tokens_in"] == 400 and st["errors"] == 0
    assert sorted(srv.runs_requested()) == sorted(runs)  # each run asked for once


def test_pages_define_launch_watch_cancel(site):
    app, engine, runs, tokens, srv = site
    with TestClient(app) as c:
        csrf = login(c, "rita")
        r = c.post("/judges/define", data={"file": judge_file(srv.base_url), "csrf_token": csrf})
        assert r.status_code == 200 and "Registered new version tj@" in r.text
        r = c.post("/judges/define", data={"file": "judge: 1\nname: x\n", "csrf_token": csrf})
        assert "endpoint: required key is missing" in r.text
        r = c.post("/judges/launch", data={"judge": "tj", "dry_run": "1", "csrf_token": csrf})
        assert "Estimate for tj@" in r.text and 'id="judge-estimate"' in r.text
        r = c.post("/judges/launch", data={"judge": "tj", "csrf_token": csrf})
        assert r.status_code == 200 and "started over 4 runs" in r.text
        with Session(engine) as s:
            jr_id = s.exec(select(JudgeRun.id)).one()
        _wait(c, f"/api/v1/judges/tj/runs/{jr_id}", {"X-CSRF-Token": csrf})
        page = c.get("/judges")
        assert page.status_code == 200 and "tj@" in page.text and "<progress" in page.text
        r = c.post(f"/judges/tj/runs/{jr_id}/cancel", data={"csrf_token": csrf})
        assert "has already ended" in r.text
        sp = c.get("/judges/tj")
        assert sp.status_code == 200 and "Per mode" in sp.text and "Confusion" in sp.text
        rid = sorted(runs)[0]
        dp = c.get(f"/judges/tj/runs/{rid}")
        assert dp.status_code == 200 and SECRET in dp.text and "#0 [" in dp.text and "the run page" in dp.text


def test_blind_annotator_sees_no_judge_label(site):
    app, engine, runs, tokens, srv = site
    rev, ann = bearer(tokens["rita"]), bearer(tokens["ann"])
    with TestClient(app) as c:
        c.post("/api/v1/judges", json={"file": judge_file(srv.base_url)}, headers=rev)
        r = c.post("/api/v1/judges/tj/runs", json={}, headers=rev)
        _wait(c, r.headers["location"], rev)
        assert SECRET in c.get("/api/v1/annotations?annotator=judge:tj", headers=rev).text
        # the API
        for path in ("/api/v1/judges", "/api/v1/judges/tj/results", "/api/v1/judges/tj/score",
                     r.headers["location"], "/api/v1/agreement"):
            got = c.get(path, headers=ann)
            assert got.status_code == 403, path
        assert c.post("/api/v1/judges/tj/runs", json={}, headers=ann).status_code == 403
        mine = c.get("/api/v1/annotations", headers=ann)
        assert mine.status_code == 200 and "judge:tj" not in mine.text and SECRET not in mine.text
        other = c.get("/api/v1/annotations?annotator=judge:tj", headers=ann)
        assert other.status_code == 403 or ("judge:tj" not in other.text and SECRET not in other.text)
        for rid in runs:
            one = c.get(f"/api/v1/runs/{rid}", headers=ann)
            assert one.status_code == 200 and SECRET not in one.text and "judge:tj" not in one.text
        # exports
        for table in ("annotations", "annotations_canonical", "audits", "runs"):
            for fmt in ("jsonl", "csv"):
                e = c.get(f"/api/v1/exports/{table}.{fmt}", headers=ann)
                assert e.status_code in (200, 403), (table, e.status_code)
                assert SECRET not in e.text and "judge:tj" not in e.text, table
        # pages
        login(c, "ann")
        for rid in runs:
            page = c.get(f"/runs/{rid}")
            assert page.status_code == 200 and SECRET not in page.text and "judge:tj" not in page.text
        for path in ("/judges", "/judges/tj", f"/judges/tj/runs/{sorted(runs)[0]}"):
            got = c.get(path, follow_redirects=False)
            assert got.status_code in (403, 303) and SECRET not in got.text, path
        home = c.get("/")
        assert SECRET not in home.text and "judge:tj" not in home.text


def test_judge_run_in_a_study_takes_only_its_runs(engine):
    """`select_pending(scope=)` (CLI --study, REST `study`) keeps the study's runs only."""
    from sqlmodel import Session

    from app.judges import service
    from app.studies.service import create_study, study_run_ids
    from tests.annotations.factories import make_run
    from tests.judges.helpers import judge_file

    with Session(engine) as s:
        for i in range(4):
            make_run(s, f"sj{i}", family="commerce" if i < 3 else "travel")
        study = create_study(s, "travel-only", selection={"family": "travel"})
        jv, _ = service.register(s, judge_file("http://127.0.0.1:9/v1"), "j.yaml")
        s.commit()
        everything, _ = service.select_pending(s, jv)
        scoped, _ = service.select_pending(s, jv, scope=study_run_ids(s, study))
    assert [r for _, r, _ in scoped] == ["sj3"]
    assert len(everything) == 4
