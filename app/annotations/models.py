"""Assignments, annotations (one annotator's labelling of one run), labels, gold labels."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow


class Assignment(SQLModel, table=True):
    __tablename__ = "assignment"
    __table_args__ = (UniqueConstraint("run_pk", "user_id", "taxonomy_pk"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    #: Order of the run in the annotator's queue.
    position: int = 0
    batch: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    #: the study the assignment was made in (None: made without a study)
    study_id: int | None = Field(default=None, foreign_key="study.id", index=True, ondelete="SET NULL")
    #: how the run was chosen: random | stratified | disagreement | uncertainty | flagged | all
    #: (None: made before sampling policies were recorded)
    policy: str | None = Field(default=None, max_length=20)
    #: the seed of the draw
    seed: int | None = None
    #: the probability that the run was drawn into this batch (n/N for a simple random sample,
    #: n_h/N_h in its stratum, 1 for all / flagged / disagreement / uncertainty picks)
    inclusion_prob: float | None = None
    #: the stratum the run was drawn from (stratified; None otherwise)
    stratum: str | None = Field(default=None, sa_column=Column(Text))


class Annotation(SQLModel, table=True):
    """One annotator's work on one run under one taxonomy version."""

    __tablename__ = "annotation"
    __table_args__ = (UniqueConstraint("run_pk", "user_id", "taxonomy_pk"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    taxonomy_pk: int = Field(foreign_key="taxonomy.id", index=True)
    #: draft | submitted
    status: str = Field(default="draft", max_length=20)
    #: explicit "no failure found" (an empty set is data, not a gap)
    no_failure: bool = False
    #: human | import | audit
    origin: str = Field(default="human", max_length=20)
    time_ms: int = 0
    note: str | None = Field(default=None, sa_column=Column(Text))
    started_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    submitted_at: datetime | None = None
    #: whether detector hints were shown to the annotator while labelling (None: not a human's labels)
    hints_on: bool | None = None
    #: the version of the program that made this annotation (detectors: `detector:<name>` version)
    source_version: str | None = Field(default=None, max_length=100)
    #: optimistic concurrency: bumped on every save; a save naming an older version gets 409
    version: int = Field(default=1, sa_column_kwargs={"server_default": "1"})


class Label(SQLModel, table=True):
    __tablename__ = "label"
    id: int | None = Field(default=None, primary_key=True)
    annotation_id: int = Field(foreign_key="annotation.id", index=True, ondelete="CASCADE")
    #: None for an attribution-only label (who and when, no mode; imported or judge labels only)
    mode: str | None = Field(default=None, max_length=40)
    agent: str = Field(max_length=200)
    principals: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    evidence: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    note: str | None = Field(default=None, sa_column=Column(Text))
    confidence: float | None = None
    time_ms: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class GoldRun(SQLModel, table=True):
    """Adjudication state of a run: gold labels hang off it."""

    __tablename__ = "gold_run"
    __table_args__ = (UniqueConstraint("run_pk", "taxonomy_pk"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    #: open | adjudicated
    status: str = Field(default="open", max_length=20)
    no_failure: bool = False
    reviewer_id: int | None = Field(default=None, foreign_key="user_account.id")
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    updated_at: datetime = Field(default_factory=utcnow)


class GoldLabel(SQLModel, table=True):
    __tablename__ = "gold_label"
    id: int | None = Field(default=None, primary_key=True)
    gold_run_id: int = Field(foreign_key="gold_run.id", index=True, ondelete="CASCADE")
    mode: str = Field(max_length=40)
    agent: str = Field(max_length=200)
    principals: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    evidence: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    #: unanimity | majority | adjudication
    origin: str = Field(max_length=20)
    #: pre-accepted unanimity labels can be undone by the reviewer (accepted=False)
    accepted: bool = True
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    created_by: int | None = Field(default=None, foreign_key="user_account.id")
    created_at: datetime = Field(default_factory=utcnow)
    #: optimistic concurrency: bumped on every change; a change naming an older version gets 409
    version: int = Field(default=1, sa_column_kwargs={"server_default": "1"})


class AppSetting(SQLModel, table=True):
    """Small key/value settings changed at run time (e.g. `labels_revealed`)."""

    __tablename__ = "app_setting"
    key: str = Field(primary_key=True, max_length=100)
    value: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
