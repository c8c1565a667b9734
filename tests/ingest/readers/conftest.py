"""The CLI on the `engine` fixture's database (both backends), for the framework readers' tests."""
from __future__ import annotations

import pytest
from click.testing import CliRunner


@pytest.fixture
def run_cli(engine, db_url, monkeypatch):
    """Run `a2annotate ARGS` in-process against the test database; returns the click Result."""
    from app.cli import cli
    from app.core.config import get_settings
    from app.core.db import get_engine

    monkeypatch.setenv("DATABASE_URL", db_url)
    get_settings.cache_clear()
    get_engine.cache_clear()

    def run(*args):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    yield run
    get_engine().dispose()
    get_engine.cache_clear()
    get_settings.cache_clear()
