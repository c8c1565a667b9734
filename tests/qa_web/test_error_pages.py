"""Browsers get readable HTML error pages with a way back; the API and page scripts keep JSON.
A form posted after the session ended goes to the login page, which says so."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from tests.web.helpers import XSS, login, page_run, store, user

HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.fixture
def client(engine):
    with Session(engine) as s:
        store(s, page_run("err-1"))
        user(s, "ann")
        user(s, "boss", "admin")
        s.commit()
    return TestClient(create_app(engine))


def _html_error(r, status: int) -> str:
    assert r.status_code == status
    assert r.headers["content-type"].startswith("text/html")
    assert "Traceback" not in r.text and '{"detail"' not in r.text
    return r.text


def test_annotator_refused_gets_403_page_with_way_back(client):
    login(client, "ann")
    for path in ("/agreement", "/disagreements", "/reports", "/admin", "/adjudicate/err-1"):
        text = _html_error(client.get(path, headers=HTML), 403)
        assert "You cannot open this page" in text
        assert "requires role admin" in text
        assert 'href="/">Your queue' in text
        assert "You are logged in as ann (annotator)" in text


def test_unknown_run_taxonomy_and_page_are_404_pages(client):
    login(client, "ann")
    text = _html_error(client.get("/runs/no-such-run", headers=HTML), 404)
    assert "No run &#39;no-such-run&#39;." in text and "The Runs page lists every run" in text
    text = _html_error(client.get("/runs/err-1?taxonomy=a2-failures@99", headers=HTML), 404)
    assert "No taxonomy &#39;a2-failures@99&#39;." in text and "Taxonomies page" in text
    text = _html_error(client.get("/nowhere", headers=HTML), 404)
    assert "There is no page at /nowhere." in text


def test_bad_query_is_a_readable_422_page(client):
    login(client, "ann")
    text = _html_error(client.get("/runs?page=0", headers=HTML), 422)
    assert "page: Input should be greater than or equal to 1" in text


def test_error_detail_is_escaped(client):
    login(client, "ann")
    text = _html_error(client.get("/runs/" + XSS, headers=HTML), 404)
    assert XSS not in text and "&lt;script&gt;" in text


def test_back_link_only_for_same_site_referer(client):
    login(client, "ann")
    text = client.get("/agreement", headers={**HTML, "Referer": "http://testserver/runs?family=legal"}).text
    assert 'href="/runs?family=legal"' in text and "Back to the previous page" in text
    text = client.get("/agreement", headers={**HTML, "Referer": "http://evil.example/x"}).text
    assert "evil.example" not in text and "Back to the previous page" not in text


def test_api_and_scripts_keep_json_errors(client):
    login(client, "ann")
    r = client.get("/api/v1/runs/no-such-run", headers=HTML)  # the API is JSON even for a browser
    assert r.status_code == 404 and r.json() == {"detail": "no run 'no-such-run'"}
    r = client.get("/agreement", headers={"Accept": "application/json"})
    assert r.status_code == 403 and r.json()["detail"].startswith("this page requires role")
    r = client.get("/runs?page=0")  # no text/html in Accept: FastAPI's validation JSON
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "page"]


def test_form_posted_after_session_ended_goes_to_login_with_notice(client):
    token = login(client, "boss")
    client.cookies.clear()  # the session ended (expired, logged out in another tab, cookie removed)
    r = client.post("/admin/users", data={"username": "erin", "role": "annotator", "password": "erin-pass-1",
                                          "csrf_token": token},
                    headers={**HTML, "Referer": "http://testserver/admin"}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/login?expired=1&next=%2Fadmin"
    page = client.get(r.headers["location"], headers=HTML)
    assert "Your session has" in page.text and "ended" in page.text
    assert 'name="next" value="/admin"' in page.text


def test_stale_login_form_asks_again_and_keeps_next(client):
    client.get("/login")
    client.cookies.clear()
    r = client.post("/login", data={"username": "ann", "password": "x", "csrf_token": "stale", "next": "/runs"},
                    headers={**HTML, "Referer": "http://testserver/login?next=/runs"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?expired=1&next=%2Fruns"


def test_wrong_csrf_while_logged_in_is_a_reload_page(client):
    login(client, "boss")
    r = client.post("/admin/users", data={"username": "erin", "role": "annotator", "password": "erin-pass-1",
                                          "csrf_token": "wrong"},
                    headers={**HTML, "Referer": "http://testserver/admin"}, follow_redirects=False)
    text = _html_error(r, 403)
    assert "Please reload the page" in text and "was not sent" in text
    assert 'href="/admin"' in text
    # the API answer for the same failure stays JSON
    r = client.post("/admin/users", data={"csrf_token": "wrong"}, follow_redirects=False)
    assert r.status_code == 403 and "CSRF" in r.json()["detail"]


def test_unhandled_error_is_a_500_page_not_a_traceback(engine):
    from fastapi import APIRouter

    app = create_app(engine)
    boom = APIRouter()

    @boom.get("/qa-boom")
    def _boom():
        raise RuntimeError("secret internals")

    app.include_router(boom)
    c = TestClient(app, raise_server_exceptions=False)
    r = c.get("/qa-boom", headers=HTML)
    text = _html_error(r, 500)
    assert "Something went wrong" in text and "secret internals" not in text
    r = c.get("/qa-boom")
    rid = r.headers["x-request-id"]
    assert r.status_code == 500 and r.json() == {"detail": f"internal server error (request id {rid})",
                                                 "request_id": rid}
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def test_favicon_and_current_page_in_nav(client):
    login(client, "ann")
    r = client.get("/static/favicon.svg")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    home = client.get("/runs").text
    assert re.search(r'<a href="/runs" aria-current="page">Runs</a>', home)
    assert '<link rel="icon" type="image/svg+xml" href="http://testserver/static/favicon.svg">' in home


def test_runs_page_with_an_absurd_page_number_is_a_readable_422(engine):
    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from app.auth.service import create_user
    from app.main import create_app

    with Session(engine) as s:
        create_user(s, "pager", "annotator", "password123")
        s.commit()
    c = TestClient(create_app(engine))
    import re

    token = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/login").text).group(1)
    c.post("/login", data={"username": "pager", "password": "password123", "csrf_token": token, "next": "/"})
    r = c.get("/runs?page=100000000000000000000", headers={"Accept": "text/html"})
    assert r.status_code == 422 and "<html" in r.text.lower()
