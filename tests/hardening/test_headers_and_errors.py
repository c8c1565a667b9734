"""Security headers on every response, no inline scripts or styles in any template, no-store on
label pages and exports, logged 500s with a request id, symbolic links out of a tree."""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.ingest import iter_path
from app.main import create_app
from tests.annotations.factories import make_user
from tests.api.clients import login
from tests.hardening import hostile

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
HTML = {"Accept": "text/html"}
TEMPLATES = Path(__file__).resolve().parents[2] / "app" / "web" / "templates"


def _check_headers(r, static=False):
    h = r.headers
    csp = h["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp and "script-src 'self'" in csp
    assert h["x-content-type-options"] == "nosniff" and h["x-frame-options"] == "DENY"
    assert h["referrer-policy"] == "same-origin" and h["x-request-id"]
    if not static:
        assert h["cache-control"] == "no-store"


@SQLITE
def test_headers_on_pages_api_errors_and_exports(engine):
    from app.ingest.items import item_from_raw
    from app.ingest.loader import load_items

    with Session(engine) as s:
        make_user(s, "hd-admin", "admin")
        s.commit()
    load_items(engine, [item_from_raw(hostile.run("hd-1"), "x")])
    c = TestClient(create_app(engine))
    for path in ("/login", "/healthz", "/api/v1/runs", "/no-such-page", "/openapi.json"):
        _check_headers(c.get(path, headers=HTML))
    login(c, "hd-admin")
    for path in ("/", "/runs/hd-1", "/admin", "/api/v1/exports/annotations.csv", "/api/v1/runs/hd-1"):
        r = c.get(path, headers=HTML)
        assert r.status_code == 200, (path, r.status_code)
        _check_headers(r)
    r = c.get("/static/css/app.css")
    _check_headers(r, static=True)
    assert "no-store" not in r.headers.get("cache-control", "")


def test_no_inline_script_or_style_in_templates():
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        assert "style=" not in text and "<style" not in text, path
        for tag in re.findall(r"<script[^>]*>", text):
            assert "src=" in tag or 'type="application/json"' in tag, (path, tag)  # data blocks do not run
        assert not re.search(r"\son[a-z]+=", text), path  # no inline event handlers


@SQLITE
def test_unexpected_error_is_logged_with_request_id_and_server_keeps_serving(engine, caplog):
    app = create_app(engine)
    boom = APIRouter()

    @boom.get("/api/v1/hardening-boom")
    def _boom():
        raise RuntimeError("internal detail")

    app.include_router(boom)
    c = TestClient(app, raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="a2annotate.web"):
        r = c.get("/api/v1/hardening-boom")
    rid = r.headers["x-request-id"]
    assert r.status_code == 500 and r.json()["request_id"] == rid and "internal detail" not in r.text
    _check_headers(r)
    assert any(rid in rec.getMessage() for rec in caplog.records)
    page = c.get("/api/v1/hardening-boom".replace("/api/v1", ""), headers=HTML)
    assert page.status_code == 404  # a page route that does not exist, still answered
    assert c.get("/healthz").json() == {"status": "ok"}


def test_directory_import_does_not_follow_links_out_of_the_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(json.dumps(hostile.run("secret")) + "\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "runs.jsonl").write_text(json.dumps(hostile.run("inside")) + "\n")
    (tree / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (tree / "linkdir").symlink_to(outside, target_is_directory=True)
    (tree / "alias.jsonl").symlink_to(tree / "runs.jsonl")  # inside the tree: followed
    items = list(iter_path(tree))
    runs = sorted(i.run["run_id"] for i in items if i.run)
    unused = [u for i in items for u in i.unused_files]
    assert runs == ["inside", "inside"]
    assert any("link.jsonl (symbolic link out of the tree: not followed)" in u for u in unused)
    assert any("linkdir (symbolic link out of the tree: not followed)" in u for u in unused)


def test_docker_compose_has_no_known_secret_key_default():
    import yaml

    compose = yaml.safe_load((TEMPLATES.parents[2] / "docker-compose.yml").read_text())
    value = compose["services"]["app"]["environment"]["SECRET_KEY"]
    assert value.startswith("${SECRET_KEY:?"), value  # compose refuses to start without one
