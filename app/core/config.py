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
    #: Proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed (uvicorn's meaning:
    #: comma-separated addresses or networks, e.g. `127.0.0.1,10.0.0.0/8`, or `*` for any peer).
    #: Empty (the default): the headers are ignored and a client is its connection's address, so a
    #: client cannot pick a new address per request to get past the per-address login throttle.
    forwarded_allow_ips: str = ""
    #: Shortest password accepted wherever one is set (CLI, admin pages); see app/auth/password_policy.py.
    password_min_length: int = Field(8, ge=1)
    #: Lowest zxcvbn strength score (0-4) accepted for a new password; 0 turns the score check off
    #: (a password among zxcvbn's 30,000 common ones is refused regardless).
    password_min_score: int = Field(2, ge=0, le=4)
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
    #: Hours a finished job's file (an export in UPLOAD_DIR/jobs/<id>) is kept for
    #: GET /api/v1/jobs/{id}/file; then workers remove it and the download answers 410 Gone.
    job_file_retention_hours: float = Field(168.0, gt=0)
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
    #: Input limits, enforced while parsing (app/ingest/safety/limits.py, app/ingest/safety/safejson.py); a breach
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
    #: Largest ratio of unpacked to compressed bytes of a zip member, checked while unpacking (past
    #: the first MiB): JSON compresses 5-20 times, a member of blank lines about 1,000 times.
    max_zip_ratio: int = Field(200, ge=1)
    #: Records one import may read: lines (blank and comment lines included), array elements,
    #: files; past it the whole import stops ("import stopped: ..."), runs stored before stay.
    max_import_records: int = Field(10_000_000, ge=1)
    #: CPU seconds one import may spend when it is not a background job (a REST upload); past them
    #: the import stops. The command line has no such limit.
    import_cpu_seconds: float = Field(300.0, gt=0)
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
    #: Live capture: a run of at most this many records is rebuilt at every batch that reaches it;
    #: a larger one once it grew by CAPTURE_REBUILD_GROWTH (a fraction) since its last build, and
    #: when it becomes final (linear cost for a long trace, not quadratic).
    capture_sync_rebuild_records: int = Field(2000, ge=0)
    capture_rebuild_growth: float = Field(0.25, ge=0)
    #: POST /v1/traces: largest body, in bytes, both as sent and unpacked (gzip); 413 beyond.
    otlp_max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    #: POST /v1/traces: most spans in one request (counted before any is converted); 413 beyond.
    otlp_max_spans_per_request: int = Field(20_000, ge=1)
    #: POST /v1/traces: CPU seconds one request may spend decoding and rebuilding runs; decoding
    #: past it is refused (413), runs not rebuilt by then are built with a later batch.
    otlp_cpu_seconds: float = Field(10.0, gt=0)
    #: POST /v1/traces: requests decoded at once (worker threads, off the event loop), and how
    #: many more may wait for one; beyond that 503 with Retry-After.
    otlp_workers: int = Field(2, ge=1)
    otlp_max_waiting: int = Field(16, ge=0)
    #: Recording proxy (a2annotate record): largest request or non-streamed response body, and
    #: longest SSE event, in bytes (413 / 502 beyond, nothing recorded).
    proxy_max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    #: Recording proxy: seconds to connect to / wait for the upstream agent's answer (504 beyond);
    #: seconds a stream from the upstream may stay silent.
    proxy_upstream_timeout: float = Field(60.0, gt=0)
    proxy_stream_idle_timeout: float = Field(300.0, gt=0)
    #: Recording proxy: seconds a client may take for its headers / between chunks of its body, and
    #: idle keep-alive connections are closed after; most connections at once (503 beyond).
    proxy_client_timeout: float = Field(15.0, gt=0)
    proxy_max_connections: int = Field(100, ge=1)


@lru_cache
def get_settings() -> Settings:
    return Settings()
