"""Application settings, read from the environment (and an optional `.env` file).

Every setting can be given as an environment variable of the same name in upper case, e.g.
`DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/a2annotate`.
"""
from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field
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
    #: Largest accepted upload (POST /api/v1/imports, /api/v1/annotations/import), in bytes; counted
    #: while the body is streamed to a temporary file, refused (413) the moment it is passed.
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
    #: Largest body of any other request (forms, JSON bodies), in bytes; counted while it arrives.
    max_request_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    #: Background jobs (app/jobs): where the queue lives. Empty: a SQLite file beside the database
    #: (`<db dir>/a2annotate-jobs.db`, or the working folder for PostgreSQL) that workers on this
    #: machine share; `redis://host:6379/0` for workers on several machines; `sqlite:///PATH` for
    #: another file; `immediate` runs each job at once in the process that enqueues it (tests).
    jobs_broker: str = ""
    #: The queue's name on the broker: instances that share one Redis need names of their own.
    jobs_queue_name: str = Field("a2annotate", min_length=1, max_length=100)
    #: `a2annotate serve` starts one worker process beside the server unless this is false (then run
    #: `a2annotate worker` yourself, on any machine that reaches the database and the broker).
    jobs_embedded_worker: bool = True
    #: CPU seconds a job may spend before it is stopped and marked failed.
    job_cpu_seconds: float = Field(600.0, gt=0)
    #: Wall-clock seconds a job may run before it is stopped and marked failed.
    job_wall_seconds: float = Field(3600.0, gt=0)
    #: Times a job is started again after a transient failure or after its worker died.
    job_retries: int = Field(2, ge=0)
    #: A running job whose worker has not reported for this many seconds lost its worker: it is
    #: started again (or failed once out of retries) by the next worker that looks.
    job_stale_seconds: float = Field(60.0, gt=0)
    #: POST /api/v1/imports waits this long for its import job before answering 202 with the job.
    import_wait_seconds: float = Field(30.0, ge=0)
    #: GET /api/v1/exports/hf.zip waits this long for its export job before answering 202 with the job.
    export_wait_seconds: float = Field(30.0, ge=0)
    #: POST /api/v1/detectors/run waits this long for its detect job before answering 202 with the job.
    detect_wait_seconds: float = Field(30.0, ge=0)
    #: Stored results (agreement, reports; app/results): a first request with nothing stored
    #: computes inline when the data hold at most this many runs + labels, else enqueues a job.
    results_inline_rows: int = Field(50_000, ge=0)
    #: ... and waits this long for that job before answering 202 with its Location.
    results_wait_seconds: float = Field(10.0, ge=0)
    #: Input limits, enforced while parsing (app/ingest/limits.py, app/ingest/safejson.py); a breach
    #: rejects the run, line or file with an error naming file, line and field (4xx on the API).
    #: Deepest nesting of arrays/objects in one run, line or document (at most 500).
    max_json_depth: int = Field(64, ge=1, le=500)
    #: Longest JSON string, in bytes as written.
    max_string_bytes: int = Field(10 * 1024 * 1024, ge=1)
    #: Most digits of one JSON integer (at most 4300, Python's own limit).
    max_int_digits: int = Field(1000, ge=1, le=4300)
    #: Most events in one run.
    max_events_per_run: int = Field(50_000, ge=1)
    #: Longest record, in bytes: a line of JSON Lines, an element of a JSON array or a one-run JSON file;
    #: a longer one is rejected without being held in memory.
    max_record_bytes: int = Field(256 * 1024 * 1024, ge=1)
    #: Bytes unpacked from one zip upload/file, nested zips included (counted while decompressing).
    max_zip_bytes: int = Field(2 << 30, ge=1)
    #: Members (files and folders) of one zip, nested zips included.
    max_zip_members: int = Field(10_000, ge=1)
    #: Levels of zips inside zips (0: a zip may not hold zips).
    max_zip_nesting: int = Field(1, ge=0)
    #: Seconds an upload may pause between two chunks of its body before it is refused (408).
    upload_idle_timeout: float = 30.0
    #: Seconds a whole upload body may take to arrive (408 after that).
    upload_total_timeout: float = 600.0
    #: Folder for upload bodies while they are read (emptied when the server starts); default
    #: `a2annotate-uploads` in the system temporary folder.
    upload_dir: Path | None = None
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
