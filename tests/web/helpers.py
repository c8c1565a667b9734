"""Helpers for the web page tests: hand-made runs, users, and logging a TestClient in."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.models import User
from app.auth.security import hash_password
from app.auth.service import create_user
from app.ingest.canonical import normalize_run
from app.ingest.loader import store_run

PASSWORD = "page-test-password"
XSS = "<script>alert('pwned')</script>"


def page_run(run_id: str = "web-1", n_events: int = 8, family: str = "commerce",
             content_extra: str = "") -> dict[str, Any]:
    """A canonical run: buyer/seller principals and agents, a discovery, shared and private events,
    an audit, and a seeded demo truth in metadata."""
    events: list[dict[str, Any]] = [
        {"kind": "discovery", "actor": "buyer_agent", "data": {"agents": [{"name": "seller_agent"}]},
         "content": "found seller_agent"},
        {"kind": "message", "actor": "buyer", "recipients": ["buyer_agent"], "visibility": "private",
         "content": "Budget is 18,500; do not reveal it."},
    ]
    for i in range(len(events), n_events):
        if i % 3 == 2:
            events.append({"kind": "tool_call", "actor": "seller_agent", "content": f"lookup {i}",
                           "data": {"tool": "inventory", "args": {"i": i}}})
        else:
            a, b = ("buyer_agent", "seller_agent") if i % 2 == 0 else ("seller_agent", "buyer_agent")
            events.append({"kind": "message", "actor": a, "recipients": [b],
                           "content": f"message {i} {content_extra}".strip()})
    for i, e in enumerate(events):
        e["seq"] = i
        e["ts"] = f"2026-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z"
    return {
        "run_id": run_id,
        "scenario": {"id": f"{family}/car/1", "family": family, "alignment": "competitive",
                     "title": "Used car purchase", "description": "Dana wants the hatchback."},
        "status": "completed", "aggregate_score": 1.0,
        "principals": [
            {"id": "buyer", "name": "Dana (buyer)", "kind": "person", "objective": "Buy for at most $18,500",
             "constraints": ["Do not reveal the budget"], "outcome": {"success": False, "score": 0.2}},
            {"id": "seller", "name": "Sam (dealer)", "kind": "organization", "objective": "Sell high",
             "outcome": {"success": True, "score": 0.9}},
        ],
        "agents": [
            {"id": "buyer_agent", "principal": "buyer", "role": "buyer", "model": "model-a", "harness": "hx",
             "private_state": {"budget_usd": 18500}},
            {"id": "seller_agent", "principal": "seller", "role": "seller", "model": "model-b", "harness": "hy",
             "private_state": {"floor_usd": 17000}},
        ],
        "events": events,
        "audits": [{"source": "judge-l2", "level": "L2", "mode": "CF1", "agent": "buyer_agent", "evidence": [1],
                    "note": "AUDIT-NOTE-7731"}],
        "metadata": {"demo_truth": [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1],
                                     "note": "TRUTH-MARKER-4411"}]},
    }


def store(session: Session, raw: dict[str, Any]) -> None:
    """Normalize and store one run (audits become judge annotations)."""
    from app.annotations.service import sync_audit_annotations

    store_run(session, normalize_run(raw), after_store=sync_audit_annotations)
    session.flush()


@lru_cache(maxsize=1)
def _password_hash() -> str:
    return hash_password(PASSWORD)  # argon2 is slow on purpose: hash once per test session


def user(session: Session, name: str, role: str = "annotator") -> User:
    """Create a human user whose password is PASSWORD."""
    u = create_user(session, name, role)
    u.password_hash = _password_hash()
    session.add(u)
    session.flush()
    return u


def login(client: TestClient, name: str) -> str:
    """Log `client` in as `name`; returns the CSRF token of the new session."""
    page = client.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    r = client.post("/login", data={"username": name, "password": PASSWORD, "csrf_token": token, "next": "/"},
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    home = client.get("/")
    return re.search(r'<meta name="csrf-token" content="([^"]+)"', home.text).group(1)
