"""The queue: one huey instance per broker setting, with the one task that runs a job.

Only a job id travels through the queue; everything else about the job is in the database.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from huey import Huey, RedisHuey, SqliteHuey

from app.core.config import Settings, get_settings

_LOCK = threading.Lock()
_HUEYS: dict[tuple[str, str], Huey] = {}


def broker_url(settings: Settings | None = None) -> str:
    """The JOBS_BROKER setting, or its default: a SQLite file beside a SQLite database (or in the
    working folder for another database)."""
    settings = settings or get_settings()
    broker = settings.jobs_broker.strip()
    if broker:
        return broker
    url = settings.database_url
    folder = Path(url[len("sqlite:///"):]).parent if url.startswith("sqlite:///") and url != "sqlite:///:memory:" \
        else Path.cwd()
    return f"sqlite:///{(folder / 'a2annotate-jobs.db').resolve()}"


def _build(broker: str, name: str) -> Huey:
    if broker == "immediate":
        huey = Huey(name, immediate=True, results=False)
    elif broker.startswith("sqlite:///"):
        huey = SqliteHuey(name, filename=broker[len("sqlite:///"):], results=False)
    elif broker.startswith(("redis://", "rediss://", "unix://")):
        huey = RedisHuey(name, url=broker, results=False)
    else:
        raise ValueError(f"JOBS_BROKER: expected immediate, sqlite:///PATH or redis://HOST:PORT/DB, got {broker!r}")

    @huey.task(name="run_job")
    def run_job(job_id: str) -> None:
        from app.jobs.service import execute

        execute(job_id)

    huey.run_job = run_job  # type: ignore[attr-defined]
    return huey


def get_huey(settings: Settings | None = None) -> Huey:
    """The huey instance of the broker and queue name in the settings (built once each)."""
    settings = settings or get_settings()
    key = (broker_url(settings), settings.jobs_queue_name)
    with _LOCK:
        if key not in _HUEYS:
            _HUEYS[key] = _build(*key)
        return _HUEYS[key]


def send(job_id: str, delay: float | None = None, engine: Any = None) -> None:
    """Put the job on the queue (after ``delay`` seconds). With the immediate broker the job runs
    now, in this thread, on ``engine`` (the caller's; default DATABASE_URL's)."""
    if broker_url() == "immediate":
        from app.jobs.service import execute

        execute(job_id, engine)
        return
    task = get_huey().run_job  # type: ignore[attr-defined]
    if delay:
        task.schedule((job_id,), delay=delay)
    else:
        task(job_id)
