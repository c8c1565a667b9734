"""Every table in CSV, JSON Lines and Parquet: row counts, types, nested fields; read back with
the csv module, pandas and DuckDB.

Row counts of tests/reports_db/corpus.py: 5 runs with their own scenario each, 2 principals, 2
agents and 4 events per run, 1 audit (r4); annotations: 8 label rows (alice r1 1, bob r1 1,
alice r2 2, bob r2 1, bob's r3 draft 1, judge:l2 r4 1) + 3 rows for the label-less annotations
(carol r2, alice r3, alice r5) = 10; annotations_canonical leaves out bob's draft and the judge's
audit annotation = 8; gold_labels: r1 (adjudicated, 1 label) + r2 (open, 1 label) = 2.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from app.exports.schema import TABLES, arrow_schema
from app.exports.service import ExportError, ExportOptions, export_stream, export_to_dir

ROWS = {"runs": 5, "scenarios": 5, "principals": 10, "agents": 10, "events": 20, "audits": 1, "annotations": 10,
        "annotations_canonical": 8, "gold_labels": 2, "runs_canonical": 5,
        # report tables: by model 2 groups, by family 3, blind spots r1 + r2, cross-play by model 3 cells
        "outcomes_by_model": 2, "outcomes_by_family": 3, "blind_spots": 2, "crossplay_model": 3}


def _export(engine, tmp_path: Path, fmt: str) -> dict[str, tuple[Path, int]]:
    written = export_to_dir(engine, tmp_path / fmt, fmt, opts=ExportOptions(chunk_size=3))  # small chunks
    return {name: (path, n) for name, path, n in written}


def test_csv(engine, tokens, tmp_path):
    files = _export(engine, tmp_path, "csv")
    assert set(files) == {t for t, s in TABLES.items() if "csv" in s.formats}
    for table, n in ROWS.items():
        if table in files:
            with open(files[table][0], newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
            assert len(rows) == n == files[table][1], table
    with open(files["annotations"][0], newline="", encoding="utf-8") as fh:
        ann = list(csv.DictReader(fh))
    assert list(ann[0]) == TABLES["annotations"].fixed_names
    by_key = {(r["annotator"], r["run_id"], r["mode"]): r for r in ann}
    vf1 = by_key[("bob", "r2", "VF1")]
    assert json.loads(vf1["evidence"]) == [2] and json.loads(vf1["principals"]) == []  # JSON text
    assert vf1["category"] == "VF" and vf1["status"] == "submitted" and vf1["no_failure"] == "false"
    assert vf1["submitted_at"].endswith("+00:00")
    none_row = by_key[("carol", "r2", "")]  # a "no failure found" annotation: one row, empty mode
    assert none_row["no_failure"] == "true" and none_row["label_time_ms"] == ""
    assert by_key[("bob", "r3", "GR1")]["status"] == "draft"
    with open(files["principals"][0], newline="", encoding="utf-8") as fh:
        princ = {(r["run_id"], r["principal_id"]): r for r in csv.DictReader(fh)}
    assert princ[("r1", "buyer")]["success"] == "false" and princ[("r1", "buyer")]["score"] == "0.2"
    assert json.loads(princ[("r1", "buyer")]["metrics"]) == {"surplus": -100}
    assert princ[("r3", "client")]["success"] == ""  # null
    with open(files["blind_spots"][0], newline="", encoding="utf-8") as fh:
        spots = list(csv.DictReader(fh))
    assert json.loads(spots[0]["reasons"]) == ["principal buyer failed (score 0.20)", "labelled CF1 (buyer_agent)"]


def test_jsonl(engine, tokens, tmp_path):
    files = _export(engine, tmp_path, "jsonl")
    assert set(files) == {t for t, s in TABLES.items() if "jsonl" in s.formats}
    for table, n in ROWS.items():
        lines = files[table][0].read_text(encoding="utf-8").splitlines()
        assert len(lines) == n == files[table][1], table
        rows = [json.loads(x) for x in lines]
        if not TABLES[table].report and table != "runs_canonical":
            assert all(list(r) == TABLES[table].fixed_names for r in rows), table
    events = [json.loads(x) for x in files["events"][0].read_text().splitlines()]
    assert (events[0]["run_id"], events[0]["seq"], events[0]["recipients"]) == ("r1", 0, ["seller_agent"])
    canonical = [json.loads(x) for x in files["runs_canonical"][0].read_text().splitlines()]
    assert [r["run_id"] for r in canonical] == ["r1", "r2", "r3", "r4", "r5"]
    assert canonical[3]["audits"][0]["mode"] == "CF2" and len(canonical[0]["events"]) == 4


def test_parquet_reads_back_in_pandas_and_duckdb(engine, tokens, tmp_path):
    files = _export(engine, tmp_path, "parquet")
    assert "runs_canonical" not in files and "annotations_canonical" not in files
    for table, n in ROWS.items():
        if table not in files:
            continue
        path = files[table][0]
        assert len(pd.read_parquet(path)) == n, table
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchall()[0][0] == n, table
        schema = pq.read_schema(path)
        if not TABLES[table].report:
            assert schema.equals(arrow_schema(TABLES[table]), check_metadata=False), table
    assert pq.ParquetFile(files["events"][0]).num_row_groups == 7  # 20 rows in chunks of 3

    ann = pd.read_parquet(files["annotations"][0])
    assert str(ann["submitted_at"].dtype) == "datetime64[us, UTC]"
    assert ann["no_failure"].dtype == bool and ann["taxonomy_version"].dtype == "int64"
    row = ann[(ann.annotator == "bob") & (ann["mode"] == "VF1")].iloc[0]
    assert list(row["evidence"]) == [2]

    types = {r[0]: r[1] for r in duckdb.sql(
        f"DESCRIBE SELECT * FROM read_parquet('{files['events'][0]}')").fetchall()}
    assert types["recipients"] == "VARCHAR[]" and types["seq"] == "BIGINT" and types["data"] == "VARCHAR"
    p_types = {r[0]: r[1] for r in duckdb.sql(
        f"DESCRIBE SELECT * FROM read_parquet('{files['principals'][0]}')").fetchall()}
    assert p_types["success"] == "BOOLEAN" and p_types["score"] == "DOUBLE" and p_types["constraints"] == "VARCHAR[]"
    surplus = duckdb.sql(
        f"SELECT json_extract(metrics, '$.surplus')::INT FROM read_parquet('{files['principals'][0]}') "
        "WHERE run_id = 'r1' AND principal_id = 'buyer'").fetchall()[0][0]
    assert surplus == -100  # JSON text columns are readable with DuckDB's json functions
    out = pd.read_parquet(files["outcomes_by_model"][0])
    assert list(out["model"]) == ["model-a", "model-b"] and out["cat:CF"].tolist() == [0.25, 0.0]
    assert pd.isna(pd.read_parquet(files["outcomes_by_family"][0])["metric:surplus"][1])  # crm: null


def test_unavailable_combinations_are_refused(engine):
    with pytest.raises(ExportError, match="runs_canonical: available as jsonl only"):
        export_stream(engine, "runs_canonical", "csv")
    with pytest.raises(ExportError, match="unknown table 'nope'"):
        export_stream(engine, "nope", "csv")
    with pytest.raises(ExportError, match="format"):
        export_stream(engine, "runs", "xlsx")


def test_rest_endpoint_streams_a_named_file(client, tokens):
    with client.stream("GET", "/api/v1/exports/events.csv", headers=tokens["rita"]) as res:
        assert res.status_code == 200
        assert res.headers["content-disposition"] == 'attachment; filename="events.csv"'
        assert res.headers["content-type"].startswith("text/csv")
        assert "content-length" not in res.headers  # streamed, not built then sent
        body = b"".join(res.iter_bytes())
    assert len(body.decode().splitlines()) == 21  # header + 20 events
    res = client.get("/api/v1/exports/runs_canonical.jsonl", headers=tokens["alice"])
    assert res.status_code == 200 and res.headers["content-type"] == "application/x-ndjson"
    assert len(res.text.splitlines()) == 5
    parquet = client.get("/api/v1/exports/principals.parquet", headers=tokens["rita"])
    assert parquet.status_code == 200 and parquet.content[:4] == b"PAR1" and parquet.content[-4:] == b"PAR1"
    assert client.get("/api/v1/exports/nope.csv", headers=tokens["rita"]).status_code == 404
    bad = client.get("/api/v1/exports/runs_canonical.csv", headers=tokens["rita"])
    assert bad.status_code == 422 and "jsonl only" in bad.json()["detail"]
    assert client.get("/api/v1/exports/runs.xlsx", headers=tokens["rita"]).status_code == 422
    assert client.get("/api/v1/exports/runs.csv").status_code == 401
    bad_src = client.get("/api/v1/exports/outcomes_by_model.csv?source=bogus", headers=tokens["rita"])
    assert bad_src.status_code == 422 and bad_src.json()["detail"].startswith("source")
    gold = client.get("/api/v1/exports/outcomes_by_model.jsonl?source=gold", headers=tokens["rita"])
    assert [json.loads(x)["labelled_n"] for x in gold.text.splitlines()] == [1, 1]  # r1 only: 1 agent each


def test_cli_export(engine, tokens, run_cli, tmp_path):
    res = run_cli("export", "--format", "jsonl", "--out", str(tmp_path / "x"), "--tables", "runs,events",
                  "--tables", "annotations")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"runs: 5 rows -> {tmp_path / 'x' / 'runs.jsonl'}",
                                       f"events: 20 rows -> {tmp_path / 'x' / 'events.jsonl'}",
                                       f"annotations: 10 rows -> {tmp_path / 'x' / 'annotations.jsonl'}"]
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["annotations.jsonl", "events.jsonl", "runs.jsonl"]
    bad = run_cli("export", "--format", "parquet", "--out", str(tmp_path / "y"), "--tables", "runs_canonical")
    assert bad.exit_code == 1 and "jsonl only" in bad.output
    assert not (tmp_path / "y").exists()  # refused before anything is written
