"""Shared helpers of the benchmarks: corpora, databases, medians."""
from __future__ import annotations

import os
import secrets
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text

PG_ADMIN = os.environ.get("A2A_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
#: repetitions per measurement (the median is reported); BENCH_REPEAT overrides (read per call)
REPEAT = 3


def median_time(fn: Callable[[], object], repeat: int | None = None, setup: Callable[[], object] | None = None
                ) -> float:
    """The median wall time of ``fn()`` over ``repeat`` runs (``setup()`` before each, untimed)."""
    times = []
    for _ in range(repeat or int(os.environ.get("BENCH_REPEAT", REPEAT))):
        if setup is not None:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def corpus(directory: Path, n_runs: int, seed: int = 1) -> Path:
    """A JSON Lines file of ``n_runs`` demo runs (cached in ``directory``)."""
    from app.demo.generator import generate_runs
    from app.ingest import writers

    path = directory / f"runs-{n_runs}-{seed}.jsonl"
    if not path.exists():
        writers.write_jsonl((x.run for x in generate_runs(n_runs, seed)), path)
    return path


def sqlite_url(directory: Path, name: str) -> str:
    path = directory / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return f"sqlite:///{path}"


class PgDatabase:
    """A fresh PostgreSQL database (dropped by :meth:`drop`); ``url`` is None when unreachable."""

    def __init__(self) -> None:
        self.name = f"a2annotate_bench_{secrets.token_hex(4)}"
        self.url: str | None = None
        self.error: str | None = None
        try:
            admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
            with admin.connect() as c:
                c.execute(text(f'CREATE DATABASE "{self.name}"'))
            admin.dispose()
            self.url = PG_ADMIN.rsplit("/", 1)[0] + "/" + self.name
        except Exception as exc:  # noqa: BLE001
            self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"

    def drop(self) -> None:
        if self.url is None:
            return
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        admin.dispose()


def prepare(url: str) -> None:
    """Migrate ``url`` and register the built-in taxonomies (what `a2annotate db upgrade` does)."""
    from sqlmodel import Session

    from app.core.config import get_settings
    from app.core.db import make_engine
    from app.core.migrate import upgrade
    from app.taxonomies.service import sync_builtin

    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        sync_builtin(session, get_settings().taxonomy_dir)
        session.commit()
    engine.dispose()


def row(what: str, ours: str, baseline: str, ratio: float | None, target: str = "", note: str = "") -> str:
    """A markdown row ``| work | a2annotate | baseline | ratio | target | met |``; "met" is worked
    out for targets written ``within Nx`` / ``at most Nx`` / ``at least N`` (else ``note``)."""
    r = "" if ratio is None else f"{ratio:.2f}"
    met = note
    if ratio is not None and not note:
        words = target.split()
        try:
            if target.startswith(("within", "at most", "<=")):
                met = "yes" if ratio <= float(words[-1].rstrip("x")) else "**no**"
            elif target.startswith("at least"):
                met = "yes" if ratio >= float(words[-1].rstrip("x")) else "**no**"
        except ValueError:
            pass
    return f"| {what} | {ours} | {baseline} | {r} | {target} | {met} |"


HEADER = ["| work | a2annotate | baseline in the same run | ratio | target | met |", "|---|---|---|---|---|---|"]


def loaded_sqlite(directory: Path, n_runs: int) -> str:
    """A SQLite database holding ``n_runs`` demo runs (imported once per bench directory)."""
    from app.core.db import make_engine
    from app.ingest.loader import import_paths

    path = directory / f"loaded-{n_runs}.db"
    url = f"sqlite:///{path}"
    if not (directory / f"loaded-{n_runs}.ok").exists():
        url = sqlite_url(directory, f"loaded-{n_runs}")
        prepare(url)
        engine = make_engine(url)
        summary = import_paths(engine, [str(corpus(directory, n_runs))])
        engine.dispose()
        assert summary.imported == n_runs, summary.errors[:3]
        (directory / f"loaded-{n_runs}.ok").touch()
    return url


def bench_dir() -> Path:
    """Where the benchmarks keep corpora and databases (BENCH_DIR, default a temp folder)."""
    import tempfile

    d = Path(os.environ.get("BENCH_DIR") or Path(tempfile.gettempdir()) / "a2annotate-bench")
    d.mkdir(parents=True, exist_ok=True)
    return d
