"""The job service with the immediate broker (jobs run where they are sent), on SQLite and
PostgreSQL: states, progress, cancel, budgets, retries, a dead worker's job, and the REST routes."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from app.auth.service import create_token, get_user
from app.core.config import get_settings
from app.jobs import handlers, service
from app.jobs.models import Job
from app.runs.models import Run, utcnow
from tests.annotations.factories import make_user


@pytest.fixture
def kinds():
    """Register test handlers; removed afterwards."""
    added = []

    def add(kind, fn, cleanup=None):
        handlers.HANDLERS[kind] = handlers.Handler(fn, cleanup, kind)
        added.append(kind)

    yield add
    for k in added:
        handlers.HANDLERS.pop(k, None)


@pytest.fixture
def settings_env(monkeypatch):
    def set_(**values):
        for k, v in values.items():
            monkeypatch.setenv(k.upper(), str(v))
        get_settings.cache_clear()

    yield set_
    get_settings.cache_clear()


def job_row(engine, job_id) -> Job:
    with Session(engine) as s:
        return s.get(Job, job_id)


def test_a_job_runs_and_stores_its_result_and_progress(engine, kinds):
    seen = {}

    def run(ctx):
        for i in range(3):
            ctx.progress(i + 1, 3)
        seen["params"] = ctx.params
        return {"sum": ctx.params["a"] + ctx.params["b"]}

    kinds("add", run)
    with Session(engine) as s:
        job = service.submit(s, "add", {"a": 2, "b": 3}, None)
    assert job.state == "done" and job.result == {"sum": 5} and job.attempts == 1
    assert seen["params"] == {"a": 2, "b": 3}
    assert job.finished_at is not None and job.started_at is not None
    with Session(engine) as s, pytest.raises(service.JobError, match="unknown job kind"):
        service.create_job(s, "nope", {}, None)


def test_cancel_queued_and_running(engine, kinds):
    cleaned = []
    with Session(engine) as s:
        queued = service.create_job(s, "import", {"path": "/nonexistent", "filename": "x", "folder": None}, None)
        done = service.request_cancel(s, queued.id)
        assert done.state == "cancelled"
        with pytest.raises(service.JobError, match="already cancelled"):
            service.request_cancel(s, queued.id)

    def loop(ctx):
        with Session(ctx.engine) as s2:  # the cancel arrives from elsewhere while the job runs
            s2.execute(Job.__table__.update().where(Job.id == ctx.job_id).values(cancel_requested=True))
            s2.commit()
        for i in range(10_000):
            ctx.progress(i)
            time.sleep(0.01)
        return "never"

    kinds("loop", loop, cleanup=lambda p: cleaned.append(p["tag"]))
    with Session(engine) as s:
        job = service.submit(s, "loop", {"tag": "t1"}, None)
    assert job.state == "cancelled" and job.error == "cancelled while it ran"
    assert job.progress_done < 10_000 and cleaned == ["t1"]


def test_cpu_and_wall_budgets_stop_a_job(engine, kinds, settings_env):
    def burn(ctx):
        x = 0
        while True:
            for i in range(10_000):
                x += i * i
            ctx.check()

    def sleep(ctx):
        while True:
            time.sleep(0.05)
            ctx.check()

    kinds("burn", burn)
    kinds("sleep", sleep)
    settings_env(job_cpu_seconds=0.5, job_wall_seconds=60)
    t0 = time.monotonic()
    with Session(engine) as s:
        job = service.submit(s, "burn", {}, None)
    assert job.state == "failed" and "CPU budget of 0.5 s" in job.error and "JOB_CPU_SECONDS" in job.error
    assert time.monotonic() - t0 < 10
    settings_env(job_cpu_seconds=60, job_wall_seconds=0.4)
    with Session(engine) as s:
        job = service.submit(s, "sleep", {}, None)
    assert job.state == "failed" and "JOB_WALL_SECONDS" in job.error


def test_transient_failures_are_retried_then_fail(engine, kinds, settings_env):
    calls = []

    def flaky(ctx):
        calls.append(1)
        if len(calls) < 2:
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        return "ok"

    def broken(ctx):
        raise OperationalError("SELECT 1", {}, Exception("database is locked"))

    def bug(ctx):
        raise KeyError("oops")

    kinds("flaky", flaky)
    kinds("broken", broken)
    kinds("bug", bug)
    settings_env(job_retries=2)
    with Session(engine) as s:
        assert service.submit(s, "flaky", {}, None).state == "done"
        assert len(calls) == 2
        b = service.submit(s, "broken", {}, None)
        assert b.state == "failed" and b.attempts == 3  # the first try and two retries
        g = service.submit(s, "bug", {}, None)
        assert g.state == "failed" and g.attempts == 1 and g.error.startswith("KeyError")


def test_a_job_whose_worker_died_is_started_again_or_failed(engine, kinds, settings_env):
    runs = []
    kinds("again", lambda ctx: runs.append(ctx.job_id) or "ran")
    settings_env(job_stale_seconds=5, job_retries=1)
    with Session(engine) as s:
        fresh = service.create_job(s, "again", {}, None)
        stale = service.create_job(s, "again", {}, None)
        dead = service.create_job(s, "again", {}, None)
        old = utcnow() - timedelta(seconds=60)
        for job, attempts, beat in ((fresh, 1, utcnow()), (stale, 1, old), (dead, 2, old)):
            job.state, job.attempts, job.heartbeat_at, job.worker = "running", attempts, beat, "gone:1"
            s.add(job)
        s.commit()
        ids = (fresh.id, stale.id, dead.id)
    assert service.reap_stale(engine) == [ids[1]]
    assert runs == [ids[1]]
    assert job_row(engine, ids[0]).state == "running"
    assert job_row(engine, ids[1]).state == "done" and job_row(engine, ids[1]).attempts == 2
    d = job_row(engine, ids[2])
    assert d.state == "failed" and "out of retries" in d.error


def _auth(engine, name):
    with Session(engine) as s:
        tok = create_token(s, get_user(s, name))
        s.commit()
    return {"Authorization": f"Bearer {tok}"}


def test_rest_import_through_a_job_and_who_sees_it(engine):
    from app.main import create_app
    from tests.annotations.factories import raw_run

    with Session(engine) as s:
        make_user(s, "rev", role="reviewer", password=None)
        make_user(s, "boss", role="admin", password=None)
        make_user(s, "ann", password=None)
        make_user(s, "ann2", password=None)
        s.commit()
    client = TestClient(create_app(engine))
    rev, boss, ann = _auth(engine, "rev"), _auth(engine, "boss"), _auth(engine, "ann")
    body = [raw_run(f"j{i}") for i in range(3)]
    r = client.post("/api/v1/imports", json=body, headers=rev)
    assert r.status_code == 200, r.text
    assert r.json()["imported"] == 3
    job_url = r.headers["content-location"]
    j = client.get(job_url, headers=rev).json()
    assert j["state"] == "done" and j["kind"] == "import" and j["result"]["imported"] == 3
    with Session(engine) as s:
        assert len(s.execute(select(Run)).all()) == 3
        job = s.get(Job, j["id"])
        from pathlib import Path
        assert not Path(job.params["folder"]).exists()  # the upload is removed once the job is final
    # an annotator sees neither the job nor the list entry; an admin sees and lists it
    assert client.get(job_url, headers=ann).status_code == 404
    assert client.get("/api/v1/jobs", headers=ann).json() == []
    assert [x["id"] for x in client.get("/api/v1/jobs", headers=boss).json()] == [j["id"]]
    assert client.post(f"{job_url}/cancel", headers=rev).status_code == 409  # already done
    assert client.get("/api/v1/jobs/nope", headers=boss).status_code == 404
    # a job of an annotator's own: they see and cancel it; others' owners cannot cancel it
    with Session(engine) as s:
        mine = service.create_job(s, "import", {"path": "/x", "filename": "x", "folder": None},
                                  get_user(s, "ann").id).id
    assert client.get(f"/api/v1/jobs/{mine}", headers=ann).status_code == 200
    assert client.post(f"/api/v1/jobs/{mine}/cancel", headers=rev).status_code == 403
    c = client.post(f"/api/v1/jobs/{mine}/cancel", headers=ann)
    assert c.status_code == 200 and c.json()["state"] == "cancelled"


def test_jobs_page_lists_progress_and_cancels(engine, kinds):
    import re

    from app.main import create_app
    from tests.web.helpers import login, user

    with Session(engine) as s:
        me = user(s, "pat", role="annotator")
        other = user(s, "quinn", role="annotator")
        s.commit()
        mine = service.create_job(s, "import", {"path": "/x", "filename": "a.jsonl", "folder": None}, me.id).id
        theirs = service.create_job(s, "import", {"path": "/y", "filename": "b.jsonl", "folder": None}, other.id).id
        running = service.create_job(s, "import", {"path": "/z", "filename": "c.jsonl", "folder": None}, me.id)
        running.state, running.progress_done, running.progress_total = "running", 3, 10
        s.add(running)
        s.commit()
        running = running.id
    client = TestClient(create_app(engine))
    login(client, "pat")
    page = client.get("/jobs")
    assert page.status_code == 200
    assert mine[:12] in page.text and running[:12] in page.text and theirs[:12] not in page.text
    assert '<progress value="3" max="10">' in page.text
    assert 'http-equiv="refresh"' in page.text  # refreshes while a job is queued or running
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    r = client.post(f"/jobs/{mine}/cancel", data={"csrf_token": token}, follow_redirects=False)
    assert r.status_code == 303 and job_row(engine, mine).state == "cancelled"
    assert client.post(f"/jobs/{theirs}/cancel", data={"csrf_token": token}).status_code == 404
    assert client.post(f"/jobs/{running}/cancel", data={}).status_code in (400, 403)  # no CSRF token
    assert job_row(engine, running).cancel_requested is False
