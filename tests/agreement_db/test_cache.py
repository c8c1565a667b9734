"""GET /api/v1/agreement is stored per data version (app/results): a repeat is served without
recomputing, and any annotation / gold / run / user change (in this process or another) is seen.
The sharing between processes and the recompute job: tests/results/test_stored_results.py."""
from __future__ import annotations

from sqlalchemy import text
from sqlmodel import Session

from app.annotations.models import Annotation
from app.annotations.service import save_annotation
from app.auth.service import get_user
from app.results.service import COMPUTATIONS, data_version
from app.runs.models import Run
from app.taxonomies.service import latest

from . import _hand


def _cf1(body):
    return next(r for r in body["modes"] if r["mode"] == "CF1")["fleiss_kappa"]["value"]


def test_agreement_is_stored_until_the_data_changes(engine, client, token_for):
    with Session(engine) as s:
        _hand.build(s)
    rev = token_for("rev")
    params = {"n_boot": 20, "seed": 1}
    n0 = COMPUTATIONS["agreement"]
    first = client.get("/api/v1/agreement", params=params, headers=rev).json()
    assert COMPUTATIONS["agreement"] == n0 + 1 and abs(_cf1(first) - 0.625) < 1e-12
    assert client.get("/api/v1/agreement", params=params, headers=rev).json() == first
    assert COMPUTATIONS["agreement"] == n0 + 1  # served from the stored result
    client.get("/api/v1/agreement", params={**params, "seed": 2}, headers=rev)
    assert COMPUTATIONS["agreement"] == n0 + 2  # other parameters: another entry

    # b now marks CF1 on r2 too: the saved annotation changes the data version; the tests run the
    # immediate broker, so the recompute job runs at once and the answer is fresh
    with Session(engine) as s:
        run = s.exec(text("SELECT id FROM run WHERE run_id = 'r2'")).one()[0]
        save_annotation(s, get_user(s, "b"), s.get(Run, run), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
        s.commit()
    changed = client.get("/api/v1/agreement", params=params, headers=rev).json()
    assert COMPUTATIONS["agreement"] == n0 + 3 and _cf1(changed) != _cf1(first) and changed["stale"] is False


def test_data_version_sees_edits_in_place_and_other_processes(engine):
    with Session(engine) as s:
        _hand.build(s)
        v0 = data_version(s)
        # an edit in place (no new id, same counts): a user becomes a judge
        s.execute(text("UPDATE user_account SET kind = 'judge' WHERE username = 'd'"))
        s.commit()
        v1 = data_version(s)
        assert v1 != v0
        ann = s.exec(text("SELECT id FROM annotation LIMIT 1")).one()[0]
    # a write from "another process": a separate engine
    from app.core.db import make_engine

    other = make_engine(engine.url.render_as_string(hide_password=False))
    with other.begin() as c:
        c.execute(text("DELETE FROM label WHERE annotation_id = :a"), {"a": ann})
        c.execute(text("DELETE FROM annotation WHERE id = :a"), {"a": ann})
    other.dispose()
    with Session(engine) as s:
        assert data_version(s) != v1
        assert s.get(Annotation, ann) is None
