"""Fixtures of the job tests: settings for a real queue, worker processes, an API client."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token, get_user
from app.core.config import get_settings
from tests.annotations.factories import make_user


@pytest.fixture
def jobs_env(db_url, tmp_path, monkeypatch):
    """Settings for a real queue: this test process enqueues, worker processes run the jobs."""
    env = {"DATABASE_URL": db_url, "JOBS_BROKER": f"sqlite:///{tmp_path / 'jobs.db'}",
           "UPLOAD_DIR": str(tmp_path / "uploads"), "JOB_STALE_SECONDS": "2", "JOB_RETRIES": "2",
           "IMPORT_WAIT_SECONDS": "0"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    yield dict(os.environ)
    get_settings.cache_clear()


class Workers:
    def __init__(self, env: dict[str, str], log_dir):
        self.env, self.log_dir, self.procs = env, log_dir, []

    def start(self, **extra: str) -> subprocess.Popen:
        log = open(self.log_dir / f"worker-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "worker", "--concurrency", "1"],
                                env={**self.env, **extra}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group: kill -9 takes its children too
        self.procs.append(proc)
        return proc

    def kill9(self, proc: subprocess.Popen) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def logs(self) -> str:
        """What the workers printed (for a failing test's message)."""
        return "\n".join(f"--- worker {i}\n" + (self.log_dir / f"worker-{i}.log").read_text(errors="replace")[-3000:]
                         for i in range(len(self.procs)))

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


@pytest.fixture
def workers(jobs_env, tmp_path):
    w = Workers(jobs_env, tmp_path)
    yield w
    w.stop_all()


@pytest.fixture
def api(engine, jobs_env):
    from app.main import create_app

    with Session(engine) as s:
        make_user(s, "rev", role="reviewer", password=None)
        tok = create_token(s, get_user(s, "rev"))
        s.commit()
    client = TestClient(create_app(engine))
    client.headers["Authorization"] = f"Bearer {tok}"
    return client




def load_demo(engine, n: int, *, labels: bool = True, seed: int = 5) -> None:
    """``n`` demo runs, and with ``labels`` the demo annotators' simulated labels on all of them
    (three annotators each): enough for a bootstrap that takes seconds."""
    from app.demo.generator import generate_runs
    from app.demo.seeding import seed_annotations
    from app.ingest.items import ImportItem
    from app.ingest.loader import _after_store_default, load_items
    from app.taxonomies.service import latest

    summary = load_items(engine, (ImportItem(run=d.run, source="demo") for d in generate_runs(n, seed)),
                         after_store=_after_store_default)
    assert summary.imported == n, summary.errors
    if labels:
        from app.auth.service import create_user, get_user
        from app.demo.seeding import DEMO_USERS

        with Session(engine) as s:
            tax_pk = latest(s, "a2-failures").id
            for name, (role, _, _) in DEMO_USERS.items():  # made here without a password: no test logs in
                if get_user(s, name) is None:               # as them, and argon2 costs ~0.1-0.7 s a hash
                    create_user(s, name, role)
            s.commit()
        seed_annotations(engine, tax_pk, n_assigned=n, n_simulated=n, seed=2)


#: the parameters of an agreement that bootstraps for seconds on `load_demo(engine, 80)`
SLOW_AGREEMENT = {"level": "agent", "n_boot": 10_000, "seed": 3, "confidence": 0.95, "taxonomy": None,
                  "family": None, "annotators": None, "include_judges": False, "study": None}
