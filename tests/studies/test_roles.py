"""Roles that fit a team: a reviewer who leads a study makes and undoes batches, watches progress,
adjudicates and runs detectors in it, through pages and API; users, tokens and other studies'
admin pages answer 403 (both databases)."""
from __future__ import annotations

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Annotation, Assignment
from app.auth.models import User
from app.auth.service import create_token
from app.jobs.models import Job
from app.runs.models import Run
from app.studies.access import allowed
from app.studies.service import create_study, get_study
from tests.annotations.factories import make_run, make_user
from tests.api.clients import bearer, login


def _setup(engine):
    with Session(engine) as s:
        for i in range(6):
            make_run(s, f"a{i}", family="commerce")
        for i in range(4):
            make_run(s, f"b{i}", family="legal")
        make_user(s, "adm", "admin")
        for n in ("lead", "other", "plain"):
            make_user(s, n, "reviewer")
        for n in ("ann1", "ann2", "ann3"):
            make_user(s, n)
        create_study(s, "alpha", selection={"family": "commerce"}, leads=["lead"], annotators=["ann1", "ann2"])
        create_study(s, "beta", selection={"family": "legal"}, leads=["other"], annotators=["ann3"])
        tokens = {n: create_token(s, s.exec(select(User).where(User.username == n)).one())
                  for n in ("lead", "adm", "plain", "ann1")}
        s.commit()
    from app.main import create_app

    return create_app(engine), tokens


def test_the_permission_rule(engine):
    _setup(engine)
    with Session(engine) as s:
        users = {u.username: u for u in s.exec(select(User)).all()}
        alpha, beta = get_study(s, "alpha"), get_study(s, "beta")
        lead, plain, adm, ann = users["lead"], users["plain"], users["adm"], users["ann1"]
        for action in ("assign", "progress", "adjudicate", "detect", "judge", "export", "reports", "agreement"):
            assert allowed(s, lead, action, alpha) and not allowed(s, lead, action, beta)
            assert allowed(s, adm, action, beta)
            assert not allowed(s, plain, action, alpha)
        for action in ("users", "tokens", "reveal"):
            assert not allowed(s, lead, action) and not allowed(s, lead, action, alpha) and allowed(s, adm, action)
        assert not allowed(s, lead, "assign") and not allowed(s, lead, "detect")  # over every run: admins
        assert allowed(s, lead, "capture") and not allowed(s, plain, "capture")
        assert allowed(s, plain, "progress") and allowed(s, plain, "adjudicate")  # as before studies
        assert allowed(s, ann, "reports", alpha) and not allowed(s, ann, "assign", alpha)
        assert not allowed(s, ann, "reports", beta)


