"""``load_agreement_data`` on hand-built data (tests/agreement_db/_hand.py plus what the loader
must also get right), on SQLite and PostgreSQL: every frame row worked out from the fixture."""
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

from . import _hand


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


# what the fixture holds, worked out from it: (annotator, kind, run_id, mode, category, agent,
# evidence) of every label the a2-failures loader must return; r5 is the travel run (its own
# scenario object), its "" agent is no agent, its evidence [3, 1, 3] the set [1, 3], its ZZ9
# label (not in the taxonomy) dropped and its label without a mode an attribution
CATEGORY = {"CF1": "CF", "GR1": "GR"}
FAMILY = {"r1": "commerce", "r2": "commerce", "r3": "commerce", "r4": "travel", "r5": "travel"}
LABELS = [(a, "human", r, m, CATEGORY[m], ag, sorted(set(ev))) for (a, r), labs in _hand.LABELS.items()
          for m, ag, ev in labs] + [
    ("judge:judge-l2", "judge", "r1", "CF1", "CF", "buyer_agent", [1]),  # the audit on r1
    *((a, "human", "r5", m, CATEGORY[m], ag, ev) for a in ("a", "b")
      for m, ag, ev in (("CF1", None, [1, 3]), ("GR1", "seller_agent", []))),
]
SUBMISSIONS = [(a, "human", r) for (a, r) in _hand.LABELS] + [("a", "human", "r5"), ("b", "human", "r5"),
                                                             ("judge:judge-l2", "judge", "r1")]
ATTRIBUTIONS = [(a, "human", "r5", "buyer_agent", [0, 2]) for a in ("a", "b")]
GOLD = [("r1", "CF1", "buyer_agent", [2, 4], "adjudication"), ("r1", "GR1", None, [], "majority")]  # accepted only


def _rows(frame: pd.DataFrame) -> list[tuple]:
    """The rows, order-free, evidence lists as tuples; every value's type checked on the way."""
    out = []
    for row in frame.itertuples(index=False, name=None):
        for v in row:
            assert v is None or type(v) is str or (type(v) is list and all(type(x) is int for x in v)), row
        out.append(tuple(tuple(v) if isinstance(v, list) else v for v in row))
    return sorted(out, key=repr)


def _want(rows, keep) -> list[tuple]:
    return _rows(pd.DataFrame([r for r in rows if keep(r)]))


@pytest.mark.parametrize("params", [
    {}, {"family": "commerce"}, {"family": "travel"}, {"family": "nowhere"}, {"annotators": "a,b"},
    {"include_judges": True}, {"annotators": ["judge:judge-l2", "c"]},
])
def test_loader_reads_every_frame(engine, messy, params):
    with Session(engine) as s:
        got = service.load_agreement_data(s, **params)
    names = params.get("annotators")
    names = names.split(",") if isinstance(names, str) else names
    judges = params.get("include_judges") or any(n.startswith("judge:") for n in names or [])

    def keep(annotator, kind, run_id):
        return ((params.get("family") is None or FAMILY[run_id] == params["family"])
                and (names is None or annotator in names) and (kind == "human" or judges))

    assert _rows(got.labels) == _want(LABELS, lambda r: keep(*r[:3]))
    assert _rows(got.submissions) == _want(SUBMISSIONS, lambda r: keep(*r))
    assert _rows(got.attributions) == _want(ATTRIBUTIONS, lambda r: keep(*r[:3]))
    gold = _want(GOLD, lambda r: params.get("family") in (None, FAMILY[r[0]]))
    assert _rows(got.gold_labels) == gold and got.gold_runs == sorted({g[0] for g in gold})
    runs = sorted(r for r in FAMILY if params.get("family") in (None, FAMILY[r]))
    assert _rows(got.agents) == [(r, a) for r in runs for a in ("buyer_agent", "seller_agent")]
    assert list(got.labels.columns) == list(service.LABEL_COLUMNS)
    assert list(got.attributions.columns) == list(service.ATTRIBUTION_COLUMNS)
    assert got.kinds == {a: k for a, k, _ in (tuple(x) for x in got.submissions.to_numpy())}
    assert got.taxonomy.key == "a2-failures" and len(got.modes) == 20 and got.mode_category["CF1"] == "CF"
    assert (got.family, got.include_judges) == (params.get("family"), bool(params.get("include_judges")))


def test_loader_under_another_taxonomy(engine, messy):
    with Session(engine) as s:
        got = service.load_agreement_data(s, taxonomy=messy)
    first = got.modes[0]
    assert got.taxonomy.key == "mast" and first == "1.1"
    assert _rows(got.labels) == [("a", "human", "r3", first, got.mode_category[first], "buyer_agent", (0,))]
    assert _rows(got.submissions) == [("a", "human", "r3")]
    assert got.gold_labels.empty and got.attributions.empty and got.gold_runs == []


def test_loader_names_an_unknown_annotator(engine, messy):
    with Session(engine) as s:
        with pytest.raises(service.AgreementError, match="^annotators: unknown annotator 'nobody'$") as err:
            service.load_agreement_data(s, annotators="a,nobody")
    assert err.value.field == "annotators"


def test_loader_on_an_empty_database(engine):
    with Session(engine) as s:
        got = service.load_agreement_data(s)
    for name, columns in (("labels", service.LABEL_COLUMNS), ("attributions", service.ATTRIBUTION_COLUMNS),
                          ("submissions", ("annotator", "kind", "run_id")), ("agents", ("run_id", "agent_id"))):
        frame = getattr(got, name)
        assert frame.empty and list(frame.columns) == list(columns), name
    assert got.gold_labels.empty and got.gold_runs == [] and got.kinds == {}


def test_loader_sees_unflushed_changes(engine, messy):
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        a = s.exec(select(User).where(User.username == "a")).one()
        ann = s.exec(select(Annotation).where(Annotation.status == "submitted", Annotation.taxonomy_pk == tax.id,
                                              Annotation.user_id == a.id)).first()
        run_id = s.get(Run, ann.run_pk).run_id
        s.add(Label(annotation_id=ann.id, mode="DD1", agent="buyer_agent", evidence=[9, 8]))  # not flushed
        got = service.load_agreement_data(s)
        assert ("a", "human", run_id, "DD1", "DD", "buyer_agent", (8, 9)) in _rows(got.labels)
        assert len(got.labels) == len(LABELS) - 1 + 1  # the judge's label is left out, the new one in
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
