"""The job's own page (`/jobs/{id}`: state, progress bar, warnings, result link, cancel) and the
retention of job files (JOB_FILE_RETENTION_HOURS: swept by workers, 410 Gone once expired)."""
from __future__ import annotations

import os
import re
import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token
from app.core.config import get_settings
from app.core.scratch import job_dir, upload_root
from app.jobs import service
from app.jobs.models import Job
from app.runs.models import utcnow


@pytest.fixture
def files_env(tmp_path, monkeypatch):
    monkeypatch.setenv("UPLOAD_DIR", str(tmp_path / "uploads"))
    monkeypatch.setenv("JOB_FILE_RETENTION_HOURS", "1")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _file_job(s: Session, user_id: int | None, *, state: str = "done", ended_ago: timedelta | None = None) -> str:
    job = service.create_job(s, "export_mad", {"annotator": "x", "taxonomy": None}, user_id)
    folder = job_dir(job.id)
    path = folder / "MAD_full_dataset.json"
    path.write_text("[]")
    job.params = {**job.params, "folder": str(folder)}
    job.state = state
    if state in ("done", "failed", "cancelled"):
        job.finished_at = utcnow() - (ended_ago or timedelta(0))
        job.result = {"file": str(path), "filename": path.name, "media_type": "application/json", "size": 2}
    s.add(job)
    s.commit()
    return job.id


def test_the_sweep_removes_expired_job_files_only(engine, files_env):
    with Session(engine) as s:
        old = _file_job(s, None, ended_ago=timedelta(hours=2))
        fresh = _file_job(s, None, ended_ago=timedelta(minutes=10))
        running = _file_job(s, None, state="running")
    orphan_old, orphan_new = job_dir("0" * 32), job_dir("1" * 32)  # folders of jobs the database does not know
    two_hours_ago = time.time() - 7200
    os.utime(orphan_old, (two_hours_ago, two_hours_ago))
    removed = service.sweep_job_files(engine)
    assert sorted(removed) == sorted([old, orphan_old.name])
    assert not job_dir_exists(old) and not orphan_old.exists()
    assert job_dir_exists(fresh) and job_dir_exists(running) and orphan_new.exists()
    assert service.sweep_job_files(engine) == []  # nothing more to remove


def job_dir_exists(job_id: str) -> bool:
    return (upload_root() / "jobs" / job_id).is_dir()


def test_an_expired_file_answers_410_gone_with_the_reason(engine, files_env):
    from app.main import create_app
    from tests.web.helpers import user

    with Session(engine) as s:
        admin = user(s, "ada", role="admin")
        s.commit()
        tok = create_token(s, admin)
        expired = _file_job(s, admin.id, ended_ago=timedelta(hours=3))
        fresh = _file_job(s, admin.id, ended_ago=timedelta(minutes=1))
        gone = _file_job(s, admin.id)
        s.commit()
    (upload_root() / "jobs" / gone / "MAD_full_dataset.json").unlink()
    api = TestClient(create_app(engine))
    api.headers["Authorization"] = f"Bearer {tok}"
    r = api.get(f"/api/v1/jobs/{expired}/file")
    assert r.status_code == 410 and "has expired" in r.json()["detail"]
    assert "JOB_FILE_RETENTION_HOURS" in r.json()["detail"] and "1 hours" in r.json()["detail"]
    assert not job_dir_exists(expired)  # removed at once
    r = api.get(f"/api/v1/jobs/{fresh}/file")
    assert r.status_code == 200 and r.text == "[]"
    r = api.get(f"/api/v1/jobs/{gone}/file")
    assert r.status_code == 410 and "is gone" in r.json()["detail"]


def test_the_job_page_shows_state_progress_warnings_and_cancels(engine, files_env):
    from app.main import create_app
    from tests.web.helpers import login, user

    with Session(engine) as s:
        me = user(s, "pat", role="annotator")
        other = user(s, "quinn", role="annotator")
        s.commit()
        running = service.create_job(s, "import", {"path": "/z", "filename": "c.jsonl", "folder": None}, me.id)
        running.state, running.progress_done, running.progress_total = "running", 3, 10
        done = service.create_job(s, "import", {"path": "/y", "filename": "b.jsonl", "folder": None}, me.id)
        done.state, done.finished_at = "done", utcnow()
        done.result = {"imported": 4, "unchanged": 0, "rejected": 1, "warnings": ["run r9: no events"],
                       "errors": [{"file": "b.jsonl", "line": 7, "error": "not JSON"}]}
        queued = service.create_job(s, "import", {"path": "/x", "filename": "a.jsonl", "folder": None}, me.id)
        theirs = service.create_job(s, "import", {"path": "/w", "filename": "d.jsonl", "folder": None}, other.id)
        s.add_all([running, done])
        s.commit()
        running, done, queued, theirs = running.id, done.id, queued.id, theirs.id
    client = TestClient(create_app(engine))
    login(client, "pat")
    page = client.get(f"/jobs/{running}")
    assert page.status_code == 200 and '<progress value="3" max="10">' in page.text
    assert 'http-equiv="refresh"' in page.text and 'id="btn-cancel-job"' in page.text
    page = client.get(f"/jobs/{done}")
    assert 'class="job-done">done' in page.text and 'id="result-imported">4<' in page.text
    assert "run r9: no events" in page.text and "file b.jsonl, line 7: not JSON" in page.text
    assert 'href="/runs"' in page.text and 'http-equiv="refresh"' not in page.text
    assert 'id="btn-cancel-job"' not in page.text  # finished: nothing to cancel
    assert client.get(f"/jobs/{theirs}").status_code == 404  # not theirs to see
    assert f'href="/jobs/{done}"' in client.get("/jobs").text  # the list links to the job's page
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get(f"/jobs/{queued}").text).group(1)
    r = client.post(f"/jobs/{queued}/cancel", data={"csrf_token": token, "back": "job"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/jobs/{queued}"
    assert 'class="job-cancelled">cancelled' in client.get(f"/jobs/{queued}").text
    with Session(engine) as s:
        assert s.get(Job, queued).state == "cancelled"
