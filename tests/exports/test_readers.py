"""The ADBC row sources of the Arrow exports (issue 14): the SQLite reader process and the
PostgreSQL driver give the same bytes as the driver cursor and the row writer; on SQLite the
reader never touches this process's locks (another connection's write transaction survives an
export, and annotating works before and after one)."""
from __future__ import annotations

import io
import sqlite3
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.exports import arrow, service
from tests.exports.test_arrow_path import _row_path, stored  # noqa: F401  (the tricky-data fixture)


@pytest.fixture
def adbc(monkeypatch):
    """ADBC readers for every table size; returns the calls of each reader."""
    calls = {"sqlite": 0, "postgresql": 0}
    worker, pg = arrow._worker_batches, arrow._pg_batches

    def count_worker(*a, **k):
        calls["sqlite"] += 1
        return worker(*a, **k)

    def count_pg(*a, **k):
        calls["postgresql"] += 1
        return pg(*a, **k)

    monkeypatch.setattr(arrow, "ADBC_MIN_ROWS", 0)
    monkeypatch.setattr(arrow, "_worker_batches", count_worker)
    monkeypatch.setattr(arrow, "_pg_batches", count_pg)
    return calls


def _export(engine, table: str, fmt: str, chunk_size: int = 7) -> bytes:
    return b"".join(service.export_stream(engine, table, fmt, service.ExportOptions(chunk_size=chunk_size)))


def _cursor_export(engine, table: str, fmt: str, monkeypatch, chunk_size: int = 7) -> bytes:
    with monkeypatch.context() as m:
        m.setattr(arrow, "_have", lambda *modules: False)
        return _export(engine, table, fmt, chunk_size)


@pytest.mark.parametrize("table", [t for t in arrow.FAST_TABLES if t != "scenarios"])
def test_adbc_reader_gives_the_same_csv_and_parquet(stored, adbc, monkeypatch, table):  # noqa: F811
    backend = stored.dialect.name
    csv_bytes = _export(stored, table, "csv")
    assert adbc[backend] == 1  # the ADBC source was used
    assert csv_bytes == _cursor_export(stored, table, "csv", monkeypatch) == _row_path(stored, table, "csv")
    fast = _export(stored, table, "parquet")
    slow = _cursor_export(stored, table, "parquet", monkeypatch)
    a, b = pq.read_table(io.BytesIO(fast)), pq.read_table(io.BytesIO(slow))
    assert a.equals(b) and a.schema.equals(b.schema)
    assert pq.ParquetFile(io.BytesIO(fast)).num_row_groups == pq.ParquetFile(io.BytesIO(slow)).num_row_groups
    assert a.equals(pq.read_table(io.BytesIO(_row_path(stored, table, "parquet"))))


def test_columns_null_in_the_first_batch_keep_their_type(stored, adbc, monkeypatch):  # noqa: F811
    # the SQLite driver infers a column's type from its first batch: all-null there, values later
    with Session(stored) as s:
        first = s.execute(text("SELECT min(id) FROM event")).scalar_one()
        s.execute(text("UPDATE event SET ts = NULL, content = NULL, data = NULL, parent_seq = NULL, hop = NULL "
                       "WHERE id < :lim"), {"lim": first + 6})
        s.execute(text("UPDATE event SET hop = 3, parent_seq = 1, ts = '2024-01-01T00:00:00Z' WHERE id >= :lim"),
                  {"lim": first + 6})
        s.commit()
    for fmt in ("csv", "parquet"):
        assert _export(stored, "events", fmt, 3) == _cursor_export(stored, "events", fmt, monkeypatch, 3)
    table = pq.read_table(io.BytesIO(_export(stored, "events", "parquet", 3)))
    assert table.column("hop").to_pylist()[:6] == [None] * 6 and set(table.column("hop").to_pylist()[6:]) == {3}
    assert str(table.schema.field("hop").type) == "int64" and str(table.schema.field("ts").type) == "string"


