"""Annotators of kind "source": dataset and judge annotators are not people.

Imported datasets' annotators (`whowhen:annotators`, `mad:annotator_N`) are kind "source" with the
dataset's name, judges kind "judge" with theirs: never assignable, never in user management,
shown as sources in Progress and Agreement. Migration 0014 classifies rows already there. Both
databases."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlmodel import Session, select

from app.auth.models import User
from app.core.migrate import alembic_config
from app.ingest.loader import import_paths
from app.main import create_app
from tests.annotations.factories import make_user
from tests.api.clients import login

DATA = Path(__file__).resolve().parents[1] / "datasets" / "data"


def _import(engine) -> None:
    summary = import_paths(engine, [str(DATA / "whowhen"), str(DATA / "MAD_human_labelled_dataset.json"),
                                    str(DATA / "MAD_full_dataset.json")])
    assert summary.imported >= 3 and not summary.errors


def test_imported_annotators_are_sources_not_people(engine):
    _import(engine)
    with Session(engine) as s:
        make_user(s, "root", "admin")
        make_user(s, "alice")
        s.commit()
        users = {u.username: u for u in s.exec(select(User)).all()}
        s.expunge_all()
    assert users["whowhen:annotators"].kind == "source" and users["whowhen:annotators"].source_name == "Who&When"
    assert users["mad:annotator_1"].kind == "source" and users["mad:annotator_1"].source_name == "MAD (MAST)"
    assert users["judge:mast-llm"].kind == "judge" and users["judge:mast-llm"].source_name == "mast-llm"

    client = TestClient(create_app(engine))
    csrf = login(client, "root")
    page = client.get("/admin").text
    # user management: one row (with Reset password / Deactivate forms) per person only
    people = page.split('id="judges"')[0]
    assert "alice" in people and "whowhen:annotators" not in people and "mad:annotator_1" not in people
    assert "judge:mast-llm" not in people
    sources = page.split('id="judges"')[1]
    assert "whowhen:annotators" in sources and "Who&amp;When" in sources and "dataset" in sources
    wid = users["whowhen:annotators"].id
    assert f"/admin/users/{users['alice'].id}/password" in page
    assert f"/admin/users/{wid}/password" not in page and f"/admin/users/{wid}/active" not in page
    # never assignable, by the API or the admin form
    for name in ("whowhen:annotators", "mad:annotator_2", "judge:mast-llm"):
        res = client.post("/api/v1/assignments", json={"annotators": [name], "k": 1, "seed": 1},
                          headers={"X-CSRF-Token": csrf})
        assert res.status_code == 422, res.text
        assert "not a person" in res.text
    # Progress: sources are listed as sources (with their dataset), never counted among the humans
    prog = client.get("/api/v1/progress?taxonomy=mast-draft-r2").json()
    kinds = {a["username"]: (a["kind"], a["source_name"]) for a in prog["annotators"]}
    assert kinds["mad:annotator_1"] == ("source", "MAD (MAST)")
    assert kinds["alice"] == ("human", None)
    html = client.get("/admin/progress?taxonomy=mast-draft-r2").text
    row = re.search(r"<tr><td>mad:annotator_1</td>.*?</tr>", html, re.S).group(0)
    assert ">source<" in row and "MAD (MAST)" in row and ">human<" not in row
    # Agreement: offered as a separate group of sources
    agree = client.get("/agreement?taxonomy=mast-draft-r2&n_boot=0").text
    people_box = agree.split('id="annotators-people"')[1].split("</fieldset>")[0]
    sources_box = agree.split('id="annotators-sources"')[1].split("</fieldset>")[0]
    assert "mad:annotator_1" not in people_box and "mad:annotator_1" in sources_box
    assert "MAD (MAST)" in sources_box


def test_login_is_refused_to_sources(engine):
    _import(engine)
    client = TestClient(create_app(engine))
    token = client.get("/login").text
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', token).group(1)
    res = client.post("/login", data={"username": "whowhen:annotators", "password": "anything-at-all",
                                      "csrf_token": csrf, "next": "/"}, follow_redirects=False)
    assert res.status_code == 401


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'mig.db'}"
        return
    from tests.conftest import _create_pg_database, _drop_pg_database

    name, url = _create_pg_database()
    try:
        yield url
    finally:
        _drop_pg_database(name)


def test_migration_0014_classifies_existing_rows(fresh_url):
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0013b")
    eng = create_engine(fresh_url)
    with eng.begin() as conn:
        for name, kind, pw in [("whowhen:annotators", "human", None), ("mad:annotator_1", "human", None),
                               ("alice", "human", "x"), ("judge:judge-l2", "judge", None),
                               ("detector:leak", "judge", None), ("legacy-dataset-rater", "human", None),
                               ("bob-no-password", "human", None)]:
            conn.execute(text("INSERT INTO user_account (username, role, kind, password_hash, is_active, created_at, "
                              "session_generation) VALUES (:u, 'annotator', :k, :p, true, CURRENT_TIMESTAMP, 0)"),
                         {"u": name, "k": kind, "p": pw})
        conn.execute(text("INSERT INTO scenario (id, family, extra) VALUES ('s', 'f', '{}')"))
        conn.execute(text("INSERT INTO run (run_id, scenario_id, status, extra, content_hash, n_events, imported_at) "
                          "VALUES ('r', 's', 'completed', '{}', 'h', 0, CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO taxonomy (key, version, name, definition, content_hash, created_at) "
                          "VALUES ('t', 1, 't', '{}', 'h', CURRENT_TIMESTAMP)"))
        for name in ("legacy-dataset-rater",):  # only imported (audit) annotations: a dataset's rater
            conn.execute(text(
                "INSERT INTO annotation (run_pk, user_id, taxonomy_pk, status, no_failure, origin, time_ms, "
                "started_at, updated_at, version) SELECT r.id, u.id, t.id, 'submitted', false, 'audit', 0, "
                "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1 FROM run r, user_account u, taxonomy t "
                "WHERE u.username = :u"), {"u": name})
    command.upgrade(cfg, "head")
    with eng.connect() as conn:
        got = {u: (k, sn) for u, k, sn in conn.execute(text("SELECT username, kind, source_name FROM user_account"))}
    eng.dispose()
    assert got["whowhen:annotators"] == ("source", "Who&When")
    assert got["mad:annotator_1"] == ("source", "MAD (MAST)")
    assert got["legacy-dataset-rater"] == ("source", "legacy-dataset-rater")
    assert got["judge:judge-l2"] == ("judge", "judge-l2")
    assert got["detector:leak"] == ("judge", "leak")
    assert got["alice"] == ("human", None)
    assert got["bob-no-password"] == ("human", None)  # a person not given a password yet stays a person
