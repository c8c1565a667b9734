"""Tables of live capture: raw records as received, live run state, capture errors."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow


class CaptureRecord(SQLModel, table=True):
    """One received record: an OTLP span (key trace:span) or an A2A wire envelope (key: its id).

    `stream` groups records that are rebuilt together (OTLP: the trace id; A2A: the recorder's
    stream name); `run_key` is the run the record went into at the last rebuild."""

    __tablename__ = "capture_record"
    __table_args__ = (UniqueConstraint("source", "record_key"),)
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=20)
    stream: str = Field(max_length=300)
    record_key: str = Field(max_length=300)
    run_key: str | None = Field(default=None, max_length=300, index=True)
    ts: str | None = Field(default=None, max_length=64)
    payload: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    received_at: datetime = Field(default_factory=utcnow)


class LiveRun(SQLModel, table=True):
    """A run made by live capture: `state` is "recording" until idle or a terminal task state."""

    __tablename__ = "live_run"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(max_length=300, sa_column_kwargs={"unique": True})
    source: str = Field(max_length=20)
    stream: str | None = Field(default=None, max_length=300)
    state: str = Field(default="recording", max_length=20, index=True)
    final_reason: str | None = Field(default=None, max_length=200)
    first_seen: datetime = Field(default_factory=utcnow)
    last_seen: datetime = Field(default_factory=utcnow)
    n_records: int = 0
    sidecar: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class CaptureError(SQLModel, table=True):
    """Something captured that could not become (part of) a run, kept for the admin page."""

    __tablename__ = "capture_error"
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=20)
    stream: str | None = Field(default=None, max_length=300)
    at: datetime = Field(default_factory=utcnow)
    location: str | None = Field(default=None, sa_column=Column(Text))
    message: str = Field(sa_column=Column(Text, nullable=False))


Index("ix_capture_record_source_stream", CaptureRecord.source, CaptureRecord.stream)
