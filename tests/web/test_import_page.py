"""The web upload page `/import`: the REST import's one path (upload store, limits, profile check,
`import` job) behind a form with a CSRF token; on SQLite and PostgreSQL."""
from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.core.config import get_settings
from app.jobs.models import Job
from app.main import create_app
from app.runs.models import Run
from tests.web.helpers import login, page_run, user


@pytest.fixture
def client(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("UPLOAD_DIR", str(tmp_path / "uploads"))
    get_settings.cache_clear()
    with Session(engine) as s:
        user(s, "ann")
        user(s, "rev", "reviewer")
        user(s, "boss", "admin")
        s.commit()
    yield TestClient(create_app(engine))
    get_settings.cache_clear()


def _jsonl(*runs: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in runs).encode()


def _form_token(page: str) -> str:
    form = page[page.index('<form method="post" action="/import"'):]
    return re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)


def _stored(engine) -> tuple[list[str], int]:
    with Session(engine) as s:
        return sorted(s.exec(select(Run.run_id)).all()), len(s.exec(select(Job)).all())


def _upload_files(tmp_path) -> list:
    root = tmp_path / "uploads"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_the_page_renders_for_reviewers_and_admins_and_not_for_annotators(client):
    login(client, "ann")
    assert client.get("/import").status_code == 403
    assert 'href="/import"' not in client.get("/").text  # not in an annotator's navigation
    client.cookies.clear()
    for name in ("rev", "boss"):
        login(client, name)
        page = client.get("/import")
        assert page.status_code == 200
        assert 'enctype="multipart/form-data"' in page.text and 'type="file" name="file"' in page.text
        assert _form_token(page.text)
        assert '<option value="a2f-release-style">a2f-release-style</option>' in page.text  # the built-in profiles to choose from
        assert 'href="/import" aria-current="page"' in page.text  # linked from the navigation
        assert 'href="/import">Import runs</a>' in client.get("/admin/progress").text  # and the admin menu
        client.cookies.clear()
    r = client.get("/import", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
    assert "/import" not in client.get("/openapi.json").json()["paths"]  # a page, not part of the API


def test_an_upload_imports_through_the_job_and_the_job_page_shows_the_counts(client, engine):
    token = _form_token(login(client, "rev") and client.get("/import").text)
    bad = {"run_id": "broken-1"}  # no events, no scenario: rejected, with its location
    body = _jsonl(page_run("up-1"), page_run("up-2", family="legal"), bad)
    r = client.post("/import", data={"csrf_token": token}, files={"file": ("runs.jsonl", body, "application/x-ndjson")},
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    job_url = r.headers["location"]
    assert re.fullmatch(r"/jobs/[0-9a-f]+", job_url)
    runs, n_jobs = _stored(engine)
    assert runs == ["up-1", "up-2"] and n_jobs == 1
    with Session(engine) as s:
        job = s.exec(select(Job)).one()
        assert job.kind == "import" and job.state == "done" and job.params["filename"] == "runs.jsonl"
    page = client.get(job_url).text
    assert 'class="job-done">done' in page
    assert 'id="result-imported">2<' in page and 'id="result-rejected">1<' in page
    assert 'id="result-unchanged">0<' in page
    errors = re.search(r'<ul id="job-errors">(.*?)</ul>', page, re.S).group(1)
    assert "runs.jsonl:3: " in errors  # the rejected run, at its location (file:line), with the reason
    assert "{" not in errors  # readable, not a dict
    # the same file again: unchanged, counted on the job page
    r = client.post("/import", data={"csrf_token": token}, files={"file": ("runs.jsonl", body, "application/x-ndjson")})
    assert r.status_code == 200 and 'id="result-unchanged">2<' in r.text and 'id="result-imported">0<' in r.text


def test_a_built_in_profile_and_strict_reach_the_job(client, engine):
    token = _form_token(login(client, "boss") and client.get("/import").text)
    r = client.post("/import", data={"csrf_token": token, "profile_name": "a2f-release-style", "strict": "true"},
                    files={"file": ("runs.jsonl", _jsonl(page_run("p-1")), "application/x-ndjson")},
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        job = s.exec(select(Job)).one()
        assert job.params["profile"] == "a2f-release-style" and job.params["strict"] is True and job.params["replace"] is False


def test_a_bad_profile_is_named_on_the_page_and_nothing_is_stored(client, engine, tmp_path):
    token = _form_token(login(client, "boss") and client.get("/import").text)
    profile = b"profile: 1\nname: mine\n<b>bogus_key</b>: 3\n"
    r = client.post("/import", data={"csrf_token": token},
                    files={"file": ("runs.jsonl", _jsonl(page_run("x-1")), "application/x-ndjson"),
                           "profile": ("mine.yaml", profile, "application/yaml")})
    assert r.status_code == 422
    error = re.search(r'<p class="error" role="alert" id="import-error">(.*?)</p>', r.text, re.S).group(1)
    assert "bogus_key" in error and "&lt;b&gt;bogus_key&lt;/b&gt;" in error  # named, and escaped
    assert "<b>bogus_key" not in r.text
    assert 'action="/import"' in r.text  # the form again
    # an unknown built-in name: refused the same way, the choice kept in the form
    r = client.post("/import", data={"csrf_token": token, "profile_name": "nope"},
                    files={"file": ("runs.jsonl", _jsonl(page_run("x-1")), "application/x-ndjson")})
    assert r.status_code == 422 and "no built-in profile of that name" in r.text
    assert _stored(engine) == ([], 0) and _upload_files(tmp_path) == []


def test_a_missing_or_wrong_csrf_token_is_refused(client, engine, tmp_path):
    login(client, "boss")
    files = {"file": ("runs.jsonl", _jsonl(page_run("c-1")), "application/x-ndjson")}
    for data in ({}, {"csrf_token": "forged"}):
        r = client.post("/import", data=data, files=files, follow_redirects=False)
        assert r.status_code == 403 and "CSRF" in r.text
    assert _stored(engine) == ([], 0) and _upload_files(tmp_path) == []


def test_an_upload_over_the_limit_is_refused_with_a_clear_message(client, engine, tmp_path, monkeypatch):
    token = _form_token(login(client, "boss") and client.get("/import").text)
    monkeypatch.setenv("MAX_UPLOAD_BYTES", "2000")
    get_settings.cache_clear()
    big = _jsonl(*(page_run(f"big-{i}") for i in range(5)))
    assert len(big) > 2000
    r = client.post("/import", data={"csrf_token": token}, files={"file": ("runs.jsonl", big, "application/x-ndjson")},
                    headers={"Accept": "text/html"})
    assert r.status_code == 413
    error = re.search(r'id="import-error">(.*?)</p>', r.text, re.S).group(1)
    assert "larger than 2000 bytes" in error and "MAX_UPLOAD_BYTES" in error
    assert _stored(engine) == ([], 0) and _upload_files(tmp_path) == []
    # a body cut off while it streams (no Content-Length): the same message on the page
    boundary = "b0undary"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n{token}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="runs.jsonl"\r\n'
            "Content-Type: application/x-ndjson\r\n\r\n").encode()

    def chunks():
        yield head
        for i in range(0, len(big), 500):
            yield big[i:i + 500]
        yield f"\r\n--{boundary}--\r\n".encode()

    r = client.post("/import", content=chunks(), headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert r.status_code == 413 and "larger than 2000 bytes" in r.text and 'id="import-error"' in r.text
    assert _stored(engine) == ([], 0) and _upload_files(tmp_path) == []
