"""``load_agreement_data`` (driver tuples, JSON as text decoded in one call) gives exactly the
frames the ORM loader before it gave (``_oracle_service``), on SQLite and PostgreSQL."""
from __future__ import annotations

import pandas as pd
import pytest
from sqlmodel import Session, select

from app.agreement import service
from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.ingest.canonical import normalize_run
from app.ingest.loader import store_run
from app.runs.models import Run
from app.runs.service import get_run
from app.taxonomies.service import latest
from tests.annotations.factories import raw_run

from . import _hand, _oracle_service


@pytest.fixture
def messy(engine):
    """The hand data plus what the loader must also get right: unsorted and repeated evidence, an
    empty agent, an attribution-only label, a mode outside the taxonomy, gold (accepted and not,
    adjudicated and open) and a run whose own scenario object names another family."""
    with Session(engine) as s:
        _hand.build(s)
        tax = latest(s, "a2-failures")
        raw = raw_run("r5", family="travel")
        raw["scenario"]["id"] = "commerce/s1"  # the stored scenario of that id is commerce
        store_run(s, normalize_run(raw))
        s.flush()
        r5 = get_run(s, "r5")
        assert r5.scenario_override is not None
        users = {u.username: u for u in s.exec(select(User)).all()}
        for name in ("a", "b"):
            ann = Annotation(run_pk=r5.id, user_id=users[name].id, taxonomy_pk=tax.id, status="submitted")
            s.add(ann)
            s.flush()
            s.add(Label(annotation_id=ann.id, mode="CF1", agent="", evidence=[3, 1, 3]))
            s.add(Label(annotation_id=ann.id, mode=None, agent="buyer_agent", evidence=[2, 0]))
            s.add(Label(annotation_id=ann.id, mode="ZZ9", agent="buyer_agent", evidence=[1]))
            s.add(Label(annotation_id=ann.id, mode="GR1", agent="seller_agent", evidence=[]))
        runs = {r.run_id: r for r in s.exec(select(Run)).all()}
        gold = GoldRun(run_pk=runs["r1"].id, taxonomy_pk=tax.id, status="adjudicated")
        open_gold = GoldRun(run_pk=runs["r2"].id, taxonomy_pk=tax.id, status="open")
        s.add_all([gold, open_gold])
        s.flush()
        s.add_all([
            GoldLabel(gold_run_id=gold.id, mode="CF1", agent="buyer_agent", evidence=[4, 2, 2], origin="adjudication"),
            GoldLabel(gold_run_id=gold.id, mode="GR1", agent="", evidence=[], origin="majority"),
            GoldLabel(gold_run_id=gold.id, mode="DD1", agent="x", evidence=[1], origin="unanimity", accepted=False),
            GoldLabel(gold_run_id=open_gold.id, mode="GR2", agent="buyer_agent", evidence=[1], origin="unanimity"),
        ])
        s.commit()
        mast = latest(s, "mast")
        return f"{mast.key}@{mast.version}"


def _same(new: service.AgreementData, old: service.AgreementData) -> None:
    for name in ("labels", "submissions", "agents", "gold_labels", "attributions"):
        pd.testing.assert_frame_equal(getattr(new, name), getattr(old, name), check_exact=True)
        assert [list(map(type, r)) for r in getattr(new, name).itertuples(index=False)] == \
            [list(map(type, r)) for r in getattr(old, name).itertuples(index=False)], name
    assert new.taxonomy.id == old.taxonomy.id and new.modes == old.modes and new.mode_category == old.mode_category
    assert (new.gold_runs, new.kinds, new.family, new.include_judges, new.annotators_filter) == \
        (old.gold_runs, old.kinds, old.family, old.include_judges, old.annotators_filter)


@pytest.mark.parametrize("params", [
    {}, {"family": "commerce"}, {"family": "travel"}, {"family": "nowhere"}, {"annotators": "a,b"},
    {"include_judges": True}, {"annotators": ["judge:judge-l2", "c"]}, {"taxonomy": "MAST"},
])
def test_loader_equals_the_orm_loader(engine, messy, params):
    if params.get("taxonomy") == "MAST":
        params = {**params, "taxonomy": messy}
    with Session(engine) as s:
        new = service.load_agreement_data(s, **params)
        old = _oracle_service.load_agreement_data(s, **params)
    _same(new, old)
    if not params:
        assert len(new.labels) and len(new.attributions) and len(new.gold_labels)
        assert [3, 1, 3] not in list(new.labels["evidence"]) and [1, 3] in list(new.labels["evidence"])
        assert new.gold_labels["evidence"].tolist() == [[2, 4], []]


def test_loader_raises_as_before(engine, messy):
    with Session(engine) as s:
        with pytest.raises(service.AgreementError) as new:
            service.load_agreement_data(s, annotators="a,nobody")
        with pytest.raises(service.AgreementError) as old:
            _oracle_service.load_agreement_data(s, annotators="a,nobody")
    assert str(new.value) == str(old.value) and new.value.field == old.value.field


def test_loader_on_an_empty_database(engine):
    with Session(engine) as s:
        _same(service.load_agreement_data(s), _oracle_service.load_agreement_data(s))


def test_loader_sees_unflushed_changes_as_before(engine, messy):
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        a = s.exec(select(User).where(User.username == "a")).one()
        ann = s.exec(select(Annotation).where(Annotation.status == "submitted", Annotation.taxonomy_pk == tax.id,
                                              Annotation.user_id == a.id)).first()
        s.add(Label(annotation_id=ann.id, mode="DD1", agent="buyer_agent", evidence=[9, 8]))  # not flushed
        new = service.load_agreement_data(s)
        old = _oracle_service.load_agreement_data(s)
        _same(new, old)
        assert [8, 9] in list(new.labels["evidence"])
        s.rollback()


@pytest.mark.parametrize("texts", [
    ["[1,2]", "[3]", "[]"], ["[1, 2]", "[ 3 ]"], ["[1,2]", "null"], ["[01]"], ['["1"]', "[2]"], ["[1.5]"],
    ["1,2]", "[3"], ["[true]"],
])
def test_json_values_equal_one_decode_per_text(texts):
    import json

    try:
        want = [json.loads(t) for t in texts]
    except ValueError:
        with pytest.raises(ValueError):
            service._json_values(texts)
        return
    got = service._json_values(texts)
    assert got == want and [type(v) for v in got] == [type(v) for v in want]


@pytest.mark.parametrize("values", [
    [[1, 2], [3], []], [[2, 1], [1, 1, 3], [5]], [[1, 2], None, [4, 4]], [[True, 2]], [["3", 1]], [[1.0, 2]],
    [[2**70, 1]], [[3], [2], [1]],
])
def test_seq_sets_equal_the_set_expression(values):
    got = service._seq_sets(values)
    want = [sorted({int(s) for s in (v or [])}) for v in values]
    assert got == want and [[type(x) for x in v] for v in got] == [[type(x) for x in v] for v in want]
