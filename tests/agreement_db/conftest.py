"""Fixtures of the DB-backed agreement tests: an app on the `engine` fixture (both backends)."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token, get_user


@pytest.fixture
def app(engine):
    from app.main import create_app

    return create_app(engine)


@pytest.fixture
def client(app) -> TestClient:
    return TestClient(app)


@pytest.fixture
def token_for(engine):
    """token_for(username) -> a Bearer header for that user."""

    def make(username: str) -> dict[str, str]:
        with Session(engine) as s:
            tok = create_token(s, get_user(s, username))
            s.commit()
        return {"Authorization": f"Bearer {tok}"}

    return make
