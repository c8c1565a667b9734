"""Hand-built canonical runs for the detector tests (normalized with the real normalizer)."""
from __future__ import annotations

from typing import Any

from app.ingest.canonical import normalize_run


def ev(actor: str, to: str | None, content: str = "", *, kind: str = "message", data: dict | None = None,
       parent: int | None = None, shared: bool | None = None) -> dict[str, Any]:
    """One event; seqs are assigned by `make_run` in list order."""
    recipients = [to] if to else []
    vis = "shared" if (shared if shared is not None else bool(to) and to.endswith("_agent")) else "private"
    return {"kind": kind, "actor": actor, "recipients": recipients, "visibility": vis, "content": content,
            "data": data or {}, "parent_seq": parent}


def make_run(events: list[dict[str, Any]], *, buyer_state: dict | None = None, seller_state: dict | None = None,
             buyer_constraints: list[str] | None = None, buyer_objective: str = "Buy the hatchback",
             buyer_metrics: dict | None = None, run_id: str = "t1") -> dict[str, Any]:
    for i, e in enumerate(events):
        e["seq"] = i
    return normalize_run({
        "run_id": run_id,
        "scenario": {"id": "commerce/car", "family": "commerce", "alignment": "competitive", "title": "Car"},
        "principals": [
            {"id": "buyer", "name": "Dana Reyes", "kind": "person", "objective": buyer_objective,
             "constraints": buyer_constraints or [],
             "outcome": {"success": False, "score": 0.3, "metrics": buyer_metrics or {}}},
            {"id": "seller", "name": "Lakeside Motors", "kind": "organization",
             "outcome": {"success": True, "score": 0.8, "metrics": {}}},
        ],
        "agents": [
            {"id": "buyer_agent", "principal": "buyer", "private_state": buyer_state or {}},
            {"id": "seller_agent", "principal": "seller", "private_state": seller_state or {}},
        ],
        "events": events,
    })
