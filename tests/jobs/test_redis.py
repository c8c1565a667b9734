"""The Redis broker, for workers on several machines: needs the machine's Redis on
127.0.0.1:6379 (`.ci/run` checks it is up; A2A_TEST_REDIS_URL points elsewhere). Each test uses a
queue name of its own (JOBS_QUEUE_NAME), so parallel test sessions never take each other's jobs."""
from __future__ import annotations

import os
import secrets

import pytest
import redis

from app.core.config import get_settings
from tests.jobs.conftest import Workers
from tests.jobs.test_worker import corpus, post_import, stored_events, wait_job

REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_env(jobs_env, monkeypatch):
    name = f"a2annotate-test-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(REDIS_URL)
    client.ping()  # a clear failure when Redis is not running
    monkeypatch.setenv("JOBS_BROKER", REDIS_URL)
    monkeypatch.setenv("JOBS_QUEUE_NAME", name)
    get_settings.cache_clear()
    from app.jobs.queue import get_huey

    key = get_huey().storage.queue_key  # huey keeps only the name's letters and digits
    yield dict(os.environ, QUEUE_KEY=key)
    client.delete(key)
    get_settings.cache_clear()


def test_two_workers_on_redis_share_the_imports(redis_env, api, engine, tmp_path):
    workers = Workers(redis_env, tmp_path)
    try:
        body, expected = corpus(20)
        locations = []
        for _ in range(4):  # four imports of the same runs: one imports them, the others find them unchanged
            r = post_import(api, body, Prefer="respond-async")
            assert r.status_code == 202
            locations.append(r.headers["location"])
        with redis.Redis.from_url(REDIS_URL) as client:  # the four wait in Redis, in this test's queue
            assert client.llen(redis_env["QUEUE_KEY"]) == 4
        workers.start()
        workers.start()
        jobs = [wait_job(api, loc, lambda j: j["state"] in ("done", "failed")) for loc in locations]
        assert all(j["state"] == "done" for j in jobs), jobs
        assert sum(j["result"]["imported"] for j in jobs) == len(expected)
        assert sum(j["result"]["unchanged"] for j in jobs) == 3 * len(expected)
        assert stored_events(engine) == expected
        assert len({j["id"] for j in jobs}) == 4
    finally:
        workers.stop_all()
