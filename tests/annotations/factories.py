"""Test data shared by tests/annotations, tests/admin and tests/api: small runs and users."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from argon2 import PasswordHasher
from sqlmodel import Session

from app.auth.models import User
from app.auth.service import create_user
from app.ingest.canonical import normalize_run
from app.ingest.loader import store_run
from app.runs.models import Run
from app.runs.service import get_run

PASSWORD = "correct horse battery"


def raw_run(run_id: str = "r1", *, family: str = "commerce", alignment: str = "competitive",
            status: str = "completed", model: str = "model-a", n_events: int = 5,
            audits: list[dict[str, Any]] | None = None, audited_by: list[str] | None = None) -> dict[str, Any]:
    """A canonical run with principals buyer/seller, agents buyer_agent/seller_agent and events
    with seqs 0..n_events-1."""
    events = [{"seq": i, "kind": "message", "actor": "buyer_agent" if i % 2 == 0 else "seller_agent",
               "recipients": ["seller_agent" if i % 2 == 0 else "buyer_agent"], "visibility": "shared",
               "content": f"message {i}"} for i in range(n_events)]
    run = {
        "run_id": run_id,
        "scenario": {"id": f"{family}/s1", "family": family, "alignment": alignment, "title": "A deal"},
        "status": status,
        "principals": [{"id": "buyer", "name": "Buyer", "outcome": {"success": False, "score": 0.2}},
                       {"id": "seller", "name": "Seller", "outcome": {"success": True, "score": 0.9}}],
        "agents": [{"id": "buyer_agent", "principal": "buyer", "model": model, "harness": "h1"},
                   {"id": "seller_agent", "principal": "seller", "model": "model-b", "harness": "h1"}],
        "events": events,
        "audits": audits or [],
    }
    if audited_by is not None:
        run["metadata"] = {"audited_by": audited_by}
    return run


def make_run(session: Session, run_id: str = "r1", **kw) -> Run:
    """Store `raw_run(run_id, **kw)` (audits become judge annotations) and return its Run row."""
    from app.annotations.service import sync_audit_annotations

    run = normalize_run(raw_run(run_id, **kw))
    store_run(session, run, after_store=sync_audit_annotations)
    session.flush()
    return get_run(session, run_id)


@lru_cache
def _hash(password: str) -> str:
    """An argon2 hash with cheap parameters (verification reads them from the hash): fast logins."""
    return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash(password)


def make_user(session: Session, name: str, role: str = "annotator", password: str | None = PASSWORD) -> User:
    """Create a human user (with a password unless None; argon2 hashes are cached per password)."""
    user = create_user(session, name, role)
    if password:
        user.password_hash = _hash(password)
        session.add(user)
    session.flush()
    return user
