"""Login (issue 13, item 13): throttling per account and per address with 429 + Retry-After,
the same time for unknown users as for real ones, and a bound on concurrent argon2 hashing."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.throttle import LoginThrottle
from app.core.config import get_settings
from app.main import create_app
from tests.annotations.factories import PASSWORD, make_user
from tests.api.clients import page_csrf


def _app(engine, **overrides):
    settings = get_settings().model_copy(update=overrides)
    return TestClient(create_app(engine, settings=settings))


def _login(client, username, password):
    return client.post("/login", data={"username": username, "password": password, "csrf_token": page_csrf(client),
                                       "next": "/"}, follow_redirects=False)


@pytest.fixture
def users(sqlite_engine):
    with Session(sqlite_engine) as s:
        make_user(s, "alice")
        make_user(s, "bob")
        s.commit()


def test_account_throttled_after_failures_even_with_the_right_password(sqlite_engine, users):
    client = _app(sqlite_engine, login_max_failures_per_account=5, login_max_failures_per_address=1000)
    for _ in range(5):
        assert _login(client, "alice", "wrong password").status_code == 401
    res = _login(client, "alice", PASSWORD)
    assert res.status_code == 429
    assert 0 < int(res.headers["Retry-After"]) <= 15 * 60
    assert "Too many failed logins" in res.text
    assert _login(client, "ALICE ", PASSWORD).status_code == 429  # same account however it is typed
    assert _login(client, "bob", PASSWORD).status_code == 303  # another account is not affected


def test_success_clears_the_account_failures(sqlite_engine, users):
    client = _app(sqlite_engine, login_max_failures_per_account=3, login_max_failures_per_address=1000)
    for _ in range(2):
        assert _login(client, "alice", "wrong password").status_code == 401
    assert _login(client, "alice", PASSWORD).status_code == 303
    for _ in range(2):
        assert _login(client, "alice", "wrong password").status_code == 401
    assert _login(client, "alice", PASSWORD).status_code == 303


def test_address_throttled_across_accounts(sqlite_engine, users):
    client = _app(sqlite_engine, login_max_failures_per_account=1000, login_max_failures_per_address=4)
    for name in ("alice", "bob", "alice", "bob"):
        assert _login(client, name, "guess").status_code == 401
    res = _login(client, "bob", PASSWORD)
    assert res.status_code == 429 and int(res.headers["Retry-After"]) > 0


def test_throttle_window_slides():
    now = [1000.0]
    t = LoginThrottle(3, 60, clock=lambda: now[0])
    for _ in range(3):
        assert t.retry_after("k") == 0
        t.fail("k")
        now[0] += 10
    assert t.retry_after("k") == 30  # the first failure (at 1000) leaves the window at 1060
    now[0] = 1060.5
    assert t.retry_after("k") == 0


def test_unknown_user_takes_as_long_as_a_real_one(sqlite_engine):
    """The unknown-user path verifies against a dummy hash (default argon2 parameters)."""
    from app.auth.models import User
    from app.auth.security import dummy_hash
    from app.auth.service import authenticate

    with Session(sqlite_engine) as s:
        s.add(User(username="real", role="annotator", password_hash=PasswordHasher().hash(PASSWORD)))
        s.commit()
        dummy_hash()  # made once per process, not counted

        def timed(name):
            t0 = time.perf_counter()
            assert authenticate(s, name, "not the password") is None
            return time.perf_counter() - t0

        real = min(timed("real") for _ in range(2))
        ghost = min(timed("ghost-user") for _ in range(2))
    assert ghost > 0.6 * real, (ghost, real)


def test_concurrent_logins_hash_at_most_n_at_once(sqlite_engine, users, monkeypatch):
    import app.auth.service as auth_service

    active, peak, lock = [0], [0], threading.Lock()
    real_verify = auth_service.verify_password

    def counting_verify(h, p):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            time.sleep(0.05)
            return real_verify(h, p)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(auth_service, "verify_password", counting_verify)
    client = _app(sqlite_engine, max_concurrent_password_hashes=2, login_max_failures_per_address=1000,
                  login_max_failures_per_account=1000)

    def go(i):
        return client.post("/login", data={"username": "alice", "password": "x", "csrf_token": csrf},
                           follow_redirects=False).status_code

    with client:  # one event loop for every request, as in the server
        csrf = page_csrf(client)
        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(go, range(12)))
    assert codes == [401] * 12
    assert peak[0] == 2


def test_too_many_waiting_logins_answer_503(sqlite_engine, users, monkeypatch):
    import app.auth.service as auth_service

    real_verify = auth_service.verify_password
    monkeypatch.setattr(auth_service, "verify_password", lambda h, p: (time.sleep(1.0), real_verify(h, p))[1])
    client = _app(sqlite_engine, max_concurrent_password_hashes=1, max_waiting_logins=2,
                  login_max_failures_per_address=1000, login_max_failures_per_account=1000)
    barrier = threading.Barrier(8)

    def go(i):
        barrier.wait()
        r = client.post("/login", data={"username": "alice", "password": "x", "csrf_token": csrf},
                        follow_redirects=False)
        return r.status_code, r.headers.get("Retry-After")

    with client:
        csrf = page_csrf(client)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(go, range(8)))
    codes = [c for c, _ in results]
    assert 503 in codes and 401 in codes and set(codes) <= {401, 503}, codes
    assert all(ra == "2" for c, ra in results if c == 503)

