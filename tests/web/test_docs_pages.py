"""/docs and /redoc point only at this server: installed assets, no CDN, no inline script."""
from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.main import create_app


def test_docs_pages_load_local_assets_only(engine):
    client = TestClient(create_app(engine))
    for path in ("/docs", "/redoc"):
        html = client.get(path).text
        assert not re.search(r"https?://", html), f"{path} names another host"
        assert "<script>" not in html and "style=" not in html  # strict CSP: no inline code
        for src in re.findall(r'(?:src|href)="([^"]+)"', html):
            r = client.get(src)
            assert r.status_code == 200 and len(r.content) > 100, src
    assert b"cdn.redoc.ly" not in client.get("/redoc/redoc.standalone.js").content
