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
    #: Session cookie lifetime in seconds.
    session_max_age: int = 14 * 24 * 3600
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
    #: Run the detectors on every imported run (their labels: annotator `detector:<name>`). Off by
    #: default: imports stay as fast as the raw loader, and nothing is labelled that nobody asked for.
    detectors_on_import: bool = False
    #: User detectors besides the `a2annotate.detectors` entry points: comma-separated
    #: `module:attribute` or `/path/to/file.py:attribute` (see docs/detectors.md).
    detectors: str = ""
    #: Folder with the built-in taxonomy files.
    taxonomy_dir: Path = Path(__file__).resolve().parents[2] / "taxonomy"
    #: Live capture: a run that received nothing for this many seconds becomes final.
    capture_idle_seconds: float = 300.0
    #: Live capture: sidecar file (YAML/JSON: per agent principal, objective, constraints, model,
    #: harness, private_state) applied to runs arriving on POST /v1/traces.
    capture_sidecar: Path | None = None


@lru_cache
def get_settings() -> Settings:
    return Settings()
