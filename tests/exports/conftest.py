"""Fixtures: the hand-built report corpus stored in the database (both backends), the CLI."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from tests.reports_db import corpus
from tests.reports_db.conftest import run_cli  # noqa: F401  (the in-process CLI fixture)


@pytest.fixture
def tokens(engine) -> dict[str, dict[str, str]]:
    """Store tests/reports_db/corpus.py; returns Authorization headers by user name."""
    with Session(engine) as s:
        toks = corpus.build(s)
        s.commit()
    return {name: {"Authorization": f"Bearer {tok}"} for name, tok in toks.items()}


@pytest.fixture
def client(engine, tokens):
    with TestClient(create_app(engine)) as c:
        yield c
