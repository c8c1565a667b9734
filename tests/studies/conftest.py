"""Fixtures of the study tests: the CLI in-process on the `engine` fixture's database (both
backends), and a small two-study database: the demo corpus beside an imported Who&When set."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

WHOWHEN = Path(__file__).parents[1] / "datasets" / "data" / "whowhen"


@pytest.fixture
def run_cli(engine, db_url, monkeypatch):
    """Run `a2annotate ARGS` in-process against the test database; returns the click Result."""
    from app.cli import cli
    from app.core.config import get_settings
    from app.core.db import get_engine

    monkeypatch.setenv("DATABASE_URL", db_url)
    get_settings.cache_clear()
    get_engine.cache_clear()

    def run(*args: str, ok: bool = True):
        res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
        if ok:
            assert res.exit_code == 0, res.output
        return res

    yield run
    get_engine().dispose()
    get_engine.cache_clear()
    get_settings.cache_clear()


@pytest.fixture
def two_corpora(run_cli):
    """The demo corpus (24 runs, demo users and simulated labels) and the Who&When fixture (2 runs)."""
    run_cli("demo", "--runs", "24", "--seed", "3", "--with-users")
    run_cli("import", WHOWHEN)
    return run_cli