def test_boolean_and_float_columns_null_in_the_first_batch_keep_their_type(stored, adbc, monkeypatch):  # noqa: F811
    # integer and boolean columns come with their nulls (no flag): all null in the first batch is int64
    with Session(stored) as s:
        first = s.execute(text("SELECT min(id) FROM principal")).scalar_one()
        s.execute(text("UPDATE principal SET success = NULL, score = NULL WHERE id < :lim"), {"lim": first + 3})
        s.execute(text("UPDATE principal SET success = :t, score = 0.25 WHERE id >= :lim"), {"lim": first + 3, "t": True})
        s.commit()
    for fmt in ("csv", "parquet"):
        assert _export(stored, "principals", fmt, 2) == _cursor_export(stored, "principals", fmt, monkeypatch, 2)
    table = pq.read_table(io.BytesIO(_export(stored, "principals", "parquet", 2)))
    success = table.column("success").to_pylist()
    assert success[:3] == [None] * 3 and set(success[3:]) == {True} and str(table.schema.field("success").type) == "bool"
    assert table.column("score").to_pylist()[:3] == [None] * 3 and str(table.schema.field("score").type) == "double"


def test_reader_process_is_ended_when_the_export_stops_early(stored, adbc, monkeypatch):  # noqa: F811
    procs = []
    popen = subprocess.Popen

    def spy(*a, **k):
        procs.append(popen(*a, **k))
        return procs[-1]

    monkeypatch.setattr(arrow.subprocess, "Popen", spy)
    stream = service.export_stream(stored, "events", "csv", service.ExportOptions(chunk_size=2))
    next(stream), next(stream)  # header and one chunk
    stream.close()
    if stored.dialect.name == "sqlite":
        assert len(procs) == 1 and procs[0].poll() is not None


def _sqlite_path(engine) -> str:
    return engine.url.database


_PROBE = """import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    c.execute('BEGIN IMMEDIATE')
    print('acquired')
except sqlite3.OperationalError as e:
    print(e)
"""


def test_export_while_another_connection_holds_a_write_transaction(engine, tokens, adbc):
    backend = engine.dialect.name
    before = _export(engine, "events", "csv")
    with engine.connect() as writer:  # a write transaction left open during the export
        writer.execute(text("UPDATE event SET content = 'uncommitted' WHERE id = (SELECT min(id) FROM event)"))
        during = _export(engine, "events", "csv")
        assert adbc[backend] == 2
        assert during == before and b"uncommitted" not in during  # the snapshot before the write
        if backend == "sqlite":  # the writer still holds its lock: another process cannot take it
            probe = subprocess.run([sys.executable, "-c", _PROBE, _sqlite_path(engine)], capture_output=True,
                                   text=True, check=True)
            assert probe.stdout.strip() == "database is locked", probe
        writer.commit()
    assert b"uncommitted" in _export(engine, "events", "csv")


def test_annotate_export_annotate_in_one_process(engine, tokens, client, adbc):
    """The reader's SQLite library never runs in this process: the app's connections keep
    working (no "disk I/O error", no lost lock) around an export."""
    def annotate(who: str, run_id: str):
        res = client.post("/api/v1/annotations", json={"run_id": run_id, "no_failure": True, "status": "submitted"},
                          headers=tokens[who])
        assert res.status_code == 200, res.text

    annotate("carol", "r4")
    with Session(engine) as holder:  # a session in the middle of a write transaction during the export
        holder.execute(text("UPDATE run SET status = status WHERE run_id = 'r4'"))
        res = client.get("/api/v1/exports/events.parquet", headers=tokens["adam"])
        assert res.status_code == 200
        assert pq.read_table(io.BytesIO(res.content)).num_rows > 0
        holder.commit()
    assert adbc[engine.dialect.name] == 1
    annotate("carol", "r5")
    annotate("bob", "r4")
    with Session(engine) as s:
        n = s.execute(text("SELECT count(*) FROM annotation a JOIN user_account u ON u.id = a.user_id "
                           "WHERE u.username = 'carol' AND a.status = 'submitted'")).scalar_one()
    assert n >= 3  # carol: r2 from the corpus, r4 and r5 here
    if engine.dialect.name == "sqlite":
        assert sqlite3.connect(_sqlite_path(engine)).execute("PRAGMA integrity_check").fetchone() == ("ok",)
