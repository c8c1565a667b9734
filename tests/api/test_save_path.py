"""The annotation save path stays short: statements per `POST /api/v1/annotations` (counted
with an SQLAlchemy event), no read of every event of a long run, the answer built from what
was written equal to the annotation read back; and SQLite writers of one process take turns
on the engine's lock, which every way a transaction ends gives back."""
from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlmodel import Session

from app.annotations.models import Assignment
from app.auth.service import create_token, get_user
from app.core.db import session_scope, write_session
from app.main import create_app
from app.runs.service import get_run
from app.taxonomies.service import latest
from tests.annotations.factories import make_run, make_user
from tests.api.clients import bearer

#: statements of one save (token+user, taxonomy, run, referenced ids, locks and hints, the
#: upsert or compare-and-swap with RETURNING, delete labels, insert labels); BEGINs not counted
MAX_STATEMENTS = 8


@pytest.fixture
def api(engine):
    with Session(engine) as s:
        make_run(s, "long", n_events=400)
        alice = make_user(s, "alice", password=None)
        token = create_token(s, alice)
        s.commit()
    return TestClient(create_app(engine)), bearer(token)


def _count(engine):
    statements: list[str] = []

    def note(conn, cursor, statement, parameters, context, executemany):  # noqa: ARG001
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA")):
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    return statements, lambda: event.remove(engine, "before_cursor_execute", note)


LABELS = [{"mode": "CF1", "agent": "buyer_agent", "principals": ["buyer"], "evidence": [3, 397], "confidence": 0.5},
          {"mode": "dd3", "agent": "seller_agent", "evidence": [1], "note": "second"}]


def test_a_save_runs_few_statements_and_answers_what_it_wrote(api, engine):
    client, h = api
    statements, stop = _count(engine)
    try:
        versions = []
        for i, version in enumerate((0, 1, 2)):  # the first save (upsert) and two updates
            statements.clear()
            r = client.post("/api/v1/annotations", headers=h, json={
                "run_id": "long", "labels": LABELS[: i + 1], "version": version, "status": "draft",
                "note": f"save {i}", "time_ms": 700})
            assert r.status_code == 200, r.text
            assert len(statements) <= MAX_STATEMENTS, "\n".join(s.splitlines()[0] for s in statements)
            # evidence is checked with one lookup of the seqs named, not by reading all 400 events
            assert not any("FROM event" in s and " IN " not in s.upper() for s in statements), statements
            versions.append(r.json()["version"])
    finally:
        stop()
    assert versions == [1, 2, 3]
    body = r.json()
    mine = client.get("/api/v1/annotations/mine", params={"run_id": "long"}, headers=h).json()
    assert body == mine
    assert body["time_ms"] == 2100 and body["note"] == "save 2" and body["hints_on"] is False
    assert [lab["mode"] for lab in body["labels"]] == ["CF1", "DD3"]
    assert body["labels"][0]["evidence"] == [3, 397] and body["labels"][1]["agent"] == "seller_agent"


@pytest.mark.parametrize(("label", "field"), [
    ({"mode": "CF1", "agent": "buyer_agent", "evidence": [400]}, "labels[0].evidence[0]"),
    ({"mode": "CF1", "agent": "buyer_agent", "evidence": [2**40]}, "labels[0].evidence[0]"),
    ({"mode": "CF1", "agent": "nobody", "evidence": [1]}, "labels[0].agent"),
    ({"mode": "CF1", "agent": "buyer\x00agent", "evidence": [1]}, "labels[0].agent"),
    ({"mode": "CF1", "agent": "buyer_agent", "principals": ["seller", "x"], "evidence": [1]},
     "labels[0].principals[1]"),
])
def test_only_the_ids_named_are_looked_up_and_unknown_ones_are_refused(api, label, field):
    client, h = api
    r = client.post("/api/v1/annotations", headers=h, json={"run_id": "long", "labels": [label],
                                                            "status": "submitted"})
    assert r.status_code == 422 and r.json()["detail"].startswith(field + ":"), r.text


def test_hints_flag_is_written_with_the_save(api, engine):
    from app.detectors.service import set_hints

    client, h = api
    with Session(engine) as s:
        alice = get_user(s, "alice")
        run = get_run(s, "long")
        tax = latest(s, "a2-failures")
        # the run is in two of alice's batches (one per taxonomy): hints count if either has them
        s.add(Assignment(run_pk=run.id, user_id=alice.id, taxonomy_pk=tax.id, position=0, batch="plain"))
        s.add(Assignment(run_pk=run.id, user_id=alice.id, taxonomy_pk=latest(s, "mast").id, position=0,
                         batch="hinted"))
        s.commit()
    post = {"run_id": "long", "labels": [LABELS[0]]}
    assert client.post("/api/v1/annotations", headers=h, json=post).json()["hints_on"] is False
    with Session(engine) as s:
        set_hints(s, "hinted", True)
        s.commit()
    assert client.post("/api/v1/annotations", headers=h, json=post).json()["hints_on"] is True
    with Session(engine) as s:
        set_hints(s, "hinted", False)
        s.commit()
    body = client.post("/api/v1/annotations", headers=h, json=post).json()
    assert body["hints_on"] is True  # once on, it stays on
    assert client.get("/api/v1/annotations/mine", params={"run_id": "long"}, headers=h).json() == body


def test_sqlite_writers_take_turns_and_every_ending_gives_the_turn_back(tmp_path):
    from sqlalchemy import text

    from app.core.db import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'turns.db'}")  # the writer lock is SQLite's

    with session_scope(engine) as s:
        s.execute(text("CREATE TABLE IF NOT EXISTS turn_test (n INTEGER)"))
    # a write transaction that fails, one rolled back, one committed: each gives the turn back
    with pytest.raises(RuntimeError), session_scope(engine, write=True) as s:
        s.execute(text("INSERT INTO turn_test VALUES (1)"))
        raise RuntimeError("boom")
    with write_session(engine) as s:
        s.execute(text("INSERT INTO turn_test VALUES (2)"))
        s.rollback()
    with write_session(engine) as s:
        s.execute(text("INSERT INTO turn_test VALUES (3)"))
        s.commit()
    # 8 threads x 10 increments: all serialised, none lost, none waiting on a turn never given back
    errors: list[BaseException] = []

    def bump():
        try:
            for _ in range(10):
                with session_scope(engine, write=True) as s:
                    n = s.execute(text("SELECT count(*) FROM turn_test")).scalar()
                    s.execute(text("INSERT INTO turn_test VALUES (:n)"), {"n": n + 10})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t0 = time.monotonic()
    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and time.monotonic() - t0 < 20
    with session_scope(engine) as s:
        values = [r[0] for r in s.execute(text("SELECT n FROM turn_test ORDER BY rowid")).all()]
    engine.dispose()
    assert values[:1] == [3] and values[1:] == [n + 10 for n in range(1, 81)]  # each saw the one before

