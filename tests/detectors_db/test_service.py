"""Detectors on stored runs (SQLite and PostgreSQL): stored as detector:<name>, idempotent, other
annotations untouched, a raising detector reported, run on import when configured, scores."""
from __future__ import annotations

import pytest
from sqlmodel import Session, select

from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.annotations.service import resolve_taxonomy, save_annotation
from app.auth.models import User
from app.core.config import get_settings
from app.detectors import builtin_detectors, load_registry
from app.detectors import service as det
from app.detectors.base import Detector
from app.ingest.canonical import normalize_run
from app.ingest.items import ImportItem
from app.ingest.loader import _after_store_default, load_items, store_run
from app.runs.service import get_run
from tests.annotations.factories import make_user

from .data import leaky_run


def _store(session, run):
    from app.annotations.service import sync_audit_annotations

    store_run(session, normalize_run(run), after_store=sync_audit_annotations)
    session.flush()


def _anns(session, username):
    return session.exec(select(Annotation).join(User, User.id == Annotation.user_id)
                        .where(User.username == username).order_by(Annotation.run_pk)).all()


def _labels(session, ann):
    return session.exec(select(Label).where(Label.annotation_id == ann.id).order_by(Label.id)).all()


@pytest.fixture
def stored(engine):
    with Session(engine) as s:
        _store(s, leaky_run("r1", audits=[{"source": "judge-l2", "mode": "VF1", "agent": "buyer_agent",
                                           "evidence": [1]}]))
        _store(s, leaky_run("r2", leak=False))
        alice = make_user(s, "alice")
        tax = resolve_taxonomy(s, None)
        save_annotation(s, alice, get_run(s, "r1"), tax, [{"mode": "GR3", "agent": "seller_agent", "evidence": [3]}],
                        status="submitted")
        s.commit()
    return engine


def test_detect_stores_labels_idempotently_and_touches_nothing_else(stored):
    with Session(stored) as s:
        before = {a.id: (a.user_id, [(lab.mode, lab.agent) for lab in _labels(s, a)])
                  for a in s.exec(select(Annotation)).all()}
        summary = det.detect_all(s)
        assert summary.runs == 2 and summary.errors == []
        assert summary.labels["leak"] == 1 and summary.flagged_runs["leak"] == 1
        [leak1, leak2] = _anns(s, "detector:leak")
        assert (leak1.status, leak1.origin, leak1.source_version, leak1.no_failure) == ("submitted", "detector", "1", False)
        assert leak2.no_failure is True  # it ran and found nothing: explicit silence
        [lab] = _labels(s, leak1)
        assert (lab.mode, lab.agent, lab.evidence, lab.principals) == ("CF1", "buyer_agent", [2], ["buyer"])
        assert "budget" in lab.note
        user = s.exec(select(User).where(User.username == "detector:leak")).one()
        assert user.kind == "judge" and user.password_hash is None
        n_ann, n_lab = len(s.exec(select(Annotation)).all()), len(s.exec(select(Label)).all())

        again = det.detect_all(s)
        assert again.to_dict()["labels"] == summary.to_dict()["labels"]
        assert (len(s.exec(select(Annotation)).all()), len(s.exec(select(Label)).all())) == (n_ann, n_lab)
        # human and judge annotations are exactly as before (same rows, same labels)
        for aid, (uid, labels) in before.items():
            a = s.get(Annotation, aid)
            assert a is not None and a.user_id == uid and [(x.mode, x.agent) for x in _labels(s, a)] == labels


def test_only_and_run_filters(stored):
    with Session(stored) as s:
        summary = det.detect_all(s, only=["handoff"], run_ids=["r2"])
        assert summary.runs == 1 and list(summary.labels) == ["handoff"]
        assert len(_anns(s, "detector:handoff")) == 1 and _anns(s, "detector:leak") == []
        with pytest.raises(det.DetectError, match="unknown detector 'nope'"):
            det.detect_all(s, only=["nope"])
        with pytest.raises(det.DetectError, match="no run 'zz'"):
            det.detect_all(s, run_ids=["zz"])


def test_a_detector_raising_on_one_run_is_reported_and_the_others_go_on(stored):
    def picky(run):
        if run["run_id"] == "r1":
            raise ValueError("cannot read r1")
        return []

    reg = load_registry("", use_entry_points=False)
    reg.detectors.insert(0, Detector(name="picky", version="9", key="picky", description="", detect=picky))
    with Session(stored) as s:
        summary = det.detect_all(s, reg=reg)
        assert summary.runs == 2
        assert summary.errors == [{"run_id": "r1", "detector": "picky", "error": summary.errors[0]["error"]}]
        assert summary.errors[0]["error"].startswith("ValueError: cannot read r1")
        assert [a.run_pk for a in _anns(s, "detector:picky")] == [get_run(s, "r2").id]
        assert len(_anns(s, "detector:leak")) == 2 and len(_anns(s, "detector:divergence")) == 2


