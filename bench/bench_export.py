"""Events export (CSV, Parquet) against pandas / pyarrow writing the same frame / table.

The database holds N demo runs (SQLite; BENCH_LARGE=1 adds 25,000 runs).  a2annotate:
``export_stream(engine, "events", fmt)`` consumed to the end (all bytes made).  Baselines in the
same run: ``DataFrame.to_csv`` of the same rows (the CSV read back as text columns) and
``pyarrow.parquet.write_table`` of the same table (the Parquet read back), zstd as the export
uses.  More rows in the same run:

* "(before)": the per-cell row writer every table used before issue 14 (2,500 runs only: it
  takes minutes at 25,000), and the driver-cursor Arrow path (``fetchmany`` + ``pa.array`` per
  column, the reader before the ADBC sources);
* "(floor)": reading the rows alone (``sqlite3`` ``fetchall`` of the same columns), and SQLite
  scanning them without handing them out (``sum(length(...))`` over every column, in C);
* PostgreSQL (when reachable, 2,500 runs): the same events copied into a fresh database, the
  same export rows against the same baselines, and the floor there: the server sending the rows
  (binary ``COPY ... TO STDOUT``) drained by psycopg.
"""
from __future__ import annotations

import contextlib
import io
import os
import sqlite3

from bench.common import PgDatabase, bench_dir, loaded_sqlite, median_time, prepare, row

SQL = ("SELECT event.id, run.run_id, seq, ts, kind, actor, recipients, visibility, content, data, parent_seq, hop, "
       "event.extra FROM event JOIN run ON run.id = event.run_pk ORDER BY event.id")
SCAN = ("SELECT sum(length(run.run_id) + seq + ifnull(length(ts), 0) + length(kind) + length(actor) + length(recipients)"
        " + length(visibility) + ifnull(length(content), 0) + ifnull(length(data), 0) + ifnull(parent_seq, 0)"
        " + ifnull(hop, 0) + length(event.extra)) FROM event JOIN run ON run.id = event.run_pk")


@contextlib.contextmanager
def _cursor_reader():
    """The export reading through the driver cursor (the reader before the ADBC sources)."""
    from app.exports import arrow

    have = arrow._have
    arrow._have = lambda *modules: False
    try:
        yield
    finally:
        arrow._have = have


def _measure(url: str, n_runs: int, backend: str = "SQLite", before_rows: bool = True) -> list[str]:
    import pandas as pd
    import pyarrow.parquet as pq

    from app.core.db import make_engine
    from app.exports import service
    from app.exports.schema import table_spec

    engine = make_engine(url)
    on = "" if backend == "SQLite" else f" ({backend})"

    def drain(fmt: str) -> int:
        return sum(len(b) for b in service.export_stream(engine, "events", fmt))

    csv_bytes = b"".join(service.export_stream(engine, "events", "csv"))
    with _cursor_reader():
        assert b"".join(service.export_stream(engine, "events", "csv")) == csv_bytes
    frame = pd.read_csv(io.BytesIO(csv_bytes), dtype=str, keep_default_na=False)
    pq_bytes = b"".join(service.export_stream(engine, "events", "parquet"))
    table = pq.read_table(io.BytesIO(pq_bytes))
    n = len(frame)
    rows = []
    ours = {}
    ours["csv"] = median_time(lambda: drain("csv"))
    base_csv = median_time(lambda: frame.to_csv(io.StringIO(), index=False))
    rows.append(row(f"events export{on}, CSV, {n_runs:,} runs ({n:,} events, {len(csv_bytes) / 1e6:.0f} MB)",
                    f"{ours['csv']:.2f} s", f"pandas `to_csv` of the same frame: {base_csv:.2f} s",
                    ours["csv"] / base_csv, "within 2x"))
    ours["parquet"] = median_time(lambda: drain("parquet"))
    base = median_time(lambda: pq.write_table(table, io.BytesIO(), compression="zstd"))
    rows.append(row(f"events export{on}, Parquet, {n_runs:,} runs ({n:,} events)", f"{ours['parquet']:.2f} s",
                    f"pyarrow `write_table` of the same table: {base:.2f} s", ours["parquet"] / base, "within 2x"))
    spec = table_spec("events")

    def row_path(fmt: str) -> int:  # the per-cell writer every table used before (issue 14 "before")
        from sqlmodel import Session

        with Session(engine) as session:
            columns, chunks = service.iter_chunks(session, "events")
            return sum(len(b) for b in service._WRITERS[fmt](spec, columns, chunks, lambda n: None))

    for fmt, what, b in (("csv", "CSV", base_csv), ("parquet", "Parquet", base)):
        with _cursor_reader():
            before = median_time(lambda f=fmt: drain(f))
        rows.append(row(f"(before) events {what}{on} read through the driver cursor (`fetchmany`), same data",
                        f"{before:.2f} s", f"the export above: {ours[fmt]:.2f} s; baseline {b:.2f} s",
                        before / ours[fmt], "", f"the speed-up of the ADBC reader; {before / b:.2f}x the baseline"))
    if before_rows:
        for fmt, what in (("csv", "CSV"), ("parquet", "Parquet")):
            before = median_time(lambda f=fmt: row_path(f))
            rows.append(row(f"(before) events {what}{on} through the per-cell row writer, same data", f"{before:.2f} s",
                            "the export above", before / ours[fmt], "", "the speed-up since issue 14"))
    if backend == "SQLite":
        path = url.removeprefix("sqlite:///")
        read = median_time(lambda: sqlite3.connect(path).execute(SQL).fetchall())
        rows.append(row(f"(floor) reading the {n:,} event rows with `sqlite3` `fetchall`, no export", f"{read:.2f} s",
                        f"pyarrow `write_table`: {base:.2f} s", read / base, "", "the database read alone"))
        scan = median_time(lambda: sqlite3.connect(path).execute(SCAN).fetchall())
        rows.append(row(f"(floor) SQLite scanning the {n:,} event rows in C (`sum(length(...))`, no rows out)",
                        f"{scan:.2f} s", f"pyarrow `write_table`: {base:.2f} s", scan / base, "",
                        "the storage engine alone"))
    else:
        import psycopg

        query = ("SELECT run.run_id, seq, ts, kind, actor, CAST(recipients AS TEXT), visibility, content, "
                 "CAST(data AS TEXT), parent_seq, hop, CAST(event.extra AS TEXT) FROM event JOIN run ON "
                 "run.id = event.run_pk ORDER BY event.id")

        def copy_out() -> int:
            with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as c, c.cursor() as cur:
                with cur.copy(f"COPY ({query}) TO STDOUT (FORMAT binary)") as copy:
                    return sum(len(b) for b in copy)

        read = median_time(copy_out)
        rows.append(row(f"(floor) PostgreSQL sending the {n:,} event rows (binary `COPY ... TO STDOUT`, drained by "
                        "psycopg), no export", f"{read:.2f} s", f"pyarrow `write_table`: {base:.2f} s", read / base, "",
                        "the database read alone"))
    engine.dispose()
    return rows


