"""Background jobs: what was asked, by whom, how far it got, and what came of it."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow

#: a job's states; done, failed and cancelled are final
STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL = ("done", "failed", "cancelled")


class Job(SQLModel, table=True):
    __tablename__ = "job"
    id: str = Field(primary_key=True, max_length=32)
    #: what runs: a kind registered in app.jobs.handlers (``import``, ``export``, ``detect``, ...)
    kind: str = Field(max_length=40, index=True)
    state: str = Field(default="queued", max_length=20, index=True)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    user_id: int | None = Field(default=None, foreign_key="user_account.id", index=True, ondelete="SET NULL")
    progress_done: int = 0
    progress_total: int | None = None
    result: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    error: str | None = Field(default=None, sa_column=Column(Text))
    #: times the job was started (a retry, or a pick-up after its worker died, starts it again)
    attempts: int = 0
    cancel_requested: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    #: refreshed while a worker runs the job; a running job whose heartbeat is stale lost its worker
    heartbeat_at: datetime | None = None
    #: the worker running it: host and process id
    worker: str | None = Field(default=None, max_length=200)
