"""A cached GET of agreement at a small and a large label count, with the data version read from
the trigger-kept counter (migration 0015_data_version) and, in the same process on the same
database, with the ten-table fingerprint it replaced (the function below, as it was in
app/results/service.py before; patched in for the "fingerprint" rows).

Each database gets ``n_runs`` runs (the loader), three annotators' submitted annotations on every
run and labels spread over them, added with one INSERT ... SELECT; the agreement is computed once
(stored), then ``GET /api/v1/agreement`` is asked ``BENCH_REPEAT`` (default 30) times per variant,
the variants taking turns, and the median reported. Not part of the suite:
``python -m bench.bench_data_version [sqlite|postgresql ...]``.

``python -m bench.bench_data_version writes [sqlite|postgresql ...]``: what the triggers cost the
writers, on one database per backend with the triggers on and off by turns (PostgreSQL: ``ALTER
TABLE ... DISABLE TRIGGER``; SQLite: dropped and created again) and, on PostgreSQL, with every
bump on one row instead of 16: the loader importing ``BENCH_DV_IMPORT`` runs (default 1,000), and
``BENCH_DV_THREADS`` threads (default 8) saving submitted annotations for ``BENCH_DV_SECONDS``
(default 5) each round. On a loaded machine these wall-clock ratios are noise; so

``python -m bench.bench_data_version cost``: the triggers' own time, which load barely moves:
PostgreSQL's ``pg_stat_user_functions`` (``track_functions = 'all'``) over 1,000 save-like
transactions and a 20,000-label executemany; SQLite's process CPU time of the same work with the
triggers on and off by turns (its triggers run in this process).
"""
from __future__ import annotations

import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

from sqlalchemy import case, func, select, text

#: (runs, labels) of the two sizes
SIZES = tuple(tuple(int(x) for x in p.split(":")) for p in os.environ.get("BENCH_DV_SIZES", "500:10000,5000:500000").split(","))
PARAMS = {"n_boot": 10, "seed": 1}


def old_fingerprint(session) -> str:
    """The data version before 0015: the ten-table fingerprint (app/results/service._fingerprint)."""
    from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
    from app.auth.models import User
    from app.runs.models import Agent, Principal, Run, Scenario
    from app.taxonomies.models import Taxonomy

    counted = (Annotation, Label, GoldRun, GoldLabel, Run, Agent, Principal, User, Taxonomy, Scenario)
    cols = []
    for t in counted:
        cols += [select(func.count()).select_from(t).scalar_subquery(), select(func.max(t.id)).scalar_subquery()]
    cols += [select(func.max(Annotation.updated_at)).scalar_subquery(),
             select(func.max(GoldRun.updated_at)).scalar_subquery(),
             select(func.max(Run.imported_at)).scalar_subquery(),
             select(func.coalesce(func.sum(Annotation.version), 0)).scalar_subquery(),
             select(func.coalesce(func.sum(GoldLabel.version), 0)).scalar_subquery(),
             select(func.coalesce(func.sum(case((GoldLabel.accepted, 1), else_=0)), 0)).scalar_subquery(),
             select(func.coalesce(func.sum(case((User.kind == "judge", 1), else_=0)), 0)).scalar_subquery()]
    row = session.execute(select(*cols)).one()
    return hashlib.sha256("|".join(str(v) for v in row).encode()).hexdigest()


def raw_run(run_id: str) -> dict:
    """A small canonical run: two principals, agents buyer_agent / seller_agent, five events."""
    return {"run_id": run_id, "status": "completed",
            "scenario": {"id": "commerce/s1", "family": "commerce", "alignment": "competitive", "title": "A deal"},
            "principals": [{"id": "buyer", "outcome": {"success": False, "score": 0.2}},
                           {"id": "seller", "outcome": {"success": True, "score": 0.9}}],
            "agents": [{"id": "buyer_agent", "principal": "buyer", "model": "m-a", "harness": "h1"},
                       {"id": "seller_agent", "principal": "seller", "model": "m-b", "harness": "h1"}],
            "events": [{"seq": i, "kind": "message", "actor": "buyer_agent", "recipients": ["seller_agent"],
                        "visibility": "shared", "content": f"message {i}"} for i in range(5)]}


