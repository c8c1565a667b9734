"""The password policy on every path that sets a password (issue 23, row 18): `users create`,
`users set-password`, the admin pages' new user and reset. "password" was accepted."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.password_policy import common_passwords, password_problem
from app.auth.service import AuthError, authenticate, create_user, get_user, set_password
from app.main import create_app
from tests.annotations.factories import make_user
from tests.api.clients import login, page_csrf
from tests.qa.test_cli_contract import run_cli

WEAK = ["password", "Password", "password123", "qwertyuiop", "12345678910", "iloveyou2", "aaaaaaaaaaaa",
        "dragon12"]


@pytest.mark.parametrize("pw", WEAK)
def test_common_and_guessable_passwords_are_refused(pw):
    assert password_problem(pw, "alice", min_length=8, min_score=2) is not None


@pytest.mark.parametrize("pw", ["correct horse battery", "s3cret-enough", "bob-demo", "tangerine-oboe-17"])
def test_reasonable_passwords_are_accepted(pw):
    assert password_problem(pw, "alice", min_length=8, min_score=2) is None


def test_the_list_is_the_packages_and_the_reasons_are_stated():
    assert len(common_passwords()) >= 25_000 and "dragon" in common_passwords()
    assert password_problem("short", min_length=8, min_score=2) == "password must have at least 8 characters"
    assert "most common passwords" in password_problem("dragon12", min_length=8, min_score=0)
    assert password_problem("Alice-Reyes", "alice-reyes", min_length=8, min_score=0) == "password must not be the user name"
    assert password_problem("x" * 2000, min_length=8, min_score=0).startswith("password must have at most")
    assert password_problem("zzzzzzzzzzz", min_length=8, min_score=2).startswith("password is too easy to guess")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_set_password_applies_the_policy_and_writes_nothing_on_refusal(engine):
    with Session(engine) as s:
        u = create_user(s, "pat", "annotator")
        with pytest.raises(AuthError, match="most common passwords"):
            set_password(s, u, "password")
        assert u.password_hash is None
        set_password(s, u, "tangerine-oboe-17")
        s.commit()
        assert authenticate(s, "pat", "tangerine-oboe-17") is not None


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('pw-cli') / 'cli.db'}"
    assert run_cli(["db", "upgrade"], url).returncode == 0
    return url


def test_cli_users_create_and_set_password_refuse_weak_passwords(cli_db):
    r = run_cli(["users", "create", "weak", "--role", "annotator", "--password-stdin"], cli_db, stdin="password\n")
    assert r.returncode == 1
    assert r.stderr.strip() == ("Error: password is one of the most common passwords (breached password lists); "
                                "choose another")
    r = run_cli(["users", "create", "strong", "--role", "annotator", "--password-stdin"], cli_db,
                stdin="tangerine-oboe-17\n")
    assert r.returncode == 0, r.stderr
    r = run_cli(["users", "set-password", "strong", "--password-stdin"], cli_db, stdin="qwerty123\n")
    assert r.returncode == 1 and "password" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli(["users", "list"], cli_db)
    assert "weak" not in r.stdout.split()  # nothing half written


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_admin_pages_refuse_weak_passwords(engine):
    with Session(engine) as s:
        make_user(s, "root", "admin")
        target = make_user(s, "carla")
        s.commit()
        target_id = target.id
    admin = TestClient(create_app(engine))
    login(admin, "root")
    token = page_csrf(admin, "/admin")
    res = admin.post("/admin/users", data={"username": "dan", "role": "annotator", "password": "password",
                                           "csrf_token": token})
    assert "Could not create user: password is one of the most common passwords" in res.text
    res = admin.post(f"/admin/users/{target_id}/password", data={"password": "12345678", "csrf_token": token})
    assert "Could not reset the password: password is one of the most common passwords" in res.text
    with Session(engine) as s:
        assert get_user(s, "dan") is None
