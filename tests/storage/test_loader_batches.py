"""Batched import (issue 14): a batch's new runs go in together, a failure inside the batch falls
back to one savepoint per run for that batch only, and the summary is the one-by-one summary."""
from __future__ import annotations

import copy

from sqlmodel import Session, select

from app.ingest.canonical import RunFormatError
from app.ingest.loader import load_items
from app.runs.models import Event, Run
from app.runs.service import to_canonical

from .test_loader import count_rows, demo_runs


class Item:
    def __init__(self, run=None, error=None, source="t"):
        self.run, self.error, self.source = run, error, source


def test_a_failing_run_in_a_batch_rejects_only_that_run(engine):
    runs = demo_runs(7, seed=11)
    bad = runs[3]["run_id"]
    calls = []

    def after_store(session, row, run, cache):
        calls.append(run["run_id"])
        assert row.id is not None and row.run_id == run["run_id"]
        if run["run_id"] == bad:
            raise ValueError("refused by the hook")

    summary = load_items(engine, [Item(r) for r in runs], batch_size=5, after_store=after_store)
    assert (summary.imported, summary.rejected) == (6, 1)
    assert summary.errors == [{"location": f"t: run {bad}", "message": "ValueError: refused by the hook"}]
    assert count_rows(engine, bad) == {"principal": 0, "agent": 0, "event": 0, "audit": 0}
    with Session(engine) as s:
        stored = {r.run_id: to_canonical(s, r) for r in s.exec(select(Run).order_by(Run.id)).all()}
        assert list(stored) == [r["run_id"] for r in runs if r["run_id"] != bad]  # input order kept
        for r in runs:
            if r["run_id"] != bad:
                assert stored[r["run_id"]] == r
        assert s.exec(select(Event)).first() is not None


def test_batches_count_like_one_by_one_with_repeats_and_parse_errors(engine):
    runs = demo_runs(5, seed=12)
    changed = copy.deepcopy(runs[1])
    changed["aggregate_score"] = 0.123
    items = [Item(runs[0]), Item(runs[1]), Item(error=RunFormatError("f.jsonl:3", "bad line")), Item(runs[0]),
             Item(changed), Item(runs[2])]
    summary = load_items(engine, items, batch_size=10)
    assert (summary.imported, summary.unchanged, summary.rejected) == (3, 1, 2)
    assert summary.errors[0]["location"] == "f.jsonl:3"  # in input order
    assert "already stored with different content" in summary.errors[1]["message"]
    again = load_items(engine, [Item(r) for r in runs], batch_size=2)
    assert (again.imported, again.unchanged, again.rejected) == (2, 3, 0)
