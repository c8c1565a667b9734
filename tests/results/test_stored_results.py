"""Agreement and reports are stored in the database by (kind, parameters, data version) and
shared by every app process: computed by one, served by the other without recomputing; a data
change marks them stale and a recompute job (kind `result`) refreshes them. Both databases."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlmodel import Session

from app.annotations.service import save_annotation
from app.auth.service import create_token, get_user
from app.core.config import get_settings
from app.core.db import make_engine
from app.jobs.models import Job
from app.jobs.service import execute
from app.results.models import StoredResult
from app.results.service import COMPUTATIONS, data_version
from app.runs.models import Run
from app.taxonomies.service import latest
from tests.agreement_db import _hand

PARAMS = {"n_boot": 20, "seed": 1}


def _cf1(body):
    return next(r for r in body["modes"] if r["mode"] == "CF1")["fleiss_kappa"]["value"]


@pytest.fixture
def two_apps(engine):
    """Two apps on the same database, each with an engine of its own (as two processes have)."""
    from app.main import create_app

    other = make_engine(engine.url.render_as_string(hide_password=False))
    with Session(engine) as s:
        _hand.build(s)
        tok = create_token(s, get_user(s, "rev"))
        s.commit()
    yield TestClient(create_app(engine)), TestClient(create_app(other)), {"Authorization": f"Bearer {tok}"}
    other.dispose()


@pytest.fixture
def queue_without_worker(tmp_path, monkeypatch):
    """A real (SQLite) queue that no worker reads: jobs stay queued until the test runs them."""
    monkeypatch.setenv("JOBS_BROKER", f"sqlite:///{tmp_path / 'jobs.db'}")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _b_marks_cf1_on_r2(engine):
    with Session(engine) as s:
        run = s.exec(text("SELECT id FROM run WHERE run_id = 'r2'")).one()[0]
        save_annotation(s, get_user(s, "b"), s.get(Run, run), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        s.commit()


def test_computed_by_one_app_is_served_by_the_other(two_apps, engine):
    one, two, rev = two_apps
    n0 = COMPUTATIONS["agreement"]
    first = one.get("/api/v1/agreement", params=PARAMS, headers=rev)
    assert first.status_code == 200, first.text
    body = first.json()
    assert COMPUTATIONS["agreement"] == n0 + 1
    assert abs(_cf1(body) - 0.625) < 1e-12  # the hand-worked value (tests/agreement_db/_hand.py)
    assert body["stale"] is False and body["recompute_job"] is None and body["computed_at"]
    assert int(first.headers["Age"]) >= 0

    second = two.get("/api/v1/agreement", params=PARAMS, headers=rev)
    assert second.status_code == 200
    assert second.json() == body  # the stored payload, computed_at included
    assert COMPUTATIONS["agreement"] == n0 + 1  # not computed again
    two.get("/api/v1/agreement", params={**PARAMS, "seed": 2}, headers=rev)
    assert COMPUTATIONS["agreement"] == n0 + 2  # other parameters: another result
    with Session(engine) as s:
        assert s.exec(text("SELECT count(*) FROM stored_result WHERE kind = 'agreement'")).one()[0] == 2


def test_reports_are_shared_too(two_apps):
    one, two, rev = two_apps
    for path, kind in (("/api/v1/reports/outcomes", "report_outcomes"),
                       ("/api/v1/reports/blind-spots", "report_blind_spots"),
                       ("/api/v1/reports/crossplay", "report_crossplay"),
                       ("/api/v1/agreement/gold", "agreement_gold"),
                       ("/api/v1/agreement/judges", "agreement_judges")):
        n0 = COMPUTATIONS[kind]
        a = one.get(path, headers=rev)
        assert a.status_code == 200, (path, a.text)
        b = two.get(path, headers=rev)
        assert b.json() == a.json() and COMPUTATIONS[kind] == n0 + 1, path
    fam = one.get("/api/v1/reports/outcomes", params={"by": "family"}, headers=rev).json()
    # principal-runs: r1..r3 commerce, r4 travel, two principals (buyer, seller) each
    assert {r["family"]: r["n"] for r in fam["rows"]} == {"commerce": 6, "travel": 2}


def test_a_change_serves_the_stale_result_and_a_job_refreshes_it(two_apps, engine, queue_without_worker):
    one, two, rev = two_apps
    first = one.get("/api/v1/agreement", params=PARAMS, headers=rev).json()
    n = COMPUTATIONS["agreement"]

    _b_marks_cf1_on_r2(engine)
    stale = two.get("/api/v1/agreement", params=PARAMS, headers=rev)
    assert stale.status_code == 200
    body = stale.json()
    assert body["stale"] is True and body["recompute_job"]
    assert _cf1(body) == _cf1(first) and body["computed_at"] == first["computed_at"]
    assert COMPUTATIONS["agreement"] == n  # nothing computed in the request
    job_id = body["recompute_job"]
    # asked again (by either app) while the job waits: the same job, no second one
    assert one.get("/api/v1/agreement", params=PARAMS, headers=rev).json()["recompute_job"] == job_id
    with Session(engine) as s:
        job = s.get(Job, job_id)
        assert job.kind == "result" and job.state == "queued"
        assert s.exec(text("SELECT count(*) FROM job WHERE kind = 'result'")).one()[0] == 1
    seen = one.get(f"/api/v1/jobs/{job_id}", headers=rev)
    assert seen.status_code == 200 and seen.json()["state"] == "queued"

    execute(job_id, engine)  # what a worker does with it
    with Session(engine) as s:
        assert s.get(Job, job_id).state == "done"
    assert COMPUTATIONS["agreement"] == n + 1
    fresh = two.get("/api/v1/agreement", params=PARAMS, headers=rev).json()
    assert fresh["stale"] is False and fresh["recompute_job"] is None
    assert _cf1(fresh) != _cf1(first) and fresh["computed_at"] != first["computed_at"]
    assert one.get("/api/v1/agreement", params=PARAMS, headers=rev).json() == fresh
    assert COMPUTATIONS["agreement"] == n + 1


def test_large_first_request_answers_202_with_the_job(two_apps, engine, queue_without_worker, monkeypatch):
    one, two, rev = two_apps
    monkeypatch.setenv("RESULTS_INLINE_ROWS", "0")
    monkeypatch.setenv("RESULTS_WAIT_SECONDS", "0")
    get_settings.cache_clear()
    n = COMPUTATIONS["report_outcomes"]
    r = one.get("/api/v1/reports/outcomes", headers=rev)
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    assert r.headers["Location"] == f"/api/v1/jobs/{job_id}"
    assert two.get("/api/v1/reports/outcomes", headers=rev).status_code == 202  # the same job, not another
    with Session(engine) as s:
        assert s.exec(text("SELECT count(*) FROM job WHERE kind = 'result'")).one()[0] == 1
    assert COMPUTATIONS["report_outcomes"] == n
    execute(job_id, engine)
    done = two.get("/api/v1/reports/outcomes", headers=rev)
    assert done.status_code == 200 and done.json()["stale"] is False and done.json()["rows"]
    assert COMPUTATIONS["report_outcomes"] == n + 1


def test_bad_parameters_are_422_and_store_nothing(two_apps, engine):
    one, _, rev = two_apps
    r = one.get("/api/v1/agreement", params={"taxonomy": "nope@9"}, headers=rev)
    assert r.status_code == 422 and "taxonomy" in r.json()["detail"]
    with Session(engine) as s:
        assert s.exec(text("SELECT count(*) FROM stored_result WHERE payload IS NOT NULL")).one()[0] == 0


def test_an_unknown_query_parameter_is_refused_and_stores_nothing(two_apps, engine):
    """A parameter the route does not take (a misspelt filter) is named, never answered with (and
    stored as) the unfiltered result."""
    one, _, rev = two_apps
    assert one.get("/api/v1/agreement", params=PARAMS, headers=rev).status_code == 200
    r = one.get("/api/v1/agreement", params={**PARAMS, "familly": "commerce"}, headers=rev)
    assert r.status_code == 422 and r.json()["detail"].startswith("familly: unknown query parameter")
    with Session(engine) as s:
        rows = s.exec(text("SELECT params FROM stored_result WHERE kind = 'agreement'")).all()
        assert len(rows) == 1


def test_data_version_is_the_same_in_every_process_and_sees_edits_in_place(engine):
    other = make_engine(engine.url.render_as_string(hide_password=False))
    try:
        with Session(engine) as s:
            _hand.build(s)
            s.commit()
            v0 = data_version(s)
        with Session(other) as s:
            assert data_version(s) == v0
        with other.begin() as c:  # an edit in place: no new id, same counts
            c.execute(text("UPDATE user_account SET kind = 'judge' WHERE username = 'c'"))
        with Session(engine) as s:
            v1 = data_version(s)
            assert v1 != v0
        _b_marks_cf1_on_r2(other)
        with Session(engine) as s:
            assert data_version(s) != v1
            assert s.exec(text("SELECT count(*) FROM stored_result")).one()[0] == 0
            assert StoredResult.__tablename__ == "stored_result"
    finally:
        other.dispose()


def test_two_requests_enqueuing_at_once_take_turns(two_apps, engine, queue_without_worker, monkeypatch):
    """Two processes asking for the same missing result at the same moment (both read the data
    version, then both enqueue): neither fails with "database is locked" on SQLite, and they end up
    with one live recompute job between them."""
    import threading

    from app.results import service as results

    one, two, rev = two_apps
    monkeypatch.setenv("RESULTS_INLINE_ROWS", "0")
    monkeypatch.setenv("RESULTS_WAIT_SECONDS", "0")
    get_settings.cache_clear()
    both_read = threading.Barrier(2, timeout=20)
    current_version = results._current_version

    def read_then_wait(session):
        got = current_version(session)
        both_read.wait()  # each request holds its read of the data version when the other writes
        return got

    monkeypatch.setattr(results, "_current_version", read_then_wait)
    answers: dict[str, object] = {}

    def ask(name, client):
        answers[name] = client.get("/api/v1/reports/outcomes", headers=rev)

    threads = [threading.Thread(target=ask, args=(n, c)) for n, c in (("one", one), ("two", two))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [answers[n].status_code for n in ("one", "two")] == [202, 202], [answers[n].text for n in answers]
    ids = {answers[n].json()["job"]["id"] for n in ("one", "two")}
    with Session(engine) as s:
        live = s.exec(text("SELECT id FROM job WHERE kind = 'result' AND cancel_requested IS NOT TRUE")).all()
    assert len(live) == 1 and live[0][0] in ids
