"""Admin pages: users (add, reset password, deactivate, role), reveal toggle, assignments form,
progress page, role checks and CSRF on every form."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.blind import labels_revealed
from app.annotations.models import Assignment
from app.auth.models import User
from app.auth.service import authenticate, create_token
from app.main import create_app
from tests.annotations.factories import PASSWORD, make_run, make_user
from tests.api.clients import bearer, login


@pytest.fixture
def site(engine):
    with Session(engine) as s:
        for i in range(4):
            make_run(s, f"r{i}", family="commerce" if i < 3 else "legal")
        make_user(s, "adam", "admin")
        make_user(s, "rita", "reviewer")
        make_user(s, "alice")
        make_user(s, "bob")
        s.commit()
    app = create_app(engine)
    return app, engine


def _user(engine, name) -> User | None:
    with Session(engine) as s:
        return s.exec(select(User).where(User.username == name)).first()


def test_user_management(site):
    app, engine = site
    admin = TestClient(app)
    token = login(admin, "adam")
    page = admin.get("/admin")
    assert page.status_code == 200 and "alice" in page.text and "Reveal labels to annotators" in page.text

    # add a user: refused without the CSRF field, works with it
    form = {"username": "carol", "role": "reviewer", "password": "s3cret-enough"}
    assert admin.post("/admin/users", data=form, follow_redirects=False).status_code == 403
    assert _user(engine, "carol") is None
    res = admin.post("/admin/users", data={**form, "csrf_token": token}, follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"] == "/admin"
    assert "Created reviewer carol." in admin.get("/admin").text
    carol = _user(engine, "carol")
    assert carol.role == "reviewer"
    with Session(engine) as s:
        assert authenticate(s, "carol", "s3cret-enough") is not None

    # a too-short password is reported, nothing created
    res = admin.post("/admin/users", data={"username": "dan", "role": "annotator", "password": "short",
                                           "csrf_token": token})  # follows the redirect to /admin
    assert _user(engine, "dan") is None
    assert "Could not create user: password must have at least 8 characters" in res.text

    # reset password
    admin.post(f"/admin/users/{carol.id}/password", data={"password": "another-pass", "csrf_token": token})
    with Session(engine) as s:
        assert authenticate(s, "carol", "another-pass") is not None
        assert authenticate(s, "carol", "s3cret-enough") is None

    # role change
    admin.post(f"/admin/users/{carol.id}/role", data={"role": "annotator", "csrf_token": token})
    assert _user(engine, "carol").role == "annotator"

    # deactivate: the user can no longer log in, their session and API tokens stop working
    bob = _user(engine, "bob")
    with Session(engine) as s:
        bob_token = bearer(create_token(s, s.get(User, bob.id)))
        s.commit()
    bob_client = TestClient(app)
    login(bob_client, "bob")
    assert bob_client.get("/", follow_redirects=False).status_code == 200
    assert admin.post(f"/admin/users/{bob.id}/active", data={"active": "false"}).status_code == 403  # no CSRF
    assert _user(engine, "bob").is_active
    admin.post(f"/admin/users/{bob.id}/active", data={"active": "false", "csrf_token": token})
    assert not _user(engine, "bob").is_active
    assert bob_client.get("/", follow_redirects=False).status_code == 303
    assert TestClient(app).get("/api/v1/queue", headers=bob_token).status_code == 401
    with Session(engine) as s:
        assert authenticate(s, "bob", PASSWORD) is None
    admin.post(f"/admin/users/{bob.id}/active", data={"active": "true", "csrf_token": token})
    assert _user(engine, "bob").is_active

    # an admin cannot lock themselves out
    adam = _user(engine, "adam")
    res = admin.post(f"/admin/users/{adam.id}/active", data={"active": "false", "csrf_token": token})
    assert _user(engine, "adam").is_active
    assert "you cannot deactivate your own account" in res.text
    assert "you cannot deactivate your own account" not in admin.get("/admin").text  # shown once


def test_reveal_toggle(site):
    app, engine = site
    admin = TestClient(app)
    token = login(admin, "adam")
    with Session(engine) as s:
        assert labels_revealed(s) is False  # blind mode is on by default
    assert admin.post("/admin/reveal", data={"revealed": "true"}).status_code == 403
    res = admin.post("/admin/reveal", data={"revealed": "true", "csrf_token": token}, follow_redirects=False)
    assert res.status_code == 303
    with Session(engine) as s:
        assert labels_revealed(s) is True
    assert "Hide labels again" in admin.get("/admin").text
    admin.post("/admin/reveal", data={"revealed": "false", "csrf_token": token})
    with Session(engine) as s:
        assert labels_revealed(s) is False


def test_assignments_form(site):
    app, engine = site
    admin = TestClient(app)
    token = login(admin, "adam")
    page = admin.get("/admin/assignments")
    assert page.status_code == 200 and 'name="annotators"' in page.text and ">legal<" in page.text
    form = {"family": "commerce", "sample_size": "2", "seed": "5", "annotators": ["alice", "bob"], "k": "2",
            "csrf_token": token}
    assert admin.post("/admin/assignments", data={k: v for k, v in form.items() if k != "csrf_token"}
                      ).status_code == 403
    res = admin.post("/admin/assignments", data=form)
    assert res.status_code == 200, res.text
    text = re.sub(r"\s+", " ", res.text)
    assert "4 assignment(s) created" in text and "2 of 3 matching run(s) selected" in text
    with Session(engine) as s:
        assert len(s.exec(select(Assignment)).all()) == 4
    bad = admin.post("/admin/assignments", data={**form, "k": "3"})
    assert bad.status_code == 422 and "k=3 annotators per run, but only 2" in bad.text


def test_progress_page_and_roles(site):
    app, _ = site
    admin = TestClient(app)
    token = login(admin, "adam")
    admin.post("/admin/assignments", data={"annotators": ["alice"], "k": "1", "seed": "1", "csrf_token": token})
    reviewer = TestClient(app)
    login(reviewer, "rita")
    page = reviewer.get("/admin/progress")
    assert page.status_code == 200
    # batches and annotators first; the per-run list only behind a filter
    assert "alice" in page.text and 'id="run-progress"' not in page.text and 'id="list-all-runs"' in page.text
    page = reviewer.get("/admin/progress?runs=1")
    assert 'id="run-progress"' in page.text and 'href="/runs/r0"' in page.text
    assert 'href="/runs/r0"' in reviewer.get("/admin/progress?state=in_progress").text
    assert reviewer.get("/admin").status_code == 403
    assert reviewer.get("/admin/assignments").status_code == 403
    annotator = TestClient(app)
    login(annotator, "alice")
    assert annotator.get("/admin/progress").status_code == 403
    anon = TestClient(app)
    res = anon.get("/admin/progress", follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"].startswith("/login?next=")


def test_taxonomy_pages(site):
    app, _ = site
    client = TestClient(app)
    login(client, "alice")
    page = client.get("/taxonomies")
    assert page.status_code == 200 and "a2-failures" in page.text and "mast" in page.text
    detail = client.get("/taxonomies/a2-failures")
    assert detail.status_code == 200
    assert "Peer not engaged" in detail.text and "working operationalization" in detail.text
    assert client.get("/taxonomies/mast").status_code == 200
    assert client.get("/taxonomies/nope@4").status_code == 404