def test_run_on_import_only_when_configured(engine, monkeypatch):
    items = [ImportItem(run=normalize_run(leaky_run("imp1")), source="x.json")]
    load_items(engine, items, after_store=_after_store_default)
    with Session(engine) as s:
        assert _anns(s, "detector:leak") == []  # off by default
    monkeypatch.setattr(get_settings(), "detectors_on_import", True)
    items = [ImportItem(run=normalize_run(leaky_run("imp2")), source="x.json")]
    summary = load_items(engine, items, after_store=_after_store_default)
    assert summary.imported == 1
    with Session(engine) as s:
        [a] = _anns(s, "detector:leak")
        assert a.run_pk == get_run(s, "imp2").id and [x.mode for x in _labels(s, a)] == ["CF1"]
        assert {u for (u,) in s.execute(select(User.username).where(User.username.like("detector:%")))} == \
            {f"detector:{d.name}" for d in builtin_detectors()}


def test_scores_against_truth_and_gold(stored):
    with Session(stored) as s:
        det.detect_all(s)
        rep = det.score_report(s, reference="truth", n_boot=50)
        assert rep["n_reference_runs"] == 2
        leak = next(x for x in rep["sources"] if x["source"] == "detector:leak")
        assert leak["versions"] == ["1"] and [m["mode"] for m in leak["modes"]] == ["CF1"]
        assert (leak["modes"][0]["tp"], leak["modes"][0]["fp"], leak["modes"][0]["fn"]) == (1, 0, 0)
        div = next(x for x in rep["sources"] if x["source"] == "detector:divergence")
        assert div["modes"][0]["tp"] == 2  # both runs diverge
        # gold: r1 adjudicated with only GR3 -> the leak label is a false positive against gold
        tax = resolve_taxonomy(s, None)
        gold = GoldRun(run_pk=get_run(s, "r1").id, taxonomy_pk=tax.id, status="adjudicated")
        s.add(gold)
        s.flush()
        s.add(GoldLabel(gold_run_id=gold.id, mode="GR3", agent="seller_agent", evidence=[3], origin="adjudication"))
        s.flush()
        rep = det.score_report(s, reference="gold", level="agent", n_boot=0)
        assert rep["n_reference_runs"] == 1
        leak = next(x for x in rep["sources"] if x["source"] == "detector:leak")["modes"][0]
        assert (leak["tp"], leak["fp"], leak["precision"]) == (0, 1, 0.0)
        humans = next(x for x in rep["sources"] if x["source"] == "humans, hints off")
        gr3 = next(m for m in humans["modes"] if m["mode"] == "GR3")
        assert (gr3["tp"], gr3["fp"], gr3["fn"]) == (1, 0, 0)
        with pytest.raises(det.DetectError):
            det.score_report(s, reference="nope")


def test_detector_names_are_not_human_accounts(engine):
    from app.auth.service import AuthError, create_user

    with Session(engine) as s:
        with pytest.raises(AuthError, match="reserved for detectors"):
            create_user(s, "detector:leak", "annotator")
        s.add(User(username="detector:leak", role="admin", kind="human"))  # made some other way
        _store(s, leaky_run("r1"))
        summary = det.detect_all(s)
        assert summary.errors and "is a human account" in summary.errors[0]["error"]
        assert s.exec(select(Annotation).where(Annotation.origin == "detector")).all() == []


def test_hinted_and_unhinted_agreement_are_computed_apart(engine):
    from app.annotations.models import Assignment

    with Session(engine) as s:
        for r in ("r1", "r2", "r3"):
            _store(s, leaky_run(r))
        tax = resolve_taxonomy(s, None)
        users = {n: make_user(s, n) for n in ("h1", "h2", "u1", "u2")}
        for n, u in users.items():
            for r in ("r1", "r2", "r3"):
                s.add(Assignment(run_pk=get_run(s, r).id, user_id=u.id, taxonomy_pk=tax.id,
                                 batch="pilot" if n.startswith("h") else "control"))
        s.flush()
        det.set_hints(s, "pilot", True)
        cf1 = {"mode": "CF1", "agent": "buyer_agent", "evidence": [2]}
        gr3 = {"mode": "GR3", "agent": "seller_agent", "evidence": [3]}
        plan = {"h1": [[cf1], [cf1], [gr3]], "h2": [[cf1], [cf1], [gr3]],   # hinted pair: identical
                "u1": [[cf1], [gr3], [cf1]], "u2": [[gr3], [cf1], [gr3]]}   # unhinted pair: always apart
        for n, per_run in plan.items():
            for r, labels in zip(("r1", "r2", "r3"), per_run):
                save_annotation(s, users[n], get_run(s, r), tax, labels, status="submitted")
        s.flush()
        assert {a.hints_on for a in s.exec(select(Annotation).where(Annotation.origin == "human"))} == {True, False}
        res = det.hinted_agreement(s, n_boot=0)
        on, off = res["hints on"], res["hints off"]
        assert on["n_submissions"] == off["n_submissions"] == 6
        assert on["overall"]["percent"]["value"] == pytest.approx(1.0)
        assert off["overall"]["percent"]["value"] < 1.0
        assert on["overall"]["krippendorff_alpha"]["value"] > off["overall"]["krippendorff_alpha"]["value"]
