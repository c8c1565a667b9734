"""Login, session and token tests: the logic is the same on both databases, so most of them run
on one SQLite database per module (emptied per test) to stay fast."""
from __future__ import annotations

import pytest
from sqlmodel import Session

from app.core.config import get_settings
from app.core.db import make_engine
from app.core.migrate import upgrade
from tests.conftest import _truncate


@pytest.fixture(scope="module")
def _sqlite_url(tmp_path_factory):
    from app.taxonomies.service import sync_builtin

    url = f"sqlite:///{tmp_path_factory.mktemp('auth') / 'auth.db'}"
    upgrade(url)
    eng = make_engine(url)
    with Session(eng) as s:
        sync_builtin(s, get_settings().taxonomy_dir)
        s.commit()
    eng.dispose()
    return url


@pytest.fixture
def sqlite_engine(_sqlite_url):
    eng = make_engine(_sqlite_url)
    _truncate(eng)
    yield eng
    eng.dispose()
