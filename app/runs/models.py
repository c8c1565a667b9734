"""Tables for the canonical run record (see shared spec run-format.md).

Timestamps of runs and events are stored as the ISO-8601 text they arrived with, so that
canonical -> database -> canonical is lossless. Unknown fields of nested objects live in `extra`.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class Scenario(SQLModel, table=True):
    __tablename__ = "scenario"
    id: str = Field(primary_key=True, max_length=300)
    family: str = Field(index=True, max_length=100)
    alignment: str | None = Field(default=None, index=True, max_length=40)
    title: str | None = Field(default=None, sa_column=Column(Text))
    description: str | None = Field(default=None, sa_column=Column(Text))
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Run(SQLModel, table=True):
    __tablename__ = "run"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(max_length=300, sa_column_kwargs={"unique": True}, index=False)
    scenario_id: str = Field(foreign_key="scenario.id", index=True, max_length=300)
    status: str = Field(index=True, max_length=20)
    aggregate_score: float | None = None
    started_at: str | None = Field(default=None, max_length=64)
    ended_at: str | None = Field(default=None, max_length=64)
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    #: The run's own scenario object when it differs from the one stored under the same id.
    scenario_override: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    content_hash: str = Field(max_length=64)
    n_events: int = 0
    source: str | None = Field(default=None, sa_column=Column(Text))
    imported_at: datetime = Field(default_factory=utcnow)


class Principal(SQLModel, table=True):
    __tablename__ = "principal"
    __table_args__ = (UniqueConstraint("run_pk", "principal_id"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    position: int
    principal_id: str = Field(max_length=200)
    name: str | None = Field(default=None, sa_column=Column(Text))
    kind: str | None = Field(default=None, max_length=40)
    objective: str | None = Field(default=None, sa_column=Column(Text))
    constraints: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    success: bool | None = None
    score: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Agent(SQLModel, table=True):
    __tablename__ = "agent"
    __table_args__ = (UniqueConstraint("run_pk", "agent_id"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    position: int
    agent_id: str = Field(max_length=200)
    principal_id: str | None = Field(default=None, max_length=200)
    role: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, index=True, max_length=200)
    harness: str | None = Field(default=None, index=True, max_length=200)
    private_state: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Event(SQLModel, table=True):
    __tablename__ = "event"
    __table_args__ = (UniqueConstraint("run_pk", "seq"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", ondelete="CASCADE")
    seq: int
    ts: str | None = Field(default=None, max_length=64)
    kind: str = Field(max_length=40)
    actor: str = Field(max_length=200)
    recipients: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    visibility: str = Field(max_length=20)
    content: str | None = Field(default=None, sa_column=Column(Text))
    data: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    parent_seq: int | None = None
    hop: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Audit(SQLModel, table=True):
    __tablename__ = "audit"
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    position: int
    source: str = Field(max_length=200)
    level: str | None = Field(default=None, max_length=40)
    #: None for an attribution (agent and evidence, no mode)
    mode: str | None = Field(default=None, max_length=40)
    agent: str | None = Field(default=None, max_length=200)
    evidence: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    note: str | None = Field(default=None, sa_column=Column(Text))
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


Index("ix_run_scenario_status", Run.scenario_id, Run.status)


class Check(SQLModel, table=True):
    """A deterministic pass/fail check (L0/L1) shipped with a run; it names no failure mode."""

    __tablename__ = "check"
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    position: int
    source: str = Field(max_length=200)
    level: str | None = Field(default=None, max_length=40)
    check_id: str = Field(max_length=200)
    passed: bool | None = None
    agent: str | None = Field(default=None, max_length=200)
    evidence: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    detail: str | None = Field(default=None, sa_column=Column(Text))
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
