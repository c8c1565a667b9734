"""Real workers (`a2annotate worker` processes) on a SQLite queue file, on SQLite and PostgreSQL:
a REST import answered 202 and finished by a worker; a worker killed with kill -9 mid-import,
mid-bootstrap and mid-export: the database holds whole runs and no half result, the job is
picked up by the next worker and its re-run gives the same result; a CPU budget stops an import.
The Redis broker is tested in test_redis.py (it needs the machine's Redis)."""
from __future__ import annotations

import functools
import json
import time
from collections import Counter

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlmodel import Session

from app.core.config import get_settings
from app.demo.generator import generate_runs
from app.jobs.models import Job
from app.runs.models import Event, Run


@functools.lru_cache(maxsize=4)
def corpus(n: int) -> tuple[bytes, dict[str, int]]:
    """The JSON Lines body of `n` demo runs and each run's event count (made once per process:
    3,000 runs cost 3.4 CPU-s, and each test runs on both databases)."""
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


def test_a_worker_process_refreshes_a_stale_agreement(jobs_env, workers, engine):
    """The stored agreement goes stale on a label save; the `result` job is run by a real worker
    process (its own engine), and the app then serves the refreshed result without computing."""
    from app.annotations.service import save_annotation
    from app.auth.service import create_token, get_user
    from app.jobs.service import wait_for
    from app.main import create_app
    from app.results.service import COMPUTATIONS
    from app.taxonomies.service import latest
    from tests.agreement_db import _hand

    with Session(engine) as s:
        _hand.build(s)
        tok = create_token(s, get_user(s, "rev"))
        s.commit()
    api = TestClient(create_app(engine))
    api.headers["Authorization"] = f"Bearer {tok}"
    params = {"n_boot": 10, "seed": 1}
    first = api.get("/api/v1/agreement", params=params).json()
    with Session(engine) as s:
        run = s.execute(select(Run).where(Run.run_id == "r2")).scalar_one()
        save_annotation(s, get_user(s, "b"), run, latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        s.commit()
    stale = api.get("/api/v1/agreement", params=params).json()
    assert stale["stale"] is True and stale["computed_at"] == first["computed_at"]
    n = COMPUTATIONS["agreement"]
    workers.start()
    job = wait_for(engine, stale["recompute_job"], 60)
    assert job.state == "done", job.error
    fresh = api.get("/api/v1/agreement", params=params).json()
    assert fresh["stale"] is False and fresh["computed_at"] != first["computed_at"]
    assert fresh["modes"] != first["modes"]
    assert COMPUTATIONS["agreement"] == n  # computed in the worker, not in this process


def wait_row(engine, job_id: str, until, workers=None, timeout: float = 120.0) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        with Session(engine) as s:
            job = s.get(Job, job_id)
        if until(job):
            return job
        assert time.monotonic() < deadline, (f"job never got there: {job.state} {job.progress_done} {job.error}\n"
                                             + (workers.logs() if workers else ""))
        time.sleep(0.05)


def test_kill_9_mid_bootstrap_stores_nothing_and_the_rerun_gives_the_same_result(jobs_env, workers, engine):
    """The agreement's bootstrap (a `result` job) is killed with its worker; nothing half-computed is
    stored, the next worker starts it again, and what it stores equals the same computation done
    here in the test process (same seed, same intervals)."""
    from app.jobs import service as jobs
    from app.results.models import StoredResult
    from app.results.service import _kinds, result_key
    from tests.jobs.conftest import SLOW_AGREEMENT, load_demo

    load_demo(engine, 80)
    with Session(engine) as s:
        job_id = jobs.submit(s, "result", {"kind": "agreement", "params": SLOW_AGREEMENT}, None).id
    first = workers.start()
    wait_row(engine, job_id, lambda j: j.state == "running" and j.progress_done > 0, workers)
    workers.kill9(first)
    with Session(engine) as s:
        assert s.get(Job, job_id).state == "running"  # nobody knows yet
        assert s.execute(select(StoredResult)).scalar() is None  # no half result
    workers.start()  # notices the stale job (JOB_STALE_SECONDS=2) and starts it again
    job = wait_row(engine, job_id, lambda j: j.state in ("done", "failed", "cancelled"), workers, timeout=180)
    assert job.state == "done" and job.attempts == 2, job.error
    with Session(engine) as s:
        stored = s.execute(select(StoredResult).where(StoredResult.key == result_key("agreement", SLOW_AGREEMENT))
                           ).scalar_one()
        here = json.loads(json.dumps(_kinds()["agreement"](s, SLOW_AGREEMENT)))
    assert stored.payload == here and stored.data_version == job.result["data_version"]
    assert '"ci": [' in json.dumps(here)  # bootstrap intervals are there to compare


def _zip_tables(path) -> dict[str, list]:
    import io
    import zipfile

    import pyarrow.parquet as pq

    with zipfile.ZipFile(path) as z:
        return {name: pq.read_table(io.BytesIO(z.read(name))).to_pylist() for name in sorted(z.namelist())
                if name.endswith(".parquet")}


def test_kill_9_mid_export_and_the_rerun_makes_the_same_file(api, workers, engine, tmp_path):
    """The Hugging Face export job is killed with its worker; the next worker starts it again in its
    emptied folder and the zip holds exactly the tables an export made here holds."""
    from app.exports.hf import hf_zip
    from app.exports.service import ExportOptions
    from tests.jobs.conftest import load_demo

    load_demo(engine, 600, labels=False)
    r = api.get("/api/v1/exports/hf.zip", headers={"Prefer": "respond-async"})
    assert r.status_code == 202, r.text
    job_id = r.headers["location"].rsplit("/", 1)[1]
    first = workers.start()
    wait_row(engine, job_id, lambda j: j.state == "running", workers)
    workers.kill9(first)
    with Session(engine) as s:
        killed = s.get(Job, job_id)
    assert killed.state == "running", "the export ended before the kill: give it more runs"
    workers.start()
    job = wait_row(engine, job_id, lambda j: j.state in ("done", "failed", "cancelled"), workers, timeout=180)
    assert job.state == "done" and job.attempts == 2, job.error
    got = api.get(f"/api/v1/jobs/{job_id}/file")
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    (tmp_path / "job.zip").write_bytes(got.content)
    here = hf_zip(engine, ExportOptions(threshold=get_settings().success_threshold, strip_demo_truth=True),
                  work_dir=tmp_path / "here")
    tables = _zip_tables(tmp_path / "job.zip")
    assert tables == _zip_tables(here) and len(tables["data/runs/train-00000-of-00001.parquet"]) == 600
