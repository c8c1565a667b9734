"""Sessions and tokens end (issue 13, item 14) and `serve` refuses a weak SECRET_KEY (item 3/14).

- logout, a password reset, a role change, a deactivation and "End sessions" end every session
  of the user (other browsers too);
- idle and absolute session lifetimes;
- API tokens: revoked (CLI, admin page) and expired tokens are refused; `last_used_at` is written
  at most once a minute.
"""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlmodel import Session, select

from app.auth.models import ApiToken
from app.auth.service import create_token, get_user, set_password
from app.core.config import get_settings
from app.main import create_app
from app.runs.models import utcnow
from tests.annotations.factories import make_user
from tests.api.clients import bearer, login


@pytest.fixture
def app(sqlite_engine):
    with Session(sqlite_engine) as s:
        make_user(s, "alice")
        make_user(s, "adam", role="admin")
        s.commit()
    return create_app(sqlite_engine)


def _logged_in(app, name):
    client = TestClient(app)
    login(client, name)
    assert client.get("/", follow_redirects=False).status_code == 200
    return client


def _ended(client) -> bool:
    res = client.get("/", follow_redirects=False)
    api = client.get("/api/v1/queue")
    return res.status_code == 303 and res.headers["location"].startswith("/login") and api.status_code == 401


def test_logout_ends_every_session_of_the_user(app):
    a, b, other = _logged_in(app, "alice"), _logged_in(app, "alice"), _logged_in(app, "adam")
    csrf = login.__globals__["page_csrf"](a, "/")
    assert a.post("/logout", data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert _ended(a) and _ended(b)
    assert not _ended(other)
    assert not _ended(_logged_in(app, "alice"))  # logging in again works


def test_a_copied_cookie_stops_working_after_logout(app):
    a = _logged_in(app, "alice")
    stolen = TestClient(app, cookies=dict(a.cookies))
    assert not _ended(stolen)
    csrf = login.__globals__["page_csrf"](a, "/")
    a.post("/logout", data={"csrf_token": csrf})
    assert _ended(stolen)


@pytest.mark.parametrize("change", ["password", "role", "deactivate", "end-sessions"])
def test_admin_changes_end_the_users_sessions(app, sqlite_engine, change):
    alice = _logged_in(app, "alice")
    admin = _logged_in(app, "adam")
    csrf = login.__globals__["page_csrf"](admin, "/admin")
    with Session(sqlite_engine) as s:
        uid = get_user(s, "alice").id
    path, data = {"password": (f"/admin/users/{uid}/password", {"password": "a new password 1"}),
                  "role": (f"/admin/users/{uid}/role", {"role": "reviewer"}),
                  "deactivate": (f"/admin/users/{uid}/active", {"active": "false"}),
                  "end-sessions": (f"/admin/users/{uid}/sessions", {})}[change]
    res = admin.post(path, data={**data, "csrf_token": csrf}, follow_redirects=False)
    assert res.status_code == 303
    assert _ended(alice)
    assert not _ended(admin)


def test_password_reset_from_the_cli_service_ends_sessions(app, sqlite_engine):
    alice = _logged_in(app, "alice")
    with Session(sqlite_engine) as s:
        set_password(s, get_user(s, "alice"), "another password")
        s.commit()
    assert _ended(alice)


def test_idle_and_absolute_lifetimes(app, monkeypatch):
    import app.auth.sessions as sessions

    s = app.state.settings
    start = time.time()
    clock = [start]
    monkeypatch.setattr(sessions.time, "time", lambda: clock[0])
    a = _logged_in(app, "alice")
    # used every (idle - 1 minute): stays alive until the absolute lifetime is reached
    step = s.session_idle_timeout - 120
    while clock[0] + step < start + s.session_max_age:
        clock[0] += step
        assert not _ended(a), clock[0] - start
    clock[0] = start + s.session_max_age + 1
    assert _ended(a)
    b = _logged_in(app, "alice")
    clock[0] += s.session_idle_timeout + 1  # unused for longer than the idle lifetime
    assert _ended(b)


def test_session_lifetimes_are_configurable(sqlite_engine, monkeypatch):
    import app.auth.sessions as sessions

    with Session(sqlite_engine) as s:
        make_user(s, "alice")
        s.commit()
    app = create_app(sqlite_engine, settings=get_settings().model_copy(update={"session_idle_timeout": 300}))
    clock = [time.time()]
    monkeypatch.setattr(sessions.time, "time", lambda: clock[0])
    a = _logged_in(app, "alice")
    clock[0] += 301
    assert _ended(a)


# --------------------------------------------------------------------------- tokens

def _token(engine, name="alice", **kw):
    with Session(engine) as s:
        tok = create_token(s, get_user(s, name), **kw)
        s.commit()
    return tok


def test_tokens_expire(app, sqlite_engine):
    client = TestClient(app)
    tok = _token(sqlite_engine, expires_days=1)
    assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 200
    with Session(sqlite_engine) as s:
        row = s.exec(select(ApiToken)).one()
        assert row.expires_at is not None
        row.expires_at = utcnow() - timedelta(seconds=1)
        s.add(row)
        s.commit()
    res = client.get("/api/v1/queue", headers=bearer(tok))
    assert res.status_code == 401 and "revoked" in res.json()["detail"]


def test_default_expiry_and_never(sqlite_engine, app):
    _token(sqlite_engine)
    _token(sqlite_engine, expires_days=0)
    with Session(sqlite_engine) as s:
        a, b = s.exec(select(ApiToken).order_by(ApiToken.id)).all()
        left = a.expires_at.replace(tzinfo=None) - utcnow().replace(tzinfo=None)
        assert timedelta(days=89) < left <= timedelta(days=90)
        assert b.expires_at is None


def _cli(engine, args, monkeypatch):
    from app.cli import cli

    monkeypatch.setattr("app.cli.users.checked_engine", lambda: engine)
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_cli_tokens_create_list_revoke(app, sqlite_engine, monkeypatch):
    client = TestClient(app)
    res = _cli(sqlite_engine, ["tokens", "create", "alice", "--expires-days", "7", "--label", "laptop"], monkeypatch)
    assert res.exit_code == 0, res.output
    tok = res.output.strip()
    other = _token(sqlite_engine)
    assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 200
    listed = _cli(sqlite_engine, ["tokens", "list", "--user", "alice"], monkeypatch).output
    assert tok[:8] in listed and "laptop" in listed and "active" in listed
    res = _cli(sqlite_engine, ["tokens", "revoke", tok], monkeypatch)
    assert res.exit_code == 0 and "revoked 1 token(s)" in res.output
    assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 401
    assert client.get("/api/v1/queue", headers=bearer(other)).status_code == 200
    assert "revoked" in _cli(sqlite_engine, ["tokens", "list"], monkeypatch).output
    res = _cli(sqlite_engine, ["tokens", "revoke", "--user", "alice"], monkeypatch)
    assert res.exit_code == 0 and "revoked 1 token(s)" in res.output
    assert client.get("/api/v1/queue", headers=bearer(other)).status_code == 401
    assert _cli(sqlite_engine, ["tokens", "revoke", "a2a_nope"], monkeypatch).exit_code == 1


def test_admin_page_revokes_a_token(app, sqlite_engine):
    tok = _token(sqlite_engine)
    client = TestClient(app)
    assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 200
    admin = _logged_in(app, "adam")
    page = admin.get("/admin/tokens")
    assert page.status_code == 200 and tok[:8] in page.text
    with Session(sqlite_engine) as s:
        tid = s.exec(select(ApiToken.id)).one()
    csrf = login.__globals__["page_csrf"](admin, "/admin/tokens")
    assert admin.post(f"/admin/tokens/{tid}/revoke", data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 401
    assert _logged_in(app, "alice").get("/admin/tokens").status_code == 403


def test_last_used_written_at_most_once_a_minute(app, sqlite_engine):
    tok = _token(sqlite_engine)
    client = TestClient(app)
    updates = []

    def count(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE API_TOKEN"):
            updates.append(statement)

    event.listen(sqlite_engine, "before_cursor_execute", count)
    try:
        for _ in range(6):
            assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 200
        assert len(updates) == 1
        with Session(sqlite_engine) as s:
            row = s.exec(select(ApiToken)).one()
            assert row.last_used_at is not None
            row.last_used_at = utcnow() - timedelta(seconds=61)
            s.add(row)
            s.commit()
        updates.clear()
        for _ in range(3):
            assert client.get("/api/v1/queue", headers=bearer(tok)).status_code == 200
        assert len(updates) == 1
    finally:
        event.remove(sqlite_engine, "before_cursor_execute", count)


# --------------------------------------------------------------------------- serve and SECRET_KEY

@pytest.mark.parametrize("env, host, refused", [
    ({}, "0.0.0.0", "SECRET_KEY is not set"),
    ({"SECRET_KEY": "change-me"}, "0.0.0.0", "well-known value"),
    ({"SECRET_KEY": "short"}, "192.168.1.5", "shorter than 16"),
    ({}, "::", "SECRET_KEY is not set"),
])
def test_serve_refuses_weak_secret_beyond_loopback(env, host, refused, monkeypatch):
    import click

    from app.cli.serve import check_secret_key
    from app.core.config import Settings

    monkeypatch.delenv("SECRET_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(click.ClickException, match=refused) as info:
        check_secret_key(host, Settings(_env_file=None))
    assert "\n" not in info.value.message


@pytest.mark.parametrize("env, host", [({}, "127.0.0.1"), ({}, "localhost"), ({}, "::1"),
                                       ({"SECRET_KEY": "x" * 40}, "0.0.0.0")])
def test_serve_accepts_loopback_or_a_real_secret(env, host, monkeypatch):
    from app.cli.serve import check_secret_key
    from app.core.config import Settings

    monkeypatch.delenv("SECRET_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    check_secret_key(host, Settings(_env_file=None))


def test_serve_command_exits_with_one_line(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.db'}"
    r = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--host", "0.0.0.0", "--port", "1"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to serve on 0.0.0.0: SECRET_KEY is not set" in lines[0], r.stderr
