"""`a2annotate db upgrade`."""
from __future__ import annotations

import click

from app.cli.common import one_line_errors
from app.core.config import get_settings
from app.core.db import get_engine, session_scope
from app.core.migrate import upgrade


@click.group()
def db() -> None:
    """Database schema commands."""


@db.command("upgrade")
@one_line_errors
def db_upgrade() -> None:
    """Apply pending migrations and register the built-in taxonomies (idempotent)."""
    from app.taxonomies.service import sync_builtin

    settings = get_settings()
    upgrade(settings.database_url)
    with session_scope(get_engine()) as session:
        created = sync_builtin(session, settings.taxonomy_dir)
    click.echo(f"database at latest schema; {len(created)} new taxonomy version(s)")
