"""The app and CLI refuse an out-of-date schema; migrations are idempotent and match the models."""
from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlmodel import SQLModel

from app.core.db import make_engine
from app.core.migrate import SchemaOutOfDate, check_schema, upgrade
from app.main import create_app


def test_app_refuses_empty_database(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(SchemaOutOfDate, match="a2annotate db upgrade"):
        create_app(engine)


def test_app_refuses_old_revision(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'older'"))
    with pytest.raises(SchemaOutOfDate, match="is at revision older"):
        check_schema(engine)


def test_migrations_match_models_and_are_idempotent(db_url):
    upgrade(db_url)  # a second upgrade is a no-op
    engine = make_engine(db_url)
    check_schema(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    engine.dispose()
    assert diff == [], f"models and migrations disagree: {diff}"
