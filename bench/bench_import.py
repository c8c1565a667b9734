"""Import throughput, growth and memory, as ratios to raw inserts of the same rows in the same run.

a2annotate: ``import_paths`` of a JSON Lines demo corpus into a fresh migrated database (the
taxonomies registered, so audits become judge annotations as in real use).  Baselines in the
same run, into another fresh migrated database: the same rows (runs, principals, agents, events,
audits; JSON already encoded, ids given) with ``sqlite3`` ``executemany`` in one transaction, or
psycopg ``COPY`` (one per table) on PostgreSQL; the rows are made before the clock starts.
A "floor" row shows what reading + normalising the file alone costs (no database).
Peak RSS is measured in a child process per size: the importer's peak plus the peak of its
reading process (`app.ingest.loader.read_ahead`), an upper bound of the two together.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.common import PgDatabase, bench_dir, corpus, median_time, prepare, row, sqlite_url

TABLES = ("run", "principal", "agent", "event", "audit", "check")


def _raw_rows(path: Path, sqlite: bool = True) -> tuple[dict[str, tuple[list[str], list[tuple]]], int]:
    """The rows the import writes (without the judge annotations), JSON encoded as stored on
    SQLite (`sqlite`) or as COPY sends it to PostgreSQL (None as SQL NULL)."""
    from app.core.db import json_dumps
    from app.ingest import iter_path
    from app.ingest.loader import _COLUMNS, _content_tuples, _prepare

    run_cols = ["id", "run_id", "scenario_id", "status", "aggregate_score", "started_at", "ended_at", "extra",
                "scenario_override", "content_hash", "n_events", "source", "imported_at"]
    runs: list[tuple] = []
    content: dict = {t: [] for t in _COLUMNS}
    n_events = 0
    for pk, item in enumerate(iter_path(str(path)), start=1):
        run = item.run
        _, digest = _prepare(run, item.plain_floats)
        runs.append((pk, run["run_id"], run["scenario"]["id"], run["status"], run.get("aggregate_score"),
                     run.get("started_at"), run.get("ended_at"), json_dumps(run.get("metadata") or {}), None,
                     digest, len(run["events"]), "bench", "2026-01-01 00:00:00"))
        _content_tuples(pk, run, sqlite, content, item.plain_floats)
        n_events += len(run["events"])
    out = {"run": (run_cols, runs)}
    for table, rows in content.items():
        if rows:
            out[table.__tablename__] = (list(_COLUMNS[table]), rows)
    return out, n_events


def _scenarios(path: Path) -> list[tuple]:
    from app.core.db import json_dumps
    from app.ingest import iter_path

    seen = {}
    for item in iter_path(str(path)):
        sc = item.run["scenario"]
        seen.setdefault(sc["id"], (sc["id"], sc["family"], sc.get("alignment"), sc.get("title"),
                                   sc.get("description"), json_dumps(sc.get("metadata") or {})))
    return list(seen.values())


def _sqlite_baseline(url: str, rows, scenarios) -> None:
    import sqlite3

    con = sqlite3.connect(url.removeprefix("sqlite:///"))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    with con:
        con.executemany("INSERT INTO scenario (id, family, alignment, title, description, extra) VALUES (?,?,?,?,?,?)",
                        scenarios)
        for t in (t for t in TABLES if t in rows):
            cols, data = rows[t]
            con.executemany(f'INSERT INTO "{t}" ({", ".join(cols)}) VALUES ({", ".join("?" * len(cols))})', data)
    con.close()


def _pg_baseline(url: str, rows, scenarios) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as con:
        with con.cursor() as cur:
            with cur.copy("COPY scenario (id, family, alignment, title, description, extra) FROM STDIN") as cp:
                for r in scenarios:
                    cp.write_row(r)
            for t in (t for t in TABLES if t in rows):
                cols, data = rows[t]
                with cur.copy(f'COPY "{t}" ({", ".join(cols)}) FROM STDIN') as cp:
                    for r in data:
                        cp.write_row(r)
        con.commit()


def _import(url: str, path: Path) -> None:
    from app.core.db import make_engine
    from app.ingest.loader import import_paths

    engine = make_engine(url)
    summary = import_paths(engine, [str(path)])
    engine.dispose()
    assert summary.rejected == 0, summary.errors[:3]


def _peak_rss(url: str, path: Path) -> float:
    # The importer's own peak is VmHWM of its address space, not RUSAGE_SELF: on Linux ru_maxrss
    # survives exec, so it would report the bench process's size at the fork that started this
    # one (1.2 GB once the 25,000-run rows were held here, whatever the import used). Its
    # children (the read-ahead process) are forked from the importer itself: RUSAGE_CHILDREN.
    code = ("import resource, sys; from bench.bench_import import _import; from pathlib import Path; "
            f"_import({url!r}, Path({str(path)!r})); "
            "hwm = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:')); "
            "print(hwm + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[1]))
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def _backend(name: str, n_runs: int, path: Path, rows, scenarios, n_events: int) -> tuple[float, float, list[str]]:
    d = bench_dir()
    if name == "sqlite":
        def fresh() -> str:
            url = sqlite_url(d, f"import-{n_runs}")
            prepare(url)
            return url
        dbs: list = []
    else:
        dbs = []

        def fresh() -> str:
            db = PgDatabase()
            if db.url is None:
                raise RuntimeError(db.error)
            dbs.append(db)
            prepare(db.url)
            return db.url
    target: dict[str, str] = {}
    try:
        ours = median_time(lambda: _import(target["url"], path), setup=lambda: target.update(url=fresh()))
        raw = _sqlite_baseline if name == "sqlite" else _pg_baseline
        base = median_time(lambda: raw(target["url"], rows, scenarios), setup=lambda: target.update(url=fresh()))
    finally:
        for db in dbs:
            db.drop()
    label = "SQLite" if name == "sqlite" else "PostgreSQL"
    how = "sqlite3 `executemany`, one transaction" if name == "sqlite" else "psycopg `COPY`, one per table"
    return ours, base, [row(f"import {n_runs:,} demo runs ({n_events:,} events) into {label}",
                            f"{ours:.2f} s ({n_events / ours:,.0f} events/s)",
                            f"{how} of the same rows: {base:.2f} s ({n_events / base:,.0f} events/s)",
                            ours / base, "within 2x")]


def main(quick: bool = False) -> list[str]:
    d = bench_dir()
    sizes = [3, 6] if quick else ([2500, 25000] if os.environ.get("BENCH_LARGE") else [250, 2500])
    if os.environ.get("BENCH_IMPORT_SIZES"):  # e.g. "20,200": the BENCH_LARGE rows' code path on small data
        sizes = [int(x) for x in os.environ["BENCH_IMPORT_SIZES"].split(",")][:2]
    out: list[str] = []
    times: dict[str, list[tuple[float, float]]] = {"sqlite": [], "postgresql": []}
    for n in sizes:
        path = corpus(d, n)
        rows, n_events = _raw_rows(path)
        scenarios = _scenarios(path)
        from app.ingest import iter_path

        parse = median_time(lambda p=path: sum(1 for _ in iter_path(str(p))))
        for backend in ("sqlite", "postgresql"):
            try:
                ours, base, rs = _backend(backend, n, path, rows, scenarios, n_events)
            except RuntimeError as exc:
                out.append(row(f"import {n:,} runs into PostgreSQL", f"not measured: {exc}", "", None))
                continue
            times[backend].append((ours, base))
            out += rs
        out.append(row(f"(floor) read + normalise the {n:,}-run file, no database", f"{parse:.2f} s",
                       f"sqlite3 `executemany` of the rows: {times['sqlite'][-1][1]:.2f} s",
                       parse / times["sqlite"][-1][1], "", "parsing alone"))
        del rows
    for backend, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
        if len(times[backend]) == 2:
            (o1, b1), (o2, b2) = times[backend]
            out.append(row(f"how import time grows on {label}, {sizes[0]:,} -> {sizes[1]:,} runs (x10 data)",
                           f"x{o2 / o1:.1f}", f"raw x{b2 / b1:.1f}", o2 / o1, "at most x11 (linear)"))
    if quick:
        out.append(row("peak RSS of an import", "not measured in quick mode", "", None))
        return out
    rss = []
    for n in sizes:
        url = sqlite_url(d, f"rss-{n}")
        prepare(url)
        rss.append(_peak_rss(url, corpus(d, n)))
    out.append(row(f"peak RSS of an import (SQLite), {sizes[1]:,} vs {sizes[0]:,} runs",
                   f"{rss[1]:.0f} MB vs {rss[0]:.0f} MB", "", rss[1] / rss[0], "at most 1.2x (flat)"))
    return out


if __name__ == "__main__":
    print("\n".join(main("--quick" in sys.argv)))
