"""The column-wise (Arrow) export writes exactly the bytes of the row-dict writers, also for
JSON stored in an older text form; CSV text cells that a spreadsheet would run as formulas are
neutralised (issue 13 item 18) in both paths and undone by import-labels."""
from __future__ import annotations

import copy
import io
import json

import pyarrow.parquet as pq
import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.demo.generator import generate_runs
from app.exports import arrow, service
from app.exports.schema import table_spec
from app.ingest.loader import store_run

TRICKY = ["=SUM(A1:A9)", "+1", "-2 tokens", "@here", "\tindent", "\rcr", "'=quoted", "a,b", 'say "hi"',
          "two\nlines", "café ünïcode", "", "plain"]


def _runs():
    runs = [copy.deepcopy(x.run) for x in generate_runs(3, 7)]
    r = runs[0]
    for i, e in enumerate(r["events"]):
        e["content"] = TRICKY[i % len(TRICKY)]
        if i % 5 == 1:
            e["data"] = {"note": TRICKY[i % len(TRICKY)], "n": [1, 2.5, -3], "nested": {"é": None}}
        elif i % 5 == 2:
            e["data"] = None
        elif i % 5 == 3:
            e["data"] = 0
        e["metadata"] = {} if i % 2 else {"k": TRICKY[(i + 3) % len(TRICKY)]}
    r["principals"][0]["objective"] = "=HYPERLINK(\"x\")"
    r["principals"][0]["outcome"]["score"] = 0.1
    r["principals"][1]["outcome"] = {"success": None, "score": 1e16, "metrics": {}}
    r["agents"][0]["role"] = "-seller"
    return runs


@pytest.fixture
def stored(engine):
    with Session(engine) as s:
        for run in _runs():
            store_run(s, run)
        s.commit()
        # JSON text as older versions wrote it (spaces, \u escapes): must come out the same
        s.execute(text("UPDATE event SET extra = :t WHERE id IN (SELECT id FROM event ORDER BY id LIMIT 3)"),
                  {"t": json.dumps({"old": "vieux café", "list": [1, 2]})})
        s.execute(text("UPDATE principal SET metrics = :t"), {"t": json.dumps({"a b": "ü", "x": [1.5]})})
        s.commit()
    return engine


def _row_path(engine, table: str, fmt: str) -> bytes:
    spec = table_spec(table)
    opts = service.ExportOptions(chunk_size=7)
    with Session(engine) as session:
        columns, chunks = service.iter_chunks(session, table, opts)
        return b"".join(service._WRITERS[fmt](spec, columns, chunks, lambda n: None))


@pytest.mark.parametrize("table", arrow.FAST_TABLES)
def test_arrow_csv_is_byte_identical_to_the_row_writer(stored, table):
    fast = b"".join(service.export_stream(stored, table, "csv", service.ExportOptions(chunk_size=7)))
    assert fast == _row_path(stored, table, "csv")


@pytest.mark.parametrize("table", arrow.FAST_TABLES)
def test_arrow_parquet_equals_the_row_writer(stored, table):
    fast = b"".join(service.export_stream(stored, table, "parquet", service.ExportOptions(chunk_size=7)))
    slow = _row_path(stored, table, "parquet")
    a, b = pq.read_table(io.BytesIO(fast)), pq.read_table(io.BytesIO(slow))
    assert a.equals(b) and a.schema.equals(b.schema)
    assert pq.ParquetFile(io.BytesIO(fast)).num_row_groups == pq.ParquetFile(io.BytesIO(slow)).num_row_groups


def test_formula_cells_are_neutralised_in_csv(stored):
    import csv

    body = b"".join(service.export_stream(stored, "events", "csv")).decode("utf-8")
    contents = [r["content"] for r in csv.DictReader(io.StringIO(body, newline=""))]
    assert "'=SUM(A1:A9)" in contents and "'+1" in contents and "'-2 tokens" in contents
    assert "'@here" in contents and "'\tindent" in contents and "'\rcr" in contents
    assert "''=quoted" in contents  # a leading quote before a formula character is kept reversible
    assert "a,b" in contents and "plain" in contents and "café ünïcode" in contents
    assert all(not c or c[0] not in "=+-@\t\r" for c in contents)
    # numbers are not text cells: a negative number is written as is
    assert arrow.neutralise_formula("-1") == "'-1" and service._csv_cell(-1, "int64") == "-1"


@pytest.mark.parametrize("value", TRICKY + ["'", "''+", "'x"])
def test_neutralising_is_undone_by_the_labels_reader(value):
    from app.annotations.labels_import import unneutralise_formula

    assert unneutralise_formula(arrow.neutralise_formula(value)) == value