def _copy_to_pg(sqlite_url: str, pg_url: str) -> None:
    """The scenario, run and event rows of the SQLite database copied into a migrated PostgreSQL
    database with ``COPY`` (what the events export reads)."""
    import psycopg
    from sqlmodel import SQLModel

    import app.models  # noqa: F401

    prepare(pg_url)
    src = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as dst, dst.cursor() as cur:
        for name in ("scenario", "run", "event"):
            cols = [c.name for c in SQLModel.metadata.tables[name].columns]
            with cur.copy(f'COPY "{name}" ({", ".join(cols)}) FROM STDIN') as copy:
                for r in src.execute(f'SELECT {", ".join(cols)} FROM "{name}"'):
                    copy.write_row(r)
    src.close()


def main(quick: bool = False) -> list[str]:
    d = bench_dir()
    sizes = [20] if quick else [2500] + ([25000] if os.environ.get("BENCH_LARGE") else [])
    out = []
    for n in sizes:
        out += _measure(loaded_sqlite(d, n), n, before_rows=n <= 2500)
    n = sizes[0]
    pg = PgDatabase()
    if pg.url is None:
        out.append(row("events export (PostgreSQL)", f"not measured: {pg.error}", "", None))
        return out
    try:
        _copy_to_pg(loaded_sqlite(d, n), pg.url)
        out += _measure(pg.url, n, backend="PostgreSQL", before_rows=False)
    finally:
        pg.drop()
    return out


def chunk_cpu(url: str, chunks: list[int], repeat: int = 5) -> list[str]:
    """CPU seconds of the events Parquet export (the exporting process plus its SQLite reader
    processes) at each chunk size against pyarrow ``write_table`` of the same table, interleaved
    in one run, medians of `repeat`: CPU, not wall time, because on a shared machine the wall
    time of a two-process pipeline is mostly waiting for a core."""
    import resource
    import statistics

    import pyarrow.parquet as pq

    from app.core.db import make_engine
    from app.exports import service

    engine = make_engine(url)
    table = pq.read_table(io.BytesIO(b"".join(service.export_stream(engine, "events", "parquet"))))

    def cpu() -> tuple[float, float]:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime

    spent: dict = {"base": [], **{c: [] for c in chunks}}
    for _ in range(repeat):
        a = cpu()
        pq.write_table(table, io.BytesIO(), compression="zstd")
        spent["base"].append(cpu()[0] - a[0])
        for c in chunks:
            a = cpu()
            sum(len(b) for b in service.export_stream(engine, "events", "parquet", service.ExportOptions(chunk_size=c)))
            b = cpu()
            spent[c].append((b[0] - a[0], b[1] - a[1]))
    engine.dispose()
    base = statistics.median(spent["base"])
    out = []
    for c in chunks:
        main_s, reader_s = (statistics.median(x[i] for x in spent[c]) for i in (0, 1))
        out.append(row(f"events Parquet export, {table.num_rows:,} rows, {c:,}-row chunks: CPU (exporter + reader)",
                       f"{main_s:.3f} + {reader_s:.3f} s", f"pyarrow `write_table` CPU: {base:.3f} s",
                       (main_s + reader_s) / base, "within 2x"))
    return out


if __name__ == "__main__":
    import sys

    if "--chunks" in sys.argv:  # python -m bench.bench_export --chunks 4000,16384 [RUNS]
        i = sys.argv.index("--chunks")
        sizes = [int(x) for x in sys.argv[i + 1].split(",")]
        n_runs = int(sys.argv[i + 2]) if len(sys.argv) > i + 2 else 2500
        print("\n".join(chunk_cpu(loaded_sqlite(bench_dir(), n_runs), sizes)))
    else:
        print("\n".join(main("--quick" in sys.argv)))
