"""Import throughput and memory, as ratios to baselines measured in the same run.

- parse: reading + normalizing a JSON Lines corpus without a database (the baseline);
- import (SQLite, PostgreSQL): the same file into an empty database, one savepoint per run;
- memory: peak traced allocation while streaming a JSON array, against the file's size.
"""
from __future__ import annotations

import os
import secrets
import tempfile
import time
import tracemalloc
from pathlib import Path

from sqlalchemy import create_engine, text

from app.core.db import make_engine
from app.core.migrate import upgrade
from app.demo.generator import generate_runs
from app.ingest import iter_path, writers
from app.ingest.loader import import_paths

PG_ADMIN = os.environ.get("A2A_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _pg_db():
    name = f"a2annotate_bench_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    return admin, name, PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def main(quick: bool = False) -> list[str]:
    n = 300 if quick else 2000
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        jsonl = d / "runs.jsonl"
        writers.write_jsonl((x.run for x in generate_runs(n, 1)), jsonl)
        events = sum(1 for item in iter_path(str(jsonl)) for _ in item.run["events"])
        base, _ = _timed(lambda: sum(1 for _ in iter_path(str(jsonl))))
        rows.append(f"| parse+normalize {n} runs ({events} events), no DB (baseline) | {base:.2f} s | 1.00 |")

        url = f"sqlite:///{d / 'bench.db'}"
        upgrade(url)
        eng = make_engine(url)
        t, s = _timed(lambda: import_paths(eng, [str(jsonl)]))
        assert s.imported == n, s.errors[:3]
        rows.append(f"| import {n} runs into SQLite | {t:.2f} s ({n / t:.0f} runs/s) | {t / base:.2f} |")
        t2, s2 = _timed(lambda: import_paths(eng, [str(jsonl)]))
        rows.append(f"| re-import same file into SQLite (all unchanged) | {t2:.2f} s | {t2 / base:.2f} |")
        eng.dispose()

        try:
            admin, name, pg_url = _pg_db()
        except Exception as exc:  # noqa: BLE001
            rows.append(f"| import into PostgreSQL | not measured: {exc.__class__.__name__} | |")
        else:
            try:
                upgrade(pg_url)
                eng = make_engine(pg_url)
                t, s = _timed(lambda: import_paths(eng, [str(jsonl)]))
                assert s.imported == n
                rows.append(f"| import {n} runs into PostgreSQL | {t:.2f} s ({n / t:.0f} runs/s) | {t / base:.2f} |")
                eng.dispose()
            finally:
                with admin.connect() as c:
                    c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

        big = d / "runs.json"
        writers.write_json_array((x.run for x in generate_runs(n, 2)), big)
        size = big.stat().st_size
        tracemalloc.start()
        count = sum(1 for _ in iter_path(str(big)))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append(f"| stream a {size / 1e6:.1f} MB JSON array ({count} runs): peak traced memory | "
                    f"{peak / 1e6:.1f} MB | {peak / size:.2f} of file size |")
    return rows


if __name__ == "__main__":
    import sys

    print("\n".join(main("--quick" in sys.argv)))
