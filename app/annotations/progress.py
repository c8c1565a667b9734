"""Annotation progress under one taxonomy version: per annotator and per run.

Per annotator (humans and `judge:*` users): assigned, drafts, submitted, remaining (assigned runs
not yet submitted). Per run: `unassigned` (nobody assigned), `in_progress` (some assigned
annotators have not submitted), `submitted` (all n assigned annotators submitted),
`adjudicated` (gold labels final); with `n_assigned`, `n_submitted` (of the assigned) and the
number of judges that labelled it.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import func, literal
from sqlmodel import Session, select

from app.annotations.models import Annotation, Assignment, GoldRun
from app.annotations.service import tax_ref
from app.auth.models import User
from app.runs.models import Run
from app.taxonomies.models import Taxonomy

RUN_STATES = ("unassigned", "in_progress", "submitted", "adjudicated")


def _in(col, scope):
    """`col IN scope` (a study's run-id subquery), always true without a scope."""
    from app.studies.service import scope_condition

    return scope_condition(col, scope)


def annotator_progress(session: Session, tax: Taxonomy, scope: Any = None, study_id: int | None = None
                       ) -> list[dict[str, Any]]:
    """Returns one row per annotator with assignments or annotations under `tax` (plus active
    human annotators with none): {username, kind, role, is_active, assigned, drafts, submitted,
    remaining, submitted_unassigned}. Humans first, then judges, each by name. With `scope` (a
    study's run-id subquery) only the study's runs count, and only its members are listed besides
    those with work in it."""
    assigned = dict(session.exec(select(Assignment.user_id, func.count()).where(
        Assignment.taxonomy_pk == tax.id, _in(Assignment.run_pk, scope)).group_by(Assignment.user_id)).all())
    counts: dict[tuple[int, str], int] = {}
    for uid, status, n in session.exec(select(Annotation.user_id, Annotation.status, func.count())
                                       .where(Annotation.taxonomy_pk == tax.id, _in(Annotation.run_pk, scope))
                                       .group_by(Annotation.user_id, Annotation.status)).all():
        counts[(uid, status)] = n
    # submitted annotations on runs assigned to the same user (what "remaining" subtracts)
    done_assigned = dict(session.exec(
        select(Assignment.user_id, func.count())
        .join(Annotation, (Annotation.run_pk == Assignment.run_pk) & (Annotation.user_id == Assignment.user_id)
              & (Annotation.taxonomy_pk == Assignment.taxonomy_pk))
        .where(Assignment.taxonomy_pk == tax.id, Annotation.status == "submitted", _in(Assignment.run_pk, scope))
        .group_by(Assignment.user_id)).all())
    ids = set(assigned) | {uid for uid, _ in counts}
    idle = (User.kind == "human") & (User.role == "annotator") & User.is_active
    if scope is not None and study_id is not None:
        from app.studies.models import StudyMember

        idle = idle & User.id.in_(select(StudyMember.user_id).where(StudyMember.study_id == study_id))
    elif scope is not None:
        idle = literal(False)
    users = session.exec(select(User).where(User.id.in_(ids) | idle)).all()
    rows = []
    for u in users:
        n_assigned = assigned.get(u.id, 0)
        submitted = counts.get((u.id, "submitted"), 0)
        rows.append({"username": u.username, "kind": u.kind, "source_name": u.source_name, "role": u.role,
                     "is_active": u.is_active,
                     "assigned": n_assigned, "drafts": counts.get((u.id, "draft"), 0), "submitted": submitted,
                     "remaining": n_assigned - done_assigned.get(u.id, 0),
                     "submitted_unassigned": submitted - done_assigned.get(u.id, 0)})
    rows.sort(key=lambda r: (r["kind"] != "human", r["username"]))
    return rows


def _run_state(adjudicated: bool, n_assigned: int, n_submitted: int) -> str:
    if adjudicated:
        return "adjudicated"
    if n_assigned == 0:
        return "unassigned"
    return "submitted" if n_submitted >= n_assigned else "in_progress"


def _state_label(state: str, n_assigned: int, n_submitted: int) -> str:
    if state == "submitted":
        return f"submitted by {n_submitted} of {n_assigned}"
    if state == "in_progress":
        return f"in progress: submitted by {n_submitted} of {n_assigned}"
    return state


def run_progress(session: Session, tax: Taxonomy, page: int = 1, page_size: int = 100,
                 state: str | None = None, scope: Any = None) -> dict[str, Any]:
    """Returns {"counts": {state: n for every run in the database}, "total": rows matching,
    "items": one page of rows for runs that have assignments, annotations or gold under `tax`}.

    Row: {run_id, state, n_assigned, n_submitted (assigned annotators who submitted), n_drafts,
    n_judges (judge annotations), label ("submitted by 2 of 3")}. `state` filters the rows.
    """
    if state is not None and state not in RUN_STATES:
        raise ValueError(f"state: must be one of {', '.join(RUN_STATES)}, got {state!r}")
    n_assigned = dict(session.exec(select(Assignment.run_pk, func.count()).where(
        Assignment.taxonomy_pk == tax.id, _in(Assignment.run_pk, scope)).group_by(Assignment.run_pk)).all())
    n_submitted = dict(session.exec(
        select(Assignment.run_pk, func.count())
        .join(Annotation, (Annotation.run_pk == Assignment.run_pk) & (Annotation.user_id == Assignment.user_id)
              & (Annotation.taxonomy_pk == Assignment.taxonomy_pk))
        .where(Assignment.taxonomy_pk == tax.id, Annotation.status == "submitted", _in(Assignment.run_pk, scope))
        .group_by(Assignment.run_pk)).all())
    n_drafts: dict[int, int] = {}
    n_judges: dict[int, int] = {}
    for run_pk, kind, status, n in session.exec(
            select(Annotation.run_pk, User.kind, Annotation.status, func.count())
            .join(User, User.id == Annotation.user_id).where(Annotation.taxonomy_pk == tax.id,
                                                             _in(Annotation.run_pk, scope))
            .group_by(Annotation.run_pk, User.kind, Annotation.status)).all():
        if kind != "human" and status == "submitted":  # judges and dataset sources: not people
            n_judges[run_pk] = n_judges.get(run_pk, 0) + n
        elif kind == "human" and status == "draft":
            n_drafts[run_pk] = n_drafts.get(run_pk, 0) + n
    adjudicated = set(session.exec(select(GoldRun.run_pk).where(GoldRun.taxonomy_pk == tax.id,
                                                                GoldRun.status == "adjudicated",
                                                                _in(GoldRun.run_pk, scope))).all())
    total_runs = session.exec(select(func.count()).select_from(Run).where(_in(Run.id, scope))).one()
    counts = {s: 0 for s in RUN_STATES}
    active = set(n_assigned) | set(n_drafts) | set(n_judges) | adjudicated | set(session.exec(
        select(Annotation.run_pk).where(Annotation.taxonomy_pk == tax.id, _in(Annotation.run_pk, scope)).distinct()).all())
    names = dict(session.exec(select(Run.id, Run.run_id).where(Run.id.in_(active))).all()) if active else {}
    rows = []
    for run_pk in active:
        a, s = n_assigned.get(run_pk, 0), n_submitted.get(run_pk, 0)
        st = _run_state(run_pk in adjudicated, a, s)
        counts[st] += 1
        rows.append({"run_id": names[run_pk], "state": st, "n_assigned": a, "n_submitted": s,
                     "n_drafts": n_drafts.get(run_pk, 0), "n_judges": n_judges.get(run_pk, 0),
                     "label": _state_label(st, a, s)})
    counts["unassigned"] += total_runs - len(active)
    if state is not None:
        rows = [r for r in rows if r["state"] == state]
    rows.sort(key=lambda r: r["run_id"])
    start = (page - 1) * page_size
    return {"counts": counts, "total": len(rows), "page": page, "page_size": page_size,
            "items": rows[start:start + page_size]}


def progress(session: Session, tax: Taxonomy, page: int = 1, page_size: int = 100,
             state: str | None = None, study: Any = None) -> dict[str, Any]:
    """Returns {"taxonomy": {id, key, version, ref}, "annotators": annotator_progress(...),
    "runs": run_progress(...)} for one taxonomy version (within `study`'s runs when given)."""
    from app.studies.service import study_run_ids

    scope = study_run_ids(session, study)
    out = {"taxonomy": {"id": tax.id, "key": tax.key, "version": tax.version, "ref": tax_ref(tax)},
           "annotators": annotator_progress(session, tax, scope, study.id if study is not None else None),
           "runs": run_progress(session, tax, page, page_size, state, scope)}
    if study is not None:
        out["study"] = study.name
    return out
