"""Schema migrations (Alembic) and the start-up check that the schema is current."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

ROOT = Path(__file__).resolve().parents[2]


class SchemaOutOfDate(RuntimeError):
    """The database schema is not at the latest migration."""


def alembic_config(database_url: str) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.attributes["database_url"] = database_url
    return cfg


def upgrade(database_url: str) -> None:
    """Apply every pending migration (idempotent)."""
    command.upgrade(alembic_config(database_url), "head")


def head_revision(database_url: str) -> str:
    return ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def check_schema(engine: Engine) -> None:
    """Raise SchemaOutOfDate, saying which command to run, unless the schema is at head."""
    url = engine.url.render_as_string(hide_password=False)
    head = head_revision(url)
    current = current_revision(engine)
    if current != head:
        state = "has no schema" if current is None else f"is at revision {current}"
        raise SchemaOutOfDate(
            f"database {engine.url.render_as_string(hide_password=True)} {state}, latest is {head}: "
            "run `a2annotate db upgrade`"
        )
