"""Users (humans and automated judges) and API tokens."""
from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from app.runs.models import utcnow

ROLES = ("admin", "reviewer", "annotator")
#: kinds of annotators that are not people (`User.kind`)
SOURCE_KINDS = ("judge", "source")
#: the datasets whose annotators are imported as sources: username prefix -> dataset name
DATASET_SOURCES = {"whowhen:": "Who&When", "mad:": "MAD (MAST)"}


def source_name_for(username: str, kind: str) -> str | None:
    """The dataset or judge a non-human annotator stands for (None for a person)."""
    if kind == "human":
        return None
    for prefix, name in DATASET_SOURCES.items():
        if username.startswith(prefix):
            return name
    for prefix in ("judge:", "detector:"):
        if username.startswith(prefix):
            return username[len(prefix):] or username
    return username


class User(SQLModel, table=True):
    __tablename__ = "user_account"
    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(max_length=200, sa_column_kwargs={"unique": True})
    role: str = Field(default="annotator", max_length=20)
    #: "human" (a person: can log in, be assigned, appears in user management); "judge" (an automated
    #: judge or detector: `judge:<source>`, `detector:<name>`); "source" (the annotators of an imported
    #: dataset, e.g. `whowhen:annotators`, `mad:annotator_1`). Judges and sources are not people: they
    #: cannot log in, are never assignable and are shown as sources (`source_name`).
    kind: str = Field(default="human", max_length=20)
    #: for judges and sources: the dataset or judge they stand for ("Who&When", "MAD (MAST)", "mast-llm")
    source_name: str | None = Field(default=None, max_length=200)
    password_hash: str | None = Field(default=None, max_length=300)
    is_active: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    #: sessions carry the generation they were issued under; bumping it (logout, password reset,
    #: role change) ends every session of the user
    session_generation: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_token"
    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    name: str | None = Field(default=None, max_length=200)
    #: sha256 hex of the token; the token itself is shown once and never stored.
    token_hash: str = Field(max_length=64, sa_column_kwargs={"unique": True})
    prefix: str = Field(max_length=16)
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = None
    revoked: bool = False
    #: when the token stops working (None: never)
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
