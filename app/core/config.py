"""Application settings, read from the environment (and an optional `.env` file).

Every setting can be given as an environment variable of the same name in upper case, e.g.
`DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/a2annotate`.
"""
from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    #: SQLAlchemy URL. SQLite is the embedded default; PostgreSQL for teams.
    database_url: str = "sqlite:///./a2annotate.db"
    #: Signs session cookies and CSRF tokens. Set it in production; the default changes per process.
    secret_key: str = secrets.token_urlsafe(32)
    #: Session lifetime in seconds (absolute: counted from the login, however active the session).
    session_max_age: int = 14 * 24 * 3600
    #: A session unused for this many seconds ends (idle lifetime).
    session_idle_timeout: int = 24 * 3600
    #: Days an API token works for (`a2annotate tokens create --expires-days` overrides; 0: no expiry).
    token_expiry_days: int = 90
    #: Failed logins allowed per account within `login_window_seconds` before 429 (Retry-After).
    login_max_failures_per_account: int = 5
    #: Failed logins allowed per client address within `login_window_seconds` before 429.
    login_max_failures_per_address: int = 20
    #: The sliding window of the login throttle, in seconds.
    login_window_seconds: int = 15 * 60
    #: Password hashes (argon2, 64 MiB each) computed at once; further logins wait their turn.
    max_concurrent_password_hashes: int = 2
    #: Logins allowed to wait for a hashing slot; beyond that the login answers 503 (Retry-After).
    max_waiting_logins: int = 32
    #: SQLite: how long a writer waits for the write lock before "database is locked", in ms.
    sqlite_busy_timeout_ms: int = 30_000
    #: SQLite: longest time an import holds the write lock before committing, in ms.
    sqlite_max_write_ms: int = 250
    #: SQLite: pause after each such commit so waiting writers (annotators) get the lock, in ms.
    sqlite_writer_yield_ms: int = 40
    #: Mark the session cookie Secure (serve over HTTPS).
    cookie_secure: bool = False
    #: Largest accepted upload for POST /api/v1/imports, in bytes.
    max_upload_bytes: int = 512 * 1024 * 1024
    #: Runs inserted per batch by the loader.
    import_batch_size: int = 1000
    #: Largest page_size accepted by list endpoints.
    max_page_size: int = 500
    #: Aggregate/principal score at or above which an outcome counts as success.
    success_threshold: float = 0.5
    #: Default bootstrap resamples for agreement confidence intervals.
    bootstrap_resamples: int = 1000
    #: Folder with the built-in taxonomy files.
    taxonomy_dir: Path = Path(__file__).resolve().parents[2] / "taxonomy"


@lru_cache
def get_settings() -> Settings:
    return Settings()
