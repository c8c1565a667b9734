"""Events export (CSV, Parquet) against pandas / pyarrow writing the same frame / table.

The database holds N demo runs (SQLite).  a2annotate: ``export_stream(engine, "events", fmt)``
consumed to the end (all bytes made).  Baselines in the same run: ``DataFrame.to_csv`` of the
same rows (the CSV read back as text columns) and ``pyarrow.parquet.write_table`` of the same
table (the Parquet read back), zstd as the export uses.  A third row shows what reading the
rows alone costs (``sqlite3`` ``fetchall`` of the same columns), the floor under any export.
"""
from __future__ import annotations

import io
import os
import sqlite3

from bench.common import bench_dir, loaded_sqlite, median_time, row

SQL = ("SELECT event.id, run.run_id, seq, ts, kind, actor, recipients, visibility, content, data, parent_seq, hop, "
       "event.extra FROM event JOIN run ON run.id = event.run_pk ORDER BY event.id")


def _measure(url: str, n_runs: int) -> list[str]:
    import pandas as pd
    import pyarrow.parquet as pq

    from app.core.db import make_engine
    from app.exports import service
    from app.exports.schema import table_spec

    engine = make_engine(url)

    def drain(fmt: str) -> int:
        return sum(len(b) for b in service.export_stream(engine, "events", fmt))

    csv_bytes = b"".join(service.export_stream(engine, "events", "csv"))
    frame = pd.read_csv(io.BytesIO(csv_bytes), dtype=str, keep_default_na=False)
    pq_bytes = b"".join(service.export_stream(engine, "events", "parquet"))
    table = pq.read_table(io.BytesIO(pq_bytes))
    n = len(frame)
    rows = []
    ours = ours_csv = median_time(lambda: drain("csv"))
    base = median_time(lambda: frame.to_csv(io.StringIO(), index=False))
    rows.append(row(f"events export, CSV, {n_runs:,} runs ({n:,} events, {len(csv_bytes) / 1e6:.0f} MB)",
                    f"{ours:.2f} s", f"pandas `to_csv` of the same frame: {base:.2f} s", ours / base, "within 2x"))
    ours = median_time(lambda: drain("parquet"))
    base = median_time(lambda: pq.write_table(table, io.BytesIO(), compression="zstd"))
    rows.append(row(f"events export, Parquet, {n_runs:,} runs ({n:,} events)", f"{ours:.2f} s",
                    f"pyarrow `write_table` of the same table: {base:.2f} s", ours / base, "within 2x"))
    spec = table_spec("events")

    def row_path(fmt: str) -> int:  # the per-cell writer every table used before (issue 14 "before")
        from sqlmodel import Session

        with Session(engine) as session:
            columns, chunks = service.iter_chunks(session, "events")
            return sum(len(b) for b in service._WRITERS[fmt](spec, columns, chunks, lambda n: None))

    for fmt, what in (("csv", "CSV"), ("parquet", "Parquet")):
        before = median_time(lambda f=fmt: row_path(f))
        rows.append(row(f"(before) events {what} through the per-cell row writer, same data", f"{before:.2f} s",
                        "the Arrow path above", before / (ours if fmt == "parquet" else ours_csv), "",
                        "the speed-up of this change"))
    path = url.removeprefix("sqlite:///")
    read = median_time(lambda: sqlite3.connect(path).execute(SQL).fetchall())
    rows.append(row(f"(floor) reading the {n:,} event rows with `sqlite3` `fetchall`, no export", f"{read:.2f} s",
                    f"pyarrow `write_table`: {base:.2f} s", read / base, "", "the database read alone"))
    engine.dispose()
    return rows


def main(quick: bool = False) -> list[str]:
    d = bench_dir()
    sizes = [20] if quick else [2500] + ([25000] if os.environ.get("BENCH_LARGE") else [])
    out = []
    for n in sizes:
        out += _measure(loaded_sqlite(d, n), n)
    return out


if __name__ == "__main__":
    import sys

    print("\n".join(main("--quick" in sys.argv)))
