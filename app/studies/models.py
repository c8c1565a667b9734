"""Studies, their members, assignment batches (how a queue was sampled), queue rules, and the
per-run counter that holds "k distinct annotators per run" in the database."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow

#: member roles within a study: a lead manages the study's queues, adjudication, detectors, exports
MEMBER_ROLES = ("lead", "annotator")


class Study(SQLModel, table=True):
    __tablename__ = "study"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, sa_column_kwargs={"unique": True})
    description: str | None = Field(default=None, sa_column=Column(Text))
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    #: the saved run filter (see app.studies.service.SELECTION_KEYS); {} selects every run
    selection: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    created_by: int | None = Field(default=None, foreign_key="user_account.id", ondelete="SET NULL")


class StudyMember(SQLModel, table=True):
    __tablename__ = "study_member"
    __table_args__ = (UniqueConstraint("study_id", "user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    #: lead | annotator
    role: str = Field(max_length=20)


class AssignmentBatch(SQLModel, table=True):
    """How one batch was drawn: the policy, its parameters, the seed, the frame and per stratum
    the frame size, the number sampled and the inclusion probability."""

    __tablename__ = "assignment_batch"
    __table_args__ = (UniqueConstraint("name", "taxonomy_pk"),)
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    study_id: int | None = Field(default=None, foreign_key="study.id", index=True, ondelete="CASCADE")
    policy: str = Field(max_length=20)
    seed: int | None = None
    k: int = 1
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    #: runs eligible when the batch was drawn (the sampling frame) and the largest run pk among them
    frame_size: int = 0
    frame_max_run_pk: int | None = None
    #: {stratum: {"frame": N_h, "sampled": n_h, "inclusion_prob": n_h / N_h}}
    strata: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    #: the queue rule that made it (a top-up), if any
    rule_id: int | None = Field(default=None, foreign_key="queue_rule.id", ondelete="SET NULL")
    created_at: datetime = Field(default_factory=utcnow)
    created_by: int | None = Field(default=None, foreign_key="user_account.id", ondelete="SET NULL")


class QueueRule(SQLModel, table=True):
    """A stored fill: applied after each import commit and by `a2annotate study fill` /
    `POST /api/v1/studies/{name}/fill`, it keeps a study's queue topped up as runs arrive."""

    __tablename__ = "queue_rule"
    __table_args__ = (UniqueConstraint("study_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True, ondelete="CASCADE")
    name: str = Field(max_length=200)
    #: random (Bernoulli at `rate` by a seeded hash of the run id) | all | flagged | stratified
    policy: str = Field(max_length=20)
    seed: int = 0
    k: int = 1
    annotators: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    enabled: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    last_applied_at: datetime | None = None


class RunQuota(SQLModel, table=True):
    """Per (study, taxonomy version, run): how many annotators are assigned (`n`) and the k the
    last fill asked for. Fills raise `n` with `UPDATE ... SET n = n + 1 WHERE n < :k`, which
    takes the row lock, so concurrent fills never give a run more than k annotators."""

    __tablename__ = "run_quota"
    __table_args__ = (UniqueConstraint("study_key", "taxonomy_pk", "run_pk"),
                      CheckConstraint("n >= 0", name="ck_run_quota_n_nonnegative"),
                      CheckConstraint("n <= k", name="ck_run_quota_n_at_most_k"))
    id: int | None = Field(default=None, primary_key=True)
    #: the study's id, 0 for assignments made without a study
    study_key: int = Field(default=0)
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    k: int = 1
    n: int = 0


class AssignmentRemoval(SQLModel, table=True):
    """A run removed from an annotator's queue by hand: later fills do not give it back."""

    __tablename__ = "assignment_removal"
    __table_args__ = (UniqueConstraint("study_key", "run_pk", "user_id", "taxonomy_pk"),)
    id: int | None = Field(default=None, primary_key=True)
    study_key: int = Field(default=0)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    removed_at: datetime = Field(default_factory=utcnow)
    removed_by: int | None = Field(default=None, foreign_key="user_account.id", ondelete="SET NULL")