def build(url: str, n_runs: int, n_labels: int) -> None:
    from sqlmodel import Session

    from app.auth.service import create_user
    from app.core.config import get_settings
    from app.core.db import make_engine
    from app.core.migrate import upgrade
    from app.ingest.canonical import normalize_run
    from app.ingest.items import ImportItem
    from app.ingest.loader import load_items
    from app.taxonomies.service import latest, sync_builtin

    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        sync_builtin(s, get_settings().taxonomy_dir)
        for name in ("a", "b", "c"):
            create_user(s, name, "annotator")
        create_user(s, "rev", "reviewer")
        s.commit()
        tax = latest(s, "a2-failures").id
    load_items(engine, (ImportItem(run=normalize_run(raw_run(f"r{i:06d}"))) for i in range(n_runs)),
               batch_size=500)
    now = "'2026-01-01 00:00:00'"
    with engine.begin() as c:
        c.execute(text(
            "INSERT INTO annotation (run_pk, user_id, taxonomy_pk, status, no_failure, origin, time_ms, started_at, "
            "updated_at, submitted_at, version) "
            f"SELECT r.id, u.id, {tax}, 'submitted', false, 'human', 0, {now}, {now}, {now}, 1 "
            "FROM run r, user_account u WHERE u.username IN ('a', 'b', 'c')"))
        n_ann = c.execute(text("SELECT count(*) FROM annotation")).scalar()
        first = c.execute(text("SELECT min(id) FROM annotation")).scalar()
        series = ("generate_series(0, :n - 1) AS g(i)" if engine.dialect.name == "postgresql" else
                  "(WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < :n - 1) SELECT i FROM k) g")
        c.execute(text(
            "INSERT INTO label (annotation_id, mode, agent, principals, evidence, time_ms, created_at) "
            f"SELECT :first + (g.i % :n_ann), CASE WHEN g.i % 3 = 0 THEN 'CF1' ELSE 'GR1' END, "
            f"CASE WHEN g.i % 2 = 0 THEN 'buyer_agent' ELSE 'seller_agent' END, '[]', '[1]', 0, {now} FROM {series}"),
            {"first": first, "n_ann": n_ann, "n": n_labels})
    engine.dispose()


def measure(url: str, repeat: int) -> dict[str, float]:
    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from app.auth.service import create_token, get_user
    from app.core.db import make_engine
    from app.main import create_app
    from app.results import service as results

    engine = make_engine(url)
    with Session(engine) as s:
        tok = create_token(s, get_user(s, "rev"))
        s.commit()
    client = TestClient(create_app(engine))
    headers = {"Authorization": f"Bearer {tok}"}
    new = results._current_version
    t = time.perf_counter()
    first = client.get("/api/v1/agreement", params=PARAMS, headers=headers)
    first_s = time.perf_counter() - t
    assert first.status_code == 200 and first.json()["stale"] is False, first.text
    times: dict[str, list[float]] = {"counter": [], "fingerprint": []}
    computed = results.COMPUTATIONS["agreement"]
    try:
        for _ in range(repeat):
            for name in ("counter", "fingerprint"):
                # "fingerprint": the old scan, then the counter's one-row read so that the stored
                # result still matches (the old code compared the scan's hash instead)
                results._current_version = new if name == "counter" else (lambda s: (old_fingerprint(s), new(s))[1])
                t = time.perf_counter()
                r = client.get("/api/v1/agreement", params=PARAMS, headers=headers)
                times[name].append(time.perf_counter() - t)
                assert r.status_code == 200 and r.json()["stale"] is False
    finally:
        results._current_version = new
    assert results.COMPUTATIONS["agreement"] == computed  # every GET was served from the store
    with Session(engine) as s:
        t = time.perf_counter()
        for _ in range(repeat):
            new(s)
            s.commit()
        read_new = (time.perf_counter() - t) / repeat
        t = time.perf_counter()
        for _ in range(repeat):
            old_fingerprint(s)
            s.commit()
        read_old = (time.perf_counter() - t) / repeat
    engine.dispose()
    return {"first_s": first_s, "counter": statistics.median(times["counter"]),
            "fingerprint": statistics.median(times["fingerprint"]), "read_new": read_new, "read_old": read_old}


