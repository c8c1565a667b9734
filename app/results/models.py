"""A computed result (an agreement or outcome-report payload) kept for every process."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, UniqueConstraint
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
    #: the data version the payload was computed from (`app.results.service.data_version`; null
    #: while never computed, and after a migration that changes how versions are counted)
    data_version: str | None = Field(default=None, max_length=64)
    payload: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    computed_at: datetime | None = None
    #: seconds the computation took
    compute_seconds: float | None = None
    #: the recompute job last enqueued for these parameters (not repeated while it is queued or running)
    job_id: str | None = Field(default=None, max_length=32)
    updated_at: datetime = Field(default_factory=utcnow)


class DataVersion(SQLModel, table=True):
    """The data version is the sum of ``version`` over these rows, bumped by database triggers
    (migration 0015_data_version) in the transaction of every write to the tables the results read
    (`app.results.service.RESULT_TABLES`), whichever process or statement (COPY included) makes it.
    PostgreSQL bumps when the writing transaction commits (a deferred trigger, see
    `DataVersionPending`), on one of 16 rows (by connection), so concurrent writers rarely wait
    for one row lock and never deadlock on it; SQLite bumps row 0. Nothing in the app writes these
    rows itself."""

    __tablename__ = "data_version"

    slot: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    version: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, server_default="0"))


class DataVersionPending(SQLModel, table=True):
    """PostgreSQL: the transactions that wrote to a result table and have not committed yet, one
    row each (migration 0015_data_version); a deferred trigger bumps `DataVersion` and deletes
    the row when the transaction commits. Empty outside a transaction; unused on SQLite."""

    __tablename__ = "data_version_pending"

    txid: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
