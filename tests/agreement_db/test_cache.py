"""GET /api/v1/agreement is cached per data version: a repeat is served without recomputing,
and any annotation / gold / run / user change (in this process or another) recomputes."""
from __future__ import annotations

from sqlalchemy import text
from sqlmodel import Session

from app.agreement.cache import data_version
from app.annotations.models import Annotation
from app.annotations.service import save_annotation
from app.auth.service import get_user
from app.runs.models import Run
from app.taxonomies.service import latest

from . import _hand


def _cf1(body):
    return next(r for r in body["modes"] if r["mode"] == "CF1")["fleiss_kappa"]["value"]


def test_agreement_is_cached_until_the_data_changes(engine, client, token_for):
    with Session(engine) as s:
        _hand.build(s)
    rev = token_for("rev")
    params = {"n_boot": 20, "seed": 1}
    first = client.get("/api/v1/agreement", params=params, headers=rev).json()
    cache = client.app.state.agreement_cache
    assert cache.misses == 1 and abs(_cf1(first) - 0.625) < 1e-12
    assert client.get("/api/v1/agreement", params=params, headers=rev).json() == first
    assert cache.misses == 1  # served from the cache
    client.get("/api/v1/agreement", params={**params, "seed": 2}, headers=rev)
    assert cache.misses == 2  # other parameters: another entry

    # b now marks CF1 on r2 too: the saved annotation changes the data version
    with Session(engine) as s:
        run = s.exec(text("SELECT id FROM run WHERE run_id = 'r2'")).one()[0]
        save_annotation(s, get_user(s, "b"), s.get(Run, run), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        s.commit()
    changed = client.get("/api/v1/agreement", params=params, headers=rev).json()
    assert cache.misses == 3 and _cf1(changed) != _cf1(first)


def test_data_version_sees_edits_in_place_and_other_processes(engine):
    with Session(engine) as s:
        _hand.build(s)
        v0 = data_version(s)
        # an edit in place through this process's engine (no new id, same counts)
        s.execute(text("UPDATE user_account SET kind = kind"))
        s.commit()
        v1 = data_version(s)
        assert v1 != v0
        ann = s.exec(text("SELECT id FROM annotation LIMIT 1")).one()[0]
    # a write from "another process": a separate engine, so no hook of ours sees it
    from app.core.db import make_engine

    other = make_engine(engine.url.render_as_string(hide_password=False))
    with other.begin() as c:
        c.execute(text("DELETE FROM label WHERE annotation_id = :a"), {"a": ann})
        c.execute(text("DELETE FROM annotation WHERE id = :a"), {"a": ann})
    other.dispose()
    with Session(engine) as s:
        assert data_version(s)[1] != v1[1]
        assert s.get(Annotation, ann) is None
