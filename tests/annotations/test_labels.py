"""save_annotation: validation, drafts and submission, time on task, adjudication lock, versions, blind mode."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sqlalchemy import delete
from sqlmodel import Session, select

from app.annotations.blind import set_revealed, visible_annotation_filter
from app.annotations.models import Annotation, Assignment, GoldRun, Label
from app.annotations.service import (
    AnnotationError,
    LockedError,
    list_annotations,
    resolve_taxonomy,
    save_annotation,
)
from app.core.config import get_settings
from app.taxonomies.models import Taxonomy
from app.taxonomies.service import register_file
from tests.annotations.factories import make_run, make_user

GOOD = {"mode": "DD1", "agent": "buyer_agent", "principals": ["buyer"], "evidence": [1, 3], "confidence": 0.8,
        "note": "never asked", "time_ms": 1200}


@pytest.fixture
def ctx(session: Session):
    run = make_run(session, "r1")
    alice = make_user(session, "alice", password=None)
    tax = resolve_taxonomy(session, "a2-failures")
    session.commit()
    return session, run, alice, tax


def test_draft_then_submit_accumulates_time(ctx):
    session, run, alice, tax = ctx
    ann = save_annotation(session, alice, run, tax, [GOOD], status="draft", time_ms=1000, note="first pass")
    assert ann.status == "draft" and ann.submitted_at is None and ann.time_ms == 1000
    second = dict(GOOD, mode="peer not engaged", evidence=[2], time_ms=300)  # name resolves to DD1
    ann2 = save_annotation(session, alice, run, tax, [GOOD, second], status="submitted", time_ms=2500)
    session.commit()
    assert ann2.id == ann.id  # replaced, not duplicated
    assert ann2.status == "submitted" and ann2.submitted_at is not None
    assert ann2.time_ms == 3500  # 1000 + 2500
    labels = session.exec(select(Label).where(Label.annotation_id == ann.id).order_by(Label.id)).all()
    assert [(lab.mode, lab.evidence, lab.time_ms) for lab in labels] == [("DD1", [1, 3], 1200), ("DD1", [2], 300)]
    assert labels[0].principals == ["buyer"] and labels[0].confidence == 0.8
    assert len(session.exec(select(Annotation)).all()) == 1
    # a draft save afterwards withdraws the submission
    ann3 = save_annotation(session, alice, run, tax, [GOOD], status="draft", time_ms=0)
    assert ann3.status == "draft" and ann3.submitted_at is None and ann3.time_ms == 3500


def test_alias_of_mast_mode_is_stored_by_code(ctx):
    session, run, alice, _ = ctx
    mast = resolve_taxonomy(session, "mast")
    ann = save_annotation(session, alice, run, mast, [dict(GOOD, mode="weak verification")], status="submitted")
    assert session.exec(select(Label.mode).where(Label.annotation_id == ann.id)).one() == "3.3"


def _bad(label_changes: dict | None = None, drop: str | None = None, index: int = 0) -> list[dict]:
    lab = dict(GOOD, **(label_changes or {}))
    if drop:
        lab.pop(drop)
    labels = [dict(GOOD), dict(GOOD)]
    labels[index] = lab
    return labels


@pytest.mark.parametrize("labels, kwargs, expected", [
    (_bad({"agent": "x"}, index=1), {}, "labels[1].agent: 'x' is not an agent of run r1"),
    (_bad({"mode": "ZZ9"}), {}, "labels[0].mode: 'ZZ9' is not a mode of taxonomy a2-failures@"),
    (_bad({"mode": "3.3"}), {}, "labels[0].mode: '3.3' is not a mode"),  # a MAST code, not an a2-failures one
    (_bad({"principals": ["buyer", "nobody"]}), {}, "labels[0].principals[1]: 'nobody' is not a principal of run r1"),
    (_bad({"evidence": [1, 99]}, index=1), {}, "labels[1].evidence[1]: 99 is not an event seq of run r1"),
    (_bad({"evidence": []}), {}, "labels[0].evidence: at least 1 required"),
    (_bad({"evidence": ["three"]}), {}, "labels[0].evidence[0]: must be an event seq"),
    (_bad({"confidence": 1.5}), {}, "labels[0].confidence: must be a number from 0 to 1, got 1.5"),
    (_bad({"confidence": -0.1}, index=1), {}, "labels[1].confidence: must be a number from 0 to 1"),
    (_bad(drop="agent"), {}, "labels[0].agent: the responsible agent is required"),
    (_bad({"evidnce": [1]}), {}, "labels[0].evidnce: unknown field"),
    (_bad(), {"no_failure": True}, "no_failure: 'no failure found' cannot be marked together with 2 label(s)"),
    ([], {}, "labels: a submitted annotation needs at least one label or no_failure=true"),
    ([GOOD], {"status": "final"}, "status: must be 'draft' or 'submitted'"),
    ([GOOD], {"time_ms": -5}, "time_ms: must be a whole number of milliseconds >= 0"),
])
def test_validation_errors_name_label_and_field(ctx, labels, kwargs, expected):
    session, run, alice, tax = ctx
    kwargs = {"status": "submitted", **kwargs}
    with pytest.raises(AnnotationError) as err:
        save_annotation(session, alice, run, tax, labels, **kwargs)
    assert str(err.value).startswith(expected), str(err.value)
    assert session.exec(select(Annotation)).all() == []


def test_drafts_may_be_incomplete_but_not_wrong(ctx):
    session, run, alice, tax = ctx
    ann = save_annotation(session, alice, run, tax, [{"mode": "VF1"}], status="draft")
    assert ann.status == "draft"
    with pytest.raises(AnnotationError, match=r"labels\[0\]\.agent: 'ghost' is not an agent of run r1"):
        save_annotation(session, alice, run, tax, [{"mode": "VF1", "agent": "ghost"}], status="draft")
    with pytest.raises(AnnotationError, match=r"labels\[0\]\.agent: the responsible agent is required"):
        save_annotation(session, alice, run, tax, [{"mode": "VF1"}], status="submitted")
    with pytest.raises(AnnotationError, match=r"labels\[0\]\.evidence: at least 1 required"):
        save_annotation(session, alice, run, tax, [{"mode": "VF1", "agent": "seller_agent"}], status="submitted")
    ok = save_annotation(session, alice, run, tax, [], no_failure=True, status="submitted")
    assert ok.no_failure and ok.status == "submitted"


def test_editable_until_adjudicated(ctx):
    session, run, alice, tax = ctx
    save_annotation(session, alice, run, tax, [GOOD], status="submitted")
    gold = GoldRun(run_pk=run.id, taxonomy_pk=tax.id, status="open")
    session.add(gold)
    session.flush()
    edited = save_annotation(session, alice, run, tax, [dict(GOOD, mode="GR1")], status="submitted")
    assert session.exec(select(Label.mode).where(Label.annotation_id == edited.id)).all() == ["GR1"]
    gold.status = "adjudicated"
    session.add(gold)
    session.flush()
    with pytest.raises(LockedError, match="adjudicated"):
        save_annotation(session, alice, run, tax, [GOOD], status="submitted")
    # adjudication is per taxonomy version: the same run is still open under MAST
    mast = resolve_taxonomy(session, "mast")
    assert save_annotation(session, alice, run, mast, [], no_failure=True, status="submitted").id


@pytest.fixture
def taxonomy_v2(engine, tmp_path: Path):
    """a2-failures version 2: the built-in file with one extra mode DD6; removed again afterwards."""
    src = get_settings().taxonomy_dir / "a2-failures.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["modes"].append({"code": "DD6", "name": "Test-only mode", "category": "DD",
                          "definition": "A mode that exists only in version 2 of this test copy."})
    path = tmp_path / "a2-failures-v2.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with Session(engine) as s:
        v1 = resolve_taxonomy(s, "a2-failures")
        row, created = register_file(s, path)
        s.commit()
        assert created and row.version == v1.version + 1
        ids = (v1.id, row.id, v1.version, row.version)
    yield ids
    with Session(engine) as s:
        for table in (Label, Annotation, Assignment, GoldRun):
            if table is Label:
                s.execute(delete(Label).where(Label.annotation_id.in_(
                    select(Annotation.id).where(Annotation.taxonomy_pk == ids[1]))))
            else:
                s.execute(delete(table).where(table.taxonomy_pk == ids[1]))
        s.execute(delete(Taxonomy).where(Taxonomy.id == ids[1]))
        s.commit()


def test_taxonomy_versions_kept_apart(engine, taxonomy_v2):
    v1_id, v2_id, v1, v2 = taxonomy_v2
    with Session(engine) as session:
        run = make_run(session, "r1")
        alice = make_user(session, "alice", password=None)
        tax1 = resolve_taxonomy(session, f"a2-failures@{v1}")
        tax2 = resolve_taxonomy(session, None)  # the default is now the latest version
        assert (tax1.id, tax2.id) == (v1_id, v2_id)
        with pytest.raises(AnnotationError, match=rf"'DD6' is not a mode of taxonomy a2-failures@{v1}"):
            save_annotation(session, alice, run, tax1, [dict(GOOD, mode="DD6")], status="submitted")
        a1 = save_annotation(session, alice, run, tax1, [GOOD], status="submitted")
        a2 = save_annotation(session, alice, run, tax2, [dict(GOOD, mode="DD6")], status="submitted")
        session.commit()
        assert a1.id != a2.id and (a1.taxonomy_pk, a2.taxonomy_pk) == (v1_id, v2_id)
        _, by_v1 = list_annotations(session, alice, taxonomy=f"a2-failures@{v1}")
        _, by_v2 = list_annotations(session, alice, taxonomy=f"a2-failures@{v2}")
        total_key, by_key = list_annotations(session, alice, taxonomy="a2-failures")
        assert [a.id for a in by_v1] == [a1.id] and [a.id for a in by_v2] == [a2.id]
        assert total_key == 2 and {a.id for a in by_key} == {a1.id, a2.id}
        # saving under v2 left the v1 labels alone
        assert session.exec(select(Label.mode).where(Label.annotation_id == a1.id)).all() == ["DD1"]


def test_visible_annotation_filter(session):
    run = make_run(session, "r1", audits=[{"source": "judge-l2", "mode": "VF1", "agent": "buyer_agent",
                                           "evidence": [2]}])
    alice, bob = make_user(session, "alice", password=None), make_user(session, "bob", password=None)
    rita = make_user(session, "rita", "reviewer", password=None)
    tax = resolve_taxonomy(session, None)
    a = save_annotation(session, alice, run, tax, [GOOD], status="submitted")
    b = save_annotation(session, bob, run, tax, [], no_failure=True, status="submitted")
    judge = session.exec(select(Annotation).where(Annotation.origin == "audit")).one()

    def visible(user):
        return {x.id for x in session.exec(select(Annotation).where(visible_annotation_filter(session, user))).all()}

    assert visible(alice) == {a.id}
    assert visible(bob) == {b.id}
    assert visible(rita) == {a.id, b.id, judge.id}
    set_revealed(session, True)
    session.flush()
    assert visible(bob) == {a.id, b.id, judge.id}
