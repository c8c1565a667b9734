"""Test clients: cookie login through the real login form, the page's CSRF token, Bearer tokens."""
from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.annotations.factories import PASSWORD

_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


def page_csrf(client: TestClient, path: str = "/login") -> str:
    """The session's CSRF token, read from the `<meta name="csrf-token">` of a page."""
    res = client.get(path)
    m = _META.search(res.text)
    assert m, f"no csrf meta tag on {path} ({res.status_code})"
    return m.group(1)


def login(client: TestClient, username: str, password: str = PASSWORD) -> str:
    """Log in through the form; returns the new session's CSRF token."""
    token = page_csrf(client)
    res = client.post("/login", data={"username": username, "password": password, "csrf_token": token,
                                      "next": "/"}, follow_redirects=False)
    assert res.status_code == 303, res.text
    return page_csrf(client)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
