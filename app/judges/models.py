"""Tables of the LLM judges: registered judge versions, judge runs, per-run results, calls, cache.

* ``judge_version``: one row per (name, version); the version is the content hash of everything
  in the judge file that can change an answer (see `app.judges.schema.version_of`).
* ``judge_run``: one launch of one judge version over a selection of runs, with its state and the
  sums of its calls (tokens, latency, cost).
* ``judge_result``: one judge version's verdict on one run at one run content hash, with the state
  the runner moves it through (queued, running, delayed, done, error). Unique per (version, run,
  content hash): a run already judged is skipped, a new version makes new rows beside the old.
* ``judge_call``: every request made (or answered from the cache) for a result.
* ``judge_cache``: answers keyed by the sha256 of the request (model, messages, parameters, sample).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow

RUN_STATES = ("queued", "running", "done", "error", "cancelled")
RESULT_STATES = ("queued", "running", "delayed", "done", "error")


class JudgeVersion(SQLModel, table=True):
    __tablename__ = "judge_version"
    __table_args__ = (UniqueConstraint("name", "version"),)
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=100, index=True)
    #: the first 16 hex digits of `content_hash`
    version: str = Field(max_length=16)
    content_hash: str = Field(max_length=64)
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    #: the normalised judge file (defaults filled in, built-in prompts written out)
    definition: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    #: the file as it was registered
    source: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)


class JudgeRun(SQLModel, table=True):
    __tablename__ = "judge_run"
    id: int | None = Field(default=None, primary_key=True)
    judge_version_id: int = Field(foreign_key="judge_version.id", index=True, ondelete="CASCADE")
    #: queued | running | done | error | cancelled
    state: str = Field(default="queued", max_length=20)
    #: what was asked for: {"run_ids", "batch", "limit"}
    selection: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    total: int = 0
    n_done: int = 0
    n_error: int = 0
    #: runs of the selection this version had already judged at the same content hash
    n_skipped: int = 0
    n_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    cost: float = 0.0
    #: tokens and cost the dry-run estimate gave before the run started
    estimate: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    cancel_requested: bool = False
    error: str | None = Field(default=None, sa_column=Column(Text))
    created_by: int | None = Field(default=None, foreign_key="user_account.id", ondelete="SET NULL")
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    #: the process working on it, `host:pid` (a dead process on this host means it was interrupted)
    worker: str | None = Field(default=None, max_length=300)
    #: refreshed by the runner while it works (a judge run whose heartbeat stopped was interrupted)
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None


class JudgeResult(SQLModel, table=True):
    __tablename__ = "judge_result"
    __table_args__ = (UniqueConstraint("judge_version_id", "run_pk", "run_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    judge_version_id: int = Field(foreign_key="judge_version.id", index=True, ondelete="CASCADE")
    #: the judge run that last worked on this result
    judge_run_id: int | None = Field(default=None, foreign_key="judge_run.id", index=True, ondelete="SET NULL")
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    #: the run's content hash when it was judged
    run_hash: str = Field(max_length=64)
    #: queued | running | delayed | done | error
    state: str = Field(default="queued", max_length=20)
    #: failure | no_failure (label strategies), attribution (attribution strategies), None until done
    verdict: str | None = Field(default=None, max_length=20)
    #: the merged, validated answer: {"labels": [...]} or {"agent", "step", ...}
    answer: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    #: what the validation dropped or the merge noticed, one sentence each
    problems: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    #: the model's last raw text when an answer could not be parsed (kept with the error)
    raw: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    #: trace windows the run was split into (1: the whole trace in one prompt)
    windows: int = 1
    #: an event had to be cut to fit the context (recorded, never silent)
    truncated: bool = False
    confidence: float | None = None
    n_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    cost: float = 0.0
    annotation_id: int | None = Field(default=None, foreign_key="annotation.id", ondelete="SET NULL")
    updated_at: datetime = Field(default_factory=utcnow)


class JudgeCall(SQLModel, table=True):
    __tablename__ = "judge_call"
    id: int | None = Field(default=None, primary_key=True)
    result_id: int = Field(foreign_key="judge_result.id", index=True, ondelete="CASCADE")
    judge_run_id: int | None = Field(default=None, foreign_key="judge_run.id", ondelete="SET NULL")
    position: int = 0
    #: sha256 of the request (the cache key)
    request_key: str = Field(max_length=64)
    cached: bool = False
    #: ok | parse_error | error
    status: str = Field(default="ok", max_length=20)
    #: HTTP attempts made (retries included)
    attempts: int = 1
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    cost: float = 0.0
    error: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)


class JudgeCache(SQLModel, table=True):
    __tablename__ = "judge_cache"
    key: str = Field(primary_key=True, max_length=64)
    content: str = Field(sa_column=Column(Text, nullable=False))
    tokens_in: int = 0
    tokens_out: int = 0
    created_at: datetime = Field(default_factory=utcnow)
