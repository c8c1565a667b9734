"""Shared demo-corpus fixtures (generated once per test session)."""
from __future__ import annotations

import pytest

from app.demo import generate_corpus


@pytest.fixture(scope="session")
def corpus200():
    return generate_corpus(200, seed=0)


@pytest.fixture(scope="session")
def corpus600():
    return generate_corpus(600, seed=3)
