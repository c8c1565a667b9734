"""One row per (run, annotator, taxonomy version) that the annotator skipped or flagged."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow


class RunFlag(SQLModel, table=True):
    __tablename__ = "run_flag"
    __table_args__ = (UniqueConstraint("run_pk", "user_id", "taxonomy_pk"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    taxonomy_pk: int = Field(foreign_key="taxonomy.id")
    #: skip (set aside by the annotator) | flag (asks a reviewer to look)
    kind: str = Field(max_length=10)
    #: unclear | broken_log | needs_expert | other
    reason: str = Field(max_length=40)
    note: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    #: a reviewer handled it: the run is back in the annotator's queue
    resolved_at: datetime | None = None
    resolved_by: int | None = Field(default=None, foreign_key="user_account.id")
