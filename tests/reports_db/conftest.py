"""Fixtures: the hand-built corpus in the database (both backends), an API client, the CLI."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from tests.reports_db import corpus


@pytest.fixture
def tokens(engine) -> dict[str, dict[str, str]]:
    """Store the corpus; returns Authorization headers by user name."""
    with Session(engine) as s:
        toks = corpus.build(s)
        s.commit()
    return {name: {"Authorization": f"Bearer {tok}"} for name, tok in toks.items()}


@pytest.fixture
def client(engine, tokens) -> Iterator[TestClient]:
    with TestClient(create_app(engine)) as c:
        yield c


@pytest.fixture
def run_cli(db_url, monkeypatch):
    """Run `a2annotate ARGS` in-process against the test database; returns the click Result."""
    from app.cli import cli
    from app.core.config import get_settings
    from app.core.db import get_engine

    monkeypatch.setenv("DATABASE_URL", db_url)
    get_settings.cache_clear()
    get_engine.cache_clear()

    def run(*args: str):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    yield run
    get_engine().dispose()
    get_engine.cache_clear()
    get_settings.cache_clear()


def cli_json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
