"""Concurrent edits of one annotation (issue 13, items 8-10), on SQLite and PostgreSQL.

- a stale save (a version older than the stored one) is answered 409 with the current
  annotation and overwrites nothing (lost update);
- concurrent first saves never answer 500 (the first save is an upsert);
- `time_ms` is added in the database, so concurrent saves lose no time;
- the request's transaction is committed before the answer is sent (a reader on another
  connection sees the change as soon as the 200 arrives).
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Annotation
from app.auth.service import create_token
from app.main import create_app
from tests.annotations.factories import make_run, make_user
from tests.api.clients import bearer

LABEL = {"mode": "DD3", "agent": "buyer_agent", "evidence": [2]}


@pytest.fixture
def api(engine):
    with Session(engine) as s:
        make_run(s, "r1")
        alice = make_user(s, "alice", password=None)
        token = bearer(create_token(s, alice))
        s.commit()
    return TestClient(create_app(engine)), token


def _save(client, headers, **body):
    return client.post("/api/v1/annotations", json={"run_id": "r1", **body}, headers=headers)


def test_stale_save_gets_409_with_current_and_writes_nothing(api, engine):
    client, t = api
    first = _save(client, t, labels=[LABEL], version=0)
    assert first.status_code == 200, first.text
    assert first.json()["version"] == 1
    # tab A and tab B both loaded version 1; B saves first
    b = _save(client, t, labels=[dict(LABEL, mode="CF1")], note="from tab B", version=1)
    assert b.status_code == 200 and b.json()["version"] == 2
    a = _save(client, t, labels=[dict(LABEL, mode="VF1")], note="from tab A", version=1)
    assert a.status_code == 409, a.text
    body = a.json()
    assert "changed elsewhere" in body["detail"]
    assert body["current"]["version"] == 2 and body["current"]["note"] == "from tab B"
    assert [lb["mode"] for lb in body["current"]["labels"]] == ["CF1"]
    mine = client.get("/api/v1/annotations/mine", params={"run_id": "r1"}, headers=t).json()
    assert mine["note"] == "from tab B" and mine["version"] == 2 and [lb["mode"] for lb in mine["labels"]] == ["CF1"]
    # overwrite on purpose: resend with the current version
    a2 = _save(client, t, labels=[dict(LABEL, mode="VF1")], note="from tab A", version=body["current"]["version"])
    assert a2.status_code == 200 and a2.json()["version"] == 3 and a2.json()["note"] == "from tab A"


def test_first_save_with_version_0_when_one_exists_is_409(api):
    client, t = api
    assert _save(client, t, labels=[LABEL], version=0).status_code == 200
    res = _save(client, t, labels=[], note="other tab", version=0)
    assert res.status_code == 409 and res.json()["current"]["version"] == 1


def test_concurrent_stale_saves_exactly_one_wins(api, engine):
    """Eight tabs that all read version 1 save at once: one 200, seven 409, never a 500."""
    client, t = api
    assert _save(client, t, labels=[LABEL], version=0).status_code == 200
    barrier = threading.Barrier(8)

    def go(i):
        barrier.wait()
        return _save(client, t, labels=[LABEL], note=f"tab {i}", version=1)

    with ThreadPoolExecutor(8) as pool:
        codes = sorted(r.status_code for r in pool.map(go, range(8)))
    assert codes == [200] + [409] * 7
    with Session(engine) as s:
        assert s.exec(select(Annotation.version)).all() == [2]


@pytest.mark.parametrize("version", [None, 0])
def test_concurrent_first_saves_never_500(api, engine, version):
    """Two tabs / a double submit creating the same annotation at once (item 9)."""
    client, t = api
    n = 8
    barrier = threading.Barrier(n)

    def go(i):
        barrier.wait()
        return _save(client, t, labels=[LABEL], note=f"tab {i}", version=version)

    with ThreadPoolExecutor(n) as pool:
        codes = [r.status_code for r in pool.map(go, range(n))]
    assert 500 not in codes and 503 not in codes, codes
    if version is None:
        assert codes == [200] * n
    else:
        assert sorted(codes) == [200] + [409] * (n - 1)
    with Session(engine) as s:
        assert len(s.exec(select(Annotation)).all()) == 1


def test_concurrent_time_ms_is_not_lost(api, engine):
    """20 concurrent saves of 10,000 ms each add up to 200,000 ms (item 10)."""
    client, t = api
    assert _save(client, t, labels=[LABEL], time_ms=0).status_code == 200
    n = 20
    barrier = threading.Barrier(n)

    def go(_):
        barrier.wait()
        return _save(client, t, labels=[LABEL], time_ms=10_000)

    with ThreadPoolExecutor(n) as pool:
        codes = [r.status_code for r in pool.map(go, range(n))]
    assert codes == [200] * n
    with Session(engine) as s:
        ann = s.exec(select(Annotation)).one()
        assert ann.time_ms == n * 10_000
        assert ann.version == n + 1


def test_committed_before_the_response(api, engine, monkeypatch):
    """Against a real server: the 200 arrives only once the change is committed, so a reader on
    another connection right after it sees the change (item 10). The commit is slowed down so a
    response sent before it (the old behaviour) would be caught every time."""
    import httpx
    from sqlalchemy import event

    from tests.e2e.live import LiveServer

    _, t = api
    original = Session.commit

    def slow_commit(self):
        if self.info.get("wrote"):
            time.sleep(0.3)
        return original(self)

    def mark(state):
        if state.is_insert or state.is_update or state.is_delete:
            state.session.info["wrote"] = True

    event.listen(Session, "do_orm_execute", mark)
    monkeypatch.setattr(Session, "commit", slow_commit)
    try:
        with LiveServer(engine) as url, httpx.Client(base_url=url, timeout=30) as http:
            for i in range(3):
                res = http.post("/api/v1/annotations", headers=t,
                                json={"run_id": "r1", "labels": [LABEL], "note": f"n{i}", "time_ms": 1})
                assert res.status_code == 200, res.text
                with engine.connect() as conn:
                    note = conn.exec_driver_sql("SELECT note FROM annotation").scalar()
                assert note == f"n{i}"
    finally:
        event.remove(Session, "do_orm_execute", mark)


def test_failed_commit_is_reported(api, engine, monkeypatch):
    """A commit the database refuses answers an error, not 200."""
    from sqlalchemy.exc import OperationalError

    client, t = api
    original = Session.commit

    def failing_commit(self):
        if self.new or self.dirty or self.deleted or self.info.get("wrote"):
            raise OperationalError("COMMIT", {}, Exception("disk I/O error"))
        return original(self)

    from sqlalchemy import event

    def mark(session, flush_context):
        session.info["wrote"] = True

    # any session that executed an INSERT/UPDATE fails to commit
    def after_exec(orm_execute_state):
        if orm_execute_state.is_insert or orm_execute_state.is_update:
            orm_execute_state.session.info["wrote"] = True

    event.listen(Session, "do_orm_execute", after_exec)
    monkeypatch.setattr(Session, "commit", failing_commit)
    try:
        res = _save(client, t, labels=[LABEL])
    finally:
        event.remove(Session, "do_orm_execute", after_exec)
    assert res.status_code == 503, res.text
    assert "not saved" in res.json()["detail"]
    monkeypatch.undo()
    with Session(engine) as s:
        assert s.exec(select(Annotation)).all() == []