def test_lead_pages(engine):
    app, _ = _setup(engine)
    c = TestClient(app)
    csrf = login(c, "lead")
    # the assignments page takes a lead to their study; other studies and "all runs" are refused
    res = c.get("/admin/assignments", follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"].endswith("study=alpha")
    page = c.get("/admin/assignments?study=alpha")
    assert page.status_code == 200 and 'id="study-switcher"' in page.text and "beta" not in page.text
    assert c.get("/admin/assignments?study=beta").status_code == 403
    assert c.get("/admin/assignments?study=nope").status_code == 404
    form = {"csrf_token": csrf, "study": "alpha", "annotators": ["ann1", "ann2"], "k": "2", "seed": "4",
            "sample_size": "3", "batch": "lead-1", "policy": "random"}
    preview = c.post("/admin/assignments/preview", data=form)
    assert preview.status_code == 200 and preview.json()["created"] == 6
    assert preview.json()["first_picks"][0]["inclusion_prob"] == 0.5
    res = c.post("/admin/assignments", data=form)
    assert res.status_code == 200, res.text
    with Session(engine) as s:
        rows = s.exec(select(Assignment, Run.run_id).join(Run, Run.id == Assignment.run_pk)).all()
        alpha_id = get_study(s, "alpha").id
    assert len(rows) == 6 and all(rid.startswith("a") for _, rid in rows)
    assert {(a.study_id, a.policy, a.seed, a.inclusion_prob) for a, _ in rows} == {(alpha_id, "random", 4, 0.5)}
    assert c.post("/admin/assignments", data={**form, "study": "beta"}).status_code == 403
    assert c.post("/admin/assignments", data={**form, "study": ""}).status_code == 403
    # undo: in their study only
    assert c.post("/admin/assignments/undo", data={"csrf_token": csrf, "batch": "lead-1", "taxonomy_pk": str(
        rows[0][0].taxonomy_pk), "study": "beta"}).status_code == 403
    res = c.post("/admin/assignments/undo", data={"csrf_token": csrf, "batch": "lead-1",
                                                  "taxonomy_pk": str(rows[0][0].taxonomy_pk), "study": "alpha"},
                 follow_redirects=False)
    assert res.status_code == 303
    with Session(engine) as s:
        assert s.exec(select(Assignment)).all() == []
    # progress and detectors in the study; detectors elsewhere refused
    assert c.get("/admin/progress?study=alpha").status_code == 200
    assert c.get("/admin/progress?study=beta").status_code == 403
    assert c.get("/admin/detectors?study=alpha").status_code == 200
    assert c.get("/admin/detectors?study=beta").status_code == 403
    res = c.post("/admin/detectors/run", data={"csrf_token": csrf, "study": "alpha"}, follow_redirects=False)
    # the run is a detect job in the study; the lead who started it is sent to its page and may see it
    assert res.status_code == 303 and res.headers["location"].startswith("/jobs/")
    job_id = res.headers["location"].rsplit("/", 1)[-1]
    with Session(engine) as s:
        job = s.get(Job, job_id)
        assert job.kind == "detect" and job.params.get("study") == get_study(s, "alpha").id and job.state == "done"
    assert c.get(res.headers["location"]).status_code == 200
    with Session(engine) as s:
        detected = set(s.exec(select(Run.run_id).join(Annotation, Annotation.run_pk == Run.id).join(
            User, User.id == Annotation.user_id).where(User.username.like("detector:%"))).all())
    assert detected == {f"a{i}" for i in range(6)}
    assert c.post("/admin/detectors/run", data={"csrf_token": csrf, "study": "beta"}).status_code == 403
    assert c.get("/admin/capture").status_code == 200
    assert c.get("/admin/studies").status_code == 200
    # an admin's pages stay closed
    for url in ("/admin", "/admin/tokens"):
        assert c.get(url).status_code == 403
    assert c.post("/admin/users", data={"csrf_token": csrf, "username": "x", "role": "admin",
                                        "password": "long enough pw"}).status_code == 403
    assert c.post("/admin/studies", data={"csrf_token": csrf, "name": "mine"}).status_code == 403
    # a reviewer who leads nothing: as before studies
    c2 = TestClient(app)
    login(c2, "plain")
    assert c2.get("/admin/assignments").status_code == 403
    assert c2.get("/admin/detectors").status_code == 403
    assert c2.get("/admin/capture").status_code == 403
    assert c2.get("/admin/progress").status_code == 200


def test_lead_api(engine):
    app, tokens = _setup(engine)
    c = TestClient(app)
    h = bearer(tokens["lead"])
    body = {"study": "alpha", "annotators": ["ann1", "ann2"], "k": 1, "seed": 2, "sample_size": 4, "batch": "api-1"}
    assert c.post("/api/v1/assignments", json={**body, "preview": True}, headers=h).json()["created"] == 4
    with Session(engine) as s:
        assert s.exec(select(Assignment)).all() == []  # the preview wrote nothing
    res = c.post("/api/v1/assignments", json=body, headers=h)
    assert res.status_code == 200 and res.json()["created"] == 4 and res.json()["study"] == "alpha"
    assert c.post("/api/v1/assignments", json={**body, "study": "beta"}, headers=h).status_code == 403
    assert c.post("/api/v1/assignments", json={k: v for k, v in body.items() if k != "study"},
                  headers=h).status_code == 403
    assert c.delete("/api/v1/assignments/batches/api-1?study=beta", headers=h).status_code == 403
    res = c.delete("/api/v1/assignments/batches/api-1?study=alpha", headers=h)
    assert res.status_code == 200 and res.json() == {"batch": "api-1", "removed": 4, "kept": 0}
    # adjudication inside the study; runs of other studies are not found there
    assert c.get("/api/v1/adjudication/a1?study=alpha", headers=h).status_code == 200
    assert c.get("/api/v1/adjudication/b1?study=alpha", headers=h).status_code == 404
    assert c.get("/api/v1/adjudication/b1?study=beta", headers=h).status_code == 403
    res = c.post("/api/v1/adjudication/a1", json={"action": "finish", "rationale": "nothing to see",
                                                  "study": "alpha"}, headers=h)
    assert res.status_code == 200, res.text
    assert c.post("/api/v1/adjudication/b1", json={"action": "finish", "rationale": "x", "study": "beta"},
                  headers=h).status_code == 403
    # detectors over the study's runs only
    res = c.post("/api/v1/detectors/run", json={"study": "alpha"}, headers=h)
    assert res.status_code == 200 and res.json()["runs"] == 6
    assert c.post("/api/v1/detectors/run", json={"study": "beta"}, headers=h).status_code == 403
    assert c.post("/api/v1/detectors/run", json={}, headers=h).status_code == 403
    # progress, reports, exports in the study
    assert c.get("/api/v1/progress?study=alpha", headers=h).status_code == 200
    assert c.get("/api/v1/progress?study=beta", headers=h).status_code == 403
    assert c.get("/api/v1/exports/runs.csv?study=beta", headers=h).status_code == 403
    assert len(c.get("/api/v1/exports/runs.csv?study=alpha", headers=h).text.strip().splitlines()) == 7
    # users and tokens stay an admin's; so do studies themselves
    assert c.post("/api/v1/studies", json={"name": "mine"}, headers=h).status_code == 403
    assert c.post("/api/v1/studies/alpha/members", json={"username": "ann3", "role": "annotator"},
                  headers=h).status_code == 403
    # a member annotator sees the study's reports but cannot assign in it
    ha = bearer(tokens["ann1"])
    assert c.post("/api/v1/assignments", json=body, headers=ha).status_code == 403
    assert c.get("/api/v1/exports/runs.csv?study=beta", headers=ha).status_code == 403
    # the admin may do everything everywhere
    hadm = bearer(tokens["adm"])
    assert c.post("/api/v1/assignments", json={**body, "study": "beta", "batch": "adm"}, headers=hadm).json()[
        "runs_matching"] == 4
    assert [s["name"] for s in c.get("/api/v1/studies", headers=h).json()] == ["alpha"]
    assert {s["name"] for s in c.get("/api/v1/studies", headers=hadm).json()} == {"alpha", "beta"}


def test_export_page_takes_a_study(engine):
    app, _ = _setup(engine)
    c = TestClient(app)
    login(c, "ann1")  # a member of alpha
    page = c.get("/exports?study=alpha")
    assert page.status_code == 200 and 'id="study-switcher"' in page.text
    assert "/api/v1/exports/runs.csv?study=alpha" in page.text
    assert c.get("/exports?study=beta").status_code == 403
    res = c.get("/exports/download?table=runs&fmt=csv&study=alpha", follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"] == "/api/v1/exports/runs.csv?study=alpha"
    rows = c.get(res.headers["location"]).text.strip().splitlines()
    assert len(rows) == 7 and all(r.split(",")[0].startswith("a") for r in rows[1:])
    plain = c.get("/exports").text  # without a study: the links as before
    assert 'href="/api/v1/exports/runs.csv"' in plain and "?study=" not in plain