def _set_triggers(engine, mode: str) -> None:
    """``on``, ``off`` or (PostgreSQL) ``one-row``: every bump on row 0."""
    from app.results.service import RESULT_TABLES

    with engine.begin() as c:
        if engine.dialect.name == "postgresql":
            for t in RESULT_TABLES:
                c.execute(text(f'ALTER TABLE "{t}" {"DISABLE" if mode == "off" else "ENABLE"} TRIGGER a2a_data_version'))
            fn = c.execute(text("SELECT pg_get_functiondef('a2a_bump_data_version'::regproc)")).scalar()
            slot = "0" if mode == "one-row" else "pg_backend_pid() % 16"
            fn = fn.replace("pg_backend_pid() % 16", slot).replace("(0, 1)", f"({slot}, 1)")
            c.execute(text(fn))
            return
        rows = c.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE "
                              "'a2a_data_version_%'")).all()
        if rows:
            engine.info_triggers = rows  # type: ignore[attr-defined]
        if mode == "off":
            for name, _ in rows:
                c.execute(text(f'DROP TRIGGER "{name}"'))
        elif not rows:
            for _, sql in engine.info_triggers:  # type: ignore[attr-defined]
                c.execute(text(sql))


def _saves(engine, pks: list[int], n_threads: int, seconds: float) -> float:
    """Submitted saves per second of ``n_threads`` threads, each its own annotator, for ``seconds``."""
    import random
    import threading

    from app.annotations.service import save_annotation
    from app.auth.service import get_user
    from app.core.db import write_session
    from app.runs.models import Run
    from app.taxonomies.service import latest

    counts = [0] * n_threads
    stop_at = time.perf_counter() + seconds

    def saver(i: int) -> None:
        rnd = random.Random(i)
        with write_session(engine) as s:
            user, tax = get_user(s, f"saver{i}"), latest(s, "a2-failures")
            s.commit()
            while time.perf_counter() < stop_at:
                run = s.get(Run, rnd.choice(pks))
                save_annotation(s, user, run, tax, [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}],
                                status="submitted")
                s.commit()
                counts[i] += 1

    threads = [threading.Thread(target=saver, args=(i,)) for i in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(counts) / seconds


def _serial(engine, n: int) -> float:
    """Seconds per transaction of ``n`` transactions, one after the other, each updating an
    annotation and inserting one label (what a save writes, without the ORM around it)."""
    from app.core.db import session_scope

    with engine.connect() as c:
        ann = c.execute(text("SELECT min(id) FROM annotation")).scalar()
    t = time.perf_counter()
    for _ in range(n):
        with session_scope(engine, write=True) as s:
            s.execute(text("UPDATE annotation SET version = version + 1 WHERE id = :a"), {"a": ann})
            s.execute(text("INSERT INTO label (annotation_id, mode, agent, principals, evidence, time_ms, created_at) "
                           "VALUES (:a, 'GR1', 'seller_agent', '[]', '[2]', 0, '2026-01-01')"), {"a": ann})
    return (time.perf_counter() - t) / n


def _bulk_labels(engine, n: int) -> float:
    """Seconds of one transaction inserting ``n`` labels with one executemany."""
    with engine.connect() as c:
        ann = c.execute(text("SELECT min(id) FROM annotation")).scalar()
    rows = [{"a": ann}] * n
    t = time.perf_counter()
    with engine.begin() as c:
        c.execute(text("INSERT INTO label (annotation_id, mode, agent, principals, evidence, time_ms, created_at) "
                       "VALUES (:a, 'GR1', 'seller_agent', '[]', '[2]', 0, '2026-01-01')"), rows)
    return time.perf_counter() - t


def writes(backends: list[str]) -> None:
    from sqlmodel import Session

    from app.auth.service import create_user
    from app.core.db import make_engine
    from app.ingest.canonical import normalize_run
    from app.ingest.items import ImportItem
    from app.ingest.loader import load_items
    from app.runs.models import Run
    from bench.common import PgDatabase

    n_import = int(os.environ.get("BENCH_DV_IMPORT", 1000))
    n_threads = int(os.environ.get("BENCH_DV_THREADS", 8))
    seconds = float(os.environ.get("BENCH_DV_SECONDS", 5))
    rounds = int(os.environ.get("BENCH_REPEAT", 3))
    work = Path(os.environ.get("BENCH_DIR", "/tmp/bench-data-version"))
    work.mkdir(parents=True, exist_ok=True)
    for backend in backends:
        pg = PgDatabase() if backend == "postgresql" else None
        url = pg.url if pg else f"sqlite:///{work / 'writes.db'}"
        if pg is None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{work / 'writes.db'}{suffix}").unlink(missing_ok=True)
        try:
            build(url, 500, 10_000)
            engine = make_engine(url)
            with Session(engine) as s:
                for i in range(n_threads):
                    create_user(s, f"saver{i}", "annotator")
                s.commit()
                pks = list(s.exec(select(Run.id)).all())
            modes = ["on", "off"] + (["one-row"] if pg else [])
            imp: dict[str, list[float]] = {m: [] for m in modes}
            saves: dict[str, list[float]] = {m: [] for m in modes}
            serial: dict[str, list[float]] = {m: [] for m in modes}
            bulk: dict[str, list[float]] = {m: [] for m in modes}
            batch = 0
            for _ in range(rounds):
                for mode in modes:
                    _set_triggers(engine, mode)
                    batch += 1
                    items = [ImportItem(run=normalize_run(raw_run(f"b{batch}-{i:05d}"))) for i in range(n_import)]
                    t = time.perf_counter()
                    load_items(engine, items, batch_size=200)
                    imp[mode].append(time.perf_counter() - t)
                    saves[mode].append(_saves(engine, pks, n_threads, seconds))
                    serial[mode].append(_serial(engine, 300))
                    bulk[mode].append(_bulk_labels(engine, 20_000))
            _set_triggers(engine, "on")
            engine.dispose()
        finally:
            if pg is not None:
                pg.drop()
        base = {k: statistics.median(v["off"]) for k, v in (("i", imp), ("s", saves), ("t", serial), ("b", bulk))}
        for mode in modes:
            mi, ms = statistics.median(imp[mode]), statistics.median(saves[mode])
            mt, mb = statistics.median(serial[mode]), statistics.median(bulk[mode])
            print(f"| {backend} | triggers {mode} | import {n_import:,} runs {mi:.2f} s ({mi / base['i']:.2f}x) | "
                  f"{n_threads} threads saving: {ms:.0f}/s ({ms / base['s']:.2f}x) | one writer: "
                  f"{mt * 1000:.2f} ms a transaction ({mt / base['t']:.2f}x) | 20,000 labels in one "
                  f"executemany: {mb:.2f} s ({mb / base['b']:.2f}x) |", flush=True)


def cost() -> None:
    from sqlalchemy import event

    from app.core.db import make_engine
    from bench.common import PgDatabase

    pg = PgDatabase()
    try:
        build(pg.url, 200, 2000)
        engine = make_engine(pg.url)

        @event.listens_for(engine, "connect")
        def _track(dbapi_conn, _record):
            cur = dbapi_conn.cursor()
            cur.execute("SET track_functions = 'all'")
            cur.close()
            dbapi_conn.commit()

        engine.dispose()
        n = 1000
        per = _serial(engine, n)
        bulk = _bulk_labels(engine, 20_000)
        for _ in range(2):  # the statistics reach the view after a flush
            with engine.connect() as c:
                c.execute(text("SELECT pg_stat_force_next_flush()"))
                c.commit()
            time.sleep(1.0)
        with engine.connect() as c:
            for name, calls, total in c.execute(text(
                    "SELECT funcname, calls, total_time FROM pg_stat_user_functions ORDER BY funcname")):
                print(f"postgresql {name}: {calls:,} calls, {total:.1f} ms, {total / calls * 1000:.1f} µs a call")
        print(f"postgresql: {n:,} save-like transactions at {per * 1000:.2f} ms each, then 20,000 labels in one "
              f"executemany {bulk:.2f} s (one statement each)")
        engine.dispose()
    finally:
        pg.drop()
    work = Path(os.environ.get("BENCH_DIR", "/tmp/bench-data-version"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "cost.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    build(url, 200, 2000)
    engine = make_engine(url)
    tx: dict[str, list[float]] = {"on": [], "off": []}
    bulk_cpu: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(5):
        for mode in ("on", "off"):
            _set_triggers(engine, mode)
            t = time.process_time()
            _serial(engine, 300)
            tx[mode].append((time.process_time() - t) / 300)
            t = time.process_time()
            _bulk_labels(engine, 20_000)
            bulk_cpu[mode].append(time.process_time() - t)
    _set_triggers(engine, "on")
    engine.dispose()
    m = {k: (statistics.median(tx[k]), statistics.median(bulk_cpu[k])) for k in tx}
    for mode in ("on", "off"):
        print(f"sqlite triggers {mode}: {m[mode][0] * 1e6:.0f} µs CPU a save-like transaction, "
              f"{m[mode][1] * 1000:.0f} ms CPU for 20,000 labels in one executemany")
    print(f"sqlite: {(m['on'][1] - m['off'][1]) / 20_000 * 1e6:.2f} µs CPU a label row, "
          f"{(m['on'][0] - m['off'][0]) * 1e6:.0f} µs a save-like transaction")


def main(backends: list[str]) -> None:
    from bench.common import PgDatabase

    os.environ.setdefault("JOBS_BROKER", "immediate")
    os.environ.setdefault("RESULTS_INLINE_ROWS", str(10**9))
    repeat = int(os.environ.get("BENCH_REPEAT", 30))
    work = Path(os.environ.get("BENCH_DIR", "/tmp/bench-data-version"))
    work.mkdir(parents=True, exist_ok=True)
    print("| database | runs | labels | cached GET, counter | cached GET, fingerprint | ratio | version read: "
          "counter / fingerprint |")
    print("|---|---|---|---|---|---|---|")
    for backend in backends:
        for n_runs, n_labels in SIZES:
            pg = None
            if backend == "sqlite":
                path = work / f"dv-{n_runs}.db"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
                url = f"sqlite:///{path}"
            else:
                pg = PgDatabase()
                url = pg.url
            try:
                t = time.perf_counter()
                build(url, n_runs, n_labels)
                built = time.perf_counter() - t
                m = measure(url, repeat)
            finally:
                if pg is not None:
                    pg.drop()
            print(f"| {backend} | {n_runs:,} | {n_labels:,} | {m['counter'] * 1000:.1f} ms | "
                  f"{m['fingerprint'] * 1000:.1f} ms | {m['fingerprint'] / m['counter']:.2f}x | "
                  f"{m['read_new'] * 1000:.2f} ms / {m['read_old'] * 1000:.1f} ms |"
                  f"  (built in {built:.0f} s, first GET {m['first_s']:.1f} s)", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["writes"]:
        writes(args[1:] or ["sqlite", "postgresql"])
    elif args[:1] == ["cost"]:
        cost()
    else:
        main(args or ["sqlite", "postgresql"])
