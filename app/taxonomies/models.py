"""Taxonomy versions. A changed taxonomy file becomes a new version; annotations keep theirs."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.runs.models import utcnow


class Taxonomy(SQLModel, table=True):
    __tablename__ = "taxonomy"
    __table_args__ = (UniqueConstraint("key", "version"), UniqueConstraint("key", "content_hash"))
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=100, index=True)
    version: int
    name: str = Field(max_length=300)
    content_hash: str = Field(max_length=64)
    definition: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    source_file: str | None = Field(default=None, max_length=500)
    created_at: datetime = Field(default_factory=utcnow)
