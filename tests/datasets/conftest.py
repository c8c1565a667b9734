"""Fixtures of the dataset import/export tests: an app and the CLI on the `engine` fixture's
database (both backends), with an admin and an annotator holding API tokens."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token, create_user

DATA = Path(__file__).parent / "data"


@pytest.fixture
def client(engine):
    from app.main import create_app

    with Session(engine) as s:
        admin = create_user(s, "root", "admin", "password123")
        ann = create_user(s, "ann", "annotator", "password123")
        tokens = {"admin": create_token(s, admin), "annotator": create_token(s, ann)}
        s.commit()
    c = TestClient(create_app(engine))
    c.hdr = {k: {"Authorization": f"Bearer {v}"} for k, v in tokens.items()}
    return c


@pytest.fixture
def run_cli(engine, db_url, monkeypatch):
    """Run `a2annotate ARGS` in-process against the test database; returns the click Result."""
    from app.cli import cli
    from app.core.config import get_settings
    from app.core.db import get_engine

    monkeypatch.setenv("DATABASE_URL", db_url)
    get_settings.cache_clear()
    get_engine.cache_clear()

    def run(*args: str):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    yield run
    get_engine().dispose()
    get_engine.cache_clear()
    get_settings.cache_clear()


def stored_labels(engine, taxonomy_key: str | None = None) -> dict[tuple, tuple]:
    """(run_id, annotator, taxonomy key@version) -> (kind, no_failure, sorted (mode, agent, evidence, note))."""
    from sqlmodel import select

    from app.annotations.models import Annotation, Label
    from app.auth.models import User
    from app.runs.models import Run
    from app.taxonomies.models import Taxonomy

    out = {}
    with Session(engine) as s:
        rows = s.exec(select(Annotation, User, Run.run_id, Taxonomy).join(User, User.id == Annotation.user_id)
                      .join(Run, Run.id == Annotation.run_pk).join(Taxonomy, Taxonomy.id == Annotation.taxonomy_pk)
                      .where(Annotation.status == "submitted")).all()
        for ann, user, run_id, tax in rows:
            if taxonomy_key and tax.key != taxonomy_key:
                continue
            labs = s.exec(select(Label).where(Label.annotation_id == ann.id)).all()
            out[(run_id, user.username, f"{tax.key}@{tax.version}")] = (
                user.kind, ann.no_failure,
                tuple(sorted(((lb.mode or ""), lb.agent, tuple(lb.evidence), lb.note or "") for lb in labs)))
    return out
