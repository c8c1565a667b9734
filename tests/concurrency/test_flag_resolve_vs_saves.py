"""SQLite: a reviewer resolving flags while annotators save (issue 23, row 11). Resolving read
first and then wrote in the same deferred transaction: when a save committed in between, SQLite
refused the upgrade at once ("database is locked", 16 of 30 resolves answered 503). Resolution
now takes its turn for the write lock like saves (BEGIN IMMEDIATE, busy timeout)."""
from __future__ import annotations

import threading

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token
from app.core.config import get_settings
from app.core.db import make_engine
from app.core.migrate import upgrade
from app.main import create_app
from app.taxonomies.service import sync_builtin
from tests.annotations.factories import make_run, make_user
from tests.api.clients import bearer

N_FLAGS = 30


def test_resolving_flags_while_annotators_save_never_answers_locked(tmp_path):
    url = f"sqlite:///{tmp_path / 'flags.db'}"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        sync_builtin(s, get_settings().taxonomy_dir)
        for i in range(N_FLAGS):
            make_run(s, f"f{i}")
        make_run(s, "target")
        reviewer = bearer(create_token(s, make_user(s, "rev", "reviewer", password=None)))
        flagger = bearer(create_token(s, make_user(s, "flagger", password=None)))
        savers = [bearer(create_token(s, make_user(s, f"ann{k}", password=None))) for k in range(3)]
        s.commit()
    app = create_app(engine)
    with TestClient(app) as c:
        ids = []
        for i in range(N_FLAGS):
            r = c.post("/api/v1/flags", headers=flagger, json={"run_id": f"f{i}", "kind": "flag", "reason": "unclear"})
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
    stop = threading.Event()
    saves: list[int] = []

    def annotate(headers):
        with TestClient(app) as c:
            i = 0
            while not stop.is_set():
                r = c.post("/api/v1/annotations", headers=headers, json={
                    "run_id": "target", "time_ms": 1,
                    "labels": [{"mode": "CF1", "agent": "buyer_agent", "evidence": [i % 5]}]})
                saves.append(r.status_code)
                i += 1

    threads = [threading.Thread(target=annotate, args=(h,)) for h in savers]
    for t in threads:
        t.start()
    try:
        with TestClient(app) as c:
            resolves = [c.post(f"/api/v1/flags/{fid}/resolve", headers=reviewer) for fid in ids]
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert [r.status_code for r in resolves] == [200] * N_FLAGS, [r.text for r in resolves if r.status_code != 200][:3]
    assert len(saves) >= N_FLAGS and set(saves) == {200}, set(saves)
    with TestClient(app) as c:
        open_flags = c.get("/api/v1/flags", headers=reviewer).json()
    assert open_flags == []
    engine.dispose()
