"""Queue rules: stored fills that keep a study's queue topped up as runs arrive.

A rule names a policy (`random` with a Bernoulli `rate`: each run is taken with that probability,
decided by a seeded hash of its run id, so the inclusion probability of every run is the rate
whenever it arrived; `all`; `flagged` by a detector or judge), k and the annotators. It is
applied after each import (`app.ingest.loader.load_items` calls `after_import` once the import
has committed: one query when no rule is enabled) and on demand (`a2annotate study fill`,
`POST /api/v1/studies/{name}/fill`). Its assignments form one growing batch named
`<study>:<rule>`; a run that already has k annotators in the study is left alone and a run
removed from an annotator by hand is not given back.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from app.annotations.assignments import AssignmentResult, _frame, create_assignments
from app.annotations.policies import PolicyError
from app.runs.models import Run, utcnow
from app.runs.service import RunFilter
from app.studies.models import QueueRule, Study
from app.studies.service import StudyError
from app.taxonomies.models import Taxonomy

RULE_POLICIES = ("random", "all", "flagged")


def add_rule(session: Session, study: Study, name: str, *, policy: str, k: int, annotators: list[str],
             seed: int = 0, rate: float | None = None, source: str | None = None) -> QueueRule:
    """Store a rule (the caller commits). `random` needs `rate` in (0, 1]; `flagged` takes an
    optional `source` (a detector or judge; default every one)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise StudyError("name", "must be a non-empty rule name of at most 100 characters")
    if policy not in RULE_POLICIES:
        raise StudyError("policy", f"a rule fills by one of {', '.join(RULE_POLICIES)}, not {policy!r}")
    params: dict[str, Any] = {}
    if policy == "random":
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
            raise StudyError("rate", f"a random rule needs a rate in (0, 1], got {rate!r}")
        params["rate"] = float(rate)
    if policy == "flagged" and source:
        params["source"] = source
    if not annotators:
        raise StudyError("annotators", "name at least one annotator")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(annotators):
        raise StudyError("k", f"must be between 1 and the number of annotators ({len(annotators)}), got {k!r}")
    if session.exec(select(QueueRule).where(QueueRule.study_id == study.id, QueueRule.name == name)).first():
        raise StudyError("name", f"study {study.name!r} has a rule named {name!r} already")
    rule = QueueRule(study_id=study.id, name=name.strip(), policy=policy, seed=int(seed), k=k,
                     annotators=list(annotators), params=params)
    session.add(rule)
    session.flush()
    return rule


def rule_dict(rule: QueueRule) -> dict[str, Any]:
    return {"name": rule.name, "policy": rule.policy, "seed": rule.seed, "k": rule.k,
            "annotators": list(rule.annotators), "params": dict(rule.params or {}), "enabled": rule.enabled,
            "last_applied_at": rule.last_applied_at.isoformat() if rule.last_applied_at else None}


def apply_rule(session: Session, rule: QueueRule, run_pks: set[int] | None = None) -> AssignmentResult:
    """Apply one rule to the study's runs (or to those of `run_pks`); the caller commits."""
    study = session.get(Study, rule.study_id)
    tax = session.get(Taxonomy, study.taxonomy_pk)
    frame = _frame(session, RunFilter(), study)
    if run_pks is not None:
        frame = {rid: pk for rid, pk in frame.items() if pk in run_pks}
    result = create_assignments(session, RunFilter(), None, rule.seed, list(rule.annotators), rule.k, tax,
                                batch=f"{study.name}:{rule.name}", policy=rule.policy, params=dict(rule.params or {}),
                                study=study, rule_id=rule.id, frame=frame)
    rule.last_applied_at = utcnow()
    session.add(rule)
    return result


def apply_rules(session: Session, study: Study | None = None, run_pks: set[int] | None = None,
                progress: Callable[[int, int], None] | None = None) -> dict[str, dict[str, Any]]:
    """Apply every enabled rule (of `study`, or of every study); returns {"<study>:<rule>": result}."""
    q = select(QueueRule).where(QueueRule.enabled.is_(True)).order_by(QueueRule.study_id, QueueRule.name)
    if study is not None:
        q = q.where(QueueRule.study_id == study.id)
    rules = list(session.exec(q).all())
    out = {}
    for i, rule in enumerate(rules):
        res = apply_rule(session, rule, run_pks)
        out[res.batch] = res.to_dict()
        if progress is not None:
            progress(i + 1, len(rules))
    return out


def max_run_pk(session: Session) -> int:
    return session.exec(select(func.coalesce(func.max(Run.id), 0))).one()


def after_import(engine, first_new_pk: int) -> None:
    """Top up every study's queue with the runs stored since `first_new_pk` (an import's new
    runs): one count query when no rule is enabled; a failing rule is logged, never fails the
    import (its runs are committed already)."""
    import logging

    from app.core.db import write_session

    with Session(engine) as probe:
        if not probe.exec(select(func.count()).select_from(QueueRule).where(QueueRule.enabled.is_(True))).one():
            return
    session = write_session(engine)
    try:
        new = set(session.exec(select(Run.id).where(Run.id > first_new_pk)).all())
        if new:
            apply_rules(session, run_pks=new)
        session.commit()
    except (PolicyError, StudyError, ValueError, LookupError) as exc:
        session.rollback()
        logging.getLogger(__name__).warning("queue rules not applied after the import: %s", exc)
    finally:
        session.close()
