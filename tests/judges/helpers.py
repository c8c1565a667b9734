"""Shared pieces of the judge tests: demo runs in the database, judge files, scripted answers."""
from __future__ import annotations

import json
from typing import Any

from app.demo.generator import generate_runs
from app.ingest.loader import _after_store_default, load_items


class _Item:
    __slots__ = ("run", "error", "source")

    def __init__(self, run: dict[str, Any]):
        self.run, self.error, self.source = run, None, "demo(test)"


def load_demo(engine, n: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Store n demo runs through the one loader; returns run_id -> canonical run."""
    runs = [d.run for d in generate_runs(n, seed)]
    summary = load_items(engine, (_Item(r) for r in runs), after_store=_after_store_default)
    assert summary.rejected == 0, summary.errors[:3]
    return {r["run_id"]: r for r in runs}


def truth_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list(run["metadata"].get("demo_truth") or [])


def truth_answer(run: dict[str, Any]) -> dict[str, Any]:
    """The contract's answer that says exactly the run's seeded truth."""
    t = truth_of(run)
    return {"verdict": "failure" if t else "no_failure",
            "labels": [{"mode": x["mode"], "agent": x["agent"], "evidence": list(x["evidence"]),
                        "rationale": f"seeded {x['mode']}"} for x in t]}


def judge_file(base_url: str, name: str = "tj", strategy: str = "all-at-once", extra: str = "") -> str:
    return (f"judge: 1\nname: {name}\nendpoint:\n  base_url: \"{base_url}\"\n  model: stand-in\n"
            f"  api_key_env: A2A_TEST_JUDGE_KEY\ntaxonomy: a2-failures\nstrategy: {strategy}\n{extra}")


def dumps(obj: Any) -> str:
    return json.dumps(obj)
