"""Blind mode on exports: an annotator gets only their own annotations, and no aggregated labels,
until an admin reveals labels (corpus: tests/reports_db/corpus.py)."""
from __future__ import annotations

import csv
import io
import json

from sqlmodel import Session

from app.annotations.blind import set_revealed


def _jsonl(res) -> list[dict]:
    assert res.status_code == 200, res.text
    return [json.loads(x) for x in res.text.splitlines()]


def test_annotation_exports_follow_blind_mode(client, tokens, engine):
    # alice's rows: r1 CF1, r2 VF1 + DD1, r3 "no failure", r5 "no failure" = 5
    mine = _jsonl(client.get("/api/v1/exports/annotations.jsonl", headers=tokens["alice"]))
    assert len(mine) == 5 and {r["annotator"] for r in mine} == {"alice"}
    res = client.get("/api/v1/exports/annotations_canonical.csv", headers=tokens["alice"])
    rows = list(csv.DictReader(io.StringIO(res.text)))
    assert len(rows) == 5 and {r["annotator"] for r in rows} == {"alice"}
    assert sorted(r["mode"] for r in rows) == ["CF1", "DD1", "VF1", "none", "none"]
    # bob's draft is his own: he gets it (the analysis table has drafts), carol gets her one row
    bob = _jsonl(client.get("/api/v1/exports/annotations.jsonl", headers=tokens["bob"]))
    assert sorted((r["run_id"], r["status"]) for r in bob) == [("r1", "submitted"), ("r2", "submitted"),
                                                               ("r3", "draft")]
    assert len(_jsonl(client.get("/api/v1/exports/annotations.jsonl", headers=tokens["carol"]))) == 1

    # aggregated labels are refused; tables without labels are not
    for table in ("gold_labels.csv", "audits.csv", "outcomes_by_model.csv", "blind_spots.jsonl"):
        res = client.get(f"/api/v1/exports/{table}", headers=tokens["alice"])
        assert res.status_code == 403 and "blind mode" in res.json()["detail"], table
    for table in ("runs.csv", "events.jsonl", "crossplay_model.csv"):
        assert client.get(f"/api/v1/exports/{table}", headers=tokens["alice"]).status_code == 200, table
    # whole runs come without the judges' audits (r4 has one), as from GET /api/v1/runs/{id}
    runs = {r["run_id"]: r for r in _jsonl(client.get("/api/v1/exports/runs_canonical.jsonl", headers=tokens["alice"]))}
    assert runs["r4"]["audits"] == []
    runs = {r["run_id"]: r for r in _jsonl(client.get("/api/v1/exports/runs_canonical.jsonl", headers=tokens["rita"]))}
    assert [a["mode"] for a in runs["r4"]["audits"]] == ["CF2"]

    # reviewers get everyone's (10 rows: see test_formats.py)
    assert len(_jsonl(client.get("/api/v1/exports/annotations.jsonl", headers=tokens["rita"]))) == 10
    assert client.get("/api/v1/exports/gold_labels.csv", headers=tokens["rita"]).status_code == 200

    # the demo corpus's seeded truth goes to admins only
    for who, has_truth in (("alice", False), ("rita", False), ("adam", True)):
        for table in ("runs.jsonl", "runs_canonical.jsonl"):
            r5 = next(r for r in _jsonl(client.get(f"/api/v1/exports/{table}", headers=tokens[who]))
                      if r["run_id"] == "r5")
            assert ("demo_truth" in r5["metadata"]) is has_truth and r5["metadata"]["batch"] == "b1", (who, table)

    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert len(_jsonl(client.get("/api/v1/exports/annotations.jsonl", headers=tokens["alice"]))) == 10
    assert client.get("/api/v1/exports/gold_labels.csv", headers=tokens["alice"]).status_code == 200
    assert client.get("/api/v1/exports/audits.csv", headers=tokens["alice"]).status_code == 200
