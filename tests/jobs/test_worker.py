"""Real workers (`a2annotate worker` processes) on a SQLite queue file, on SQLite and PostgreSQL:
a REST import answered 202 and finished by a worker; a worker killed with kill -9 mid-import
leaves whole runs only and the job is picked up by the next worker; a CPU budget stops an import.
The Redis broker is tested in test_redis.py (it needs the machine's Redis)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlmodel import Session

from app.auth.service import create_token, get_user
from app.core.config import get_settings
from app.demo.generator import generate_runs
from app.jobs.models import Job
from app.runs.models import Event, Run
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


def corpus(n: int) -> tuple[bytes, dict[str, int]]:
    runs = [d.run for d in generate_runs(n, seed=5)]
    return ("\n".join(json.dumps(r) for r in runs) + "\n").encode(), {r["run_id"]: len(r["events"]) for r in runs}


def wait_job(client: TestClient, url: str, until, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(url).json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"job never got there: {job}"
        time.sleep(0.1)


def stored_events(engine) -> dict[str, int]:
    with Session(engine) as s:
        rows = s.execute(select(Run.run_id, func.count(Event.id)).join(Event, Event.run_pk == Run.id)
                         .group_by(Run.run_id)).all()
    return dict(rows)


def post_import(api: TestClient, body: bytes, **headers: str):
    return api.post("/api/v1/imports", content=body, headers={"Content-Type": "application/x-ndjson", **headers})


def test_import_answers_202_and_a_worker_finishes_it(api, workers, engine):
    body, expected = corpus(30)
    r = post_import(api, body, Prefer="respond-async")
    assert r.status_code == 202, r.text
    location = r.headers["location"]
    assert r.json()["job"]["state"] == "queued"
    workers.start()
    job = wait_job(api, location, lambda j: j["state"] in ("done", "failed"))
    assert job["state"] == "done", job
    assert job["result"]["imported"] == 30 and job["result"]["rejected"] == 0
    assert stored_events(engine) == expected


def test_kill_9_mid_import_leaves_whole_runs_and_the_job_is_picked_up(api, workers, engine):
    body, expected = corpus(1500)
    r = post_import(api, body, Prefer="respond-async")
    location = r.headers["location"]
    first = workers.start()
    wait_job(api, location, lambda j: j["state"] == "running" and j["progress"]["done"] > 0)
    workers.kill9(first)
    part = stored_events(engine)
    assert 0 < len(part) < len(expected)
    assert all(part[rid] == expected[rid] for rid in part)  # every stored run is whole
    with Session(engine) as s:
        assert s.get(Job, location.rsplit("/", 1)[1]).state == "running"  # nobody knows yet
    workers.start()  # notices the stale job (JOB_STALE_SECONDS=2) and starts it again
    job = wait_job(api, location, lambda j: j["state"] in ("done", "failed"))
    assert job["state"] == "done" and job["attempts"] == 2, job
    assert job["result"]["imported"] + job["result"]["unchanged"] == len(expected)
    assert job["result"]["unchanged"] >= len(part)
    assert stored_events(engine) == expected
    again = post_import(api, body, Prefer="respond-async")
    job2 = wait_job(api, again.headers["location"], lambda j: j["state"] in ("done", "failed"))
    assert (job2["result"]["imported"], job2["result"]["unchanged"]) == (0, len(expected))


def test_cpu_budget_stops_an_import_and_keeps_whole_runs(api, workers, engine):
    body, expected = corpus(3000)
    r = post_import(api, body, Prefer="respond-async")
    workers.start(JOB_CPU_SECONDS="1")
    job = wait_job(api, r.headers["location"], lambda j: j["state"] in ("done", "failed"))
    assert job["state"] == "failed" and "CPU budget of 1 s" in job["error"], job
    part = stored_events(engine)
    assert len(part) < len(expected)
    assert all(part[rid] == expected[rid] for rid in part)
    assert Counter(part.values()) <= Counter(expected.values())
