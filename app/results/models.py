"""A computed result (an agreement or outcome-report payload) kept for every process."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow


class StoredResult(SQLModel, table=True):
    """One row per (kind, parameters): the last payload computed for them and the data version it
    was computed from. A row whose ``data_version`` is not the database's current one is stale."""

    __tablename__ = "stored_result"
    __table_args__ = (UniqueConstraint("kind", "key", name="uq_stored_result_kind_key"),)

    id: int | None = Field(default=None, primary_key=True)
    #: what was computed: ``agreement``, ``agreement_gold``, ``report_outcomes``, ... (app.results.service.KINDS)
    kind: str = Field(max_length=40)
    #: sha256 of the canonical JSON of the parameters (every request parameter, a study included)
    key: str = Field(max_length=64)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    #: sha256 of the data fingerprint the payload was computed from (null while never computed)
    data_version: str | None = Field(default=None, max_length=64)
    payload: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    computed_at: datetime | None = None
    #: seconds the computation took
    compute_seconds: float | None = None
    #: the recompute job last enqueued for these parameters (not repeated while it is queued or running)
    job_id: str | None = Field(default=None, max_length=32)
    updated_at: datetime = Field(default_factory=utcnow)
