"""The study lead's tools: assignment preview, batches and their undo, the progress dashboard.

Plain functions taking a session. `preview_assignments` runs the real `create_assignments` inside a
savepoint and rolls it back, so the preview is exactly what Assign will create.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from app.annotations.assignments import create_assignments
from app.annotations.models import Annotation, Assignment, Label
from app.auth.models import User
from app.runs.models import Run
from app.runs.service import RunFilter
from app.taxonomies.models import Taxonomy


def preview_assignments(session: Session, run_filter: RunFilter, sample_size: int | None, seed: int,
                        annotators: list[str], k: int, taxonomy: Taxonomy, batch: str | None,
                        **options: Any) -> dict[str, Any]:
    """What `create_assignments` would create with these inputs (and `options`: policy, params,
    study), without creating anything: {runs_matching, runs_selected, created (pairs),
    skipped_existing (already assigned), skipped_full, skipped_removed, per_annotator, policy,
    seed, strata, first_pairs, first_picks (run_id, inclusion_prob, stratum, score)}. Raises
    AnnotationError / PolicyError like create_assignments."""
    nested = session.begin_nested()
    try:
        result = create_assignments(session, run_filter, sample_size, seed, annotators, k, taxonomy, batch,
                                    **options)
    finally:
        nested.rollback()
    out = result.to_dict()
    out["first_pairs"] = [{"run_id": r, "annotator": a, "position": p} for r, a, p in result.pairs[:20]]
    out["first_picks"] = [{"run_id": r, "inclusion_prob": p, "stratum": h, "score": sc}
                          for r, p, h, sc in result.picks[:20]]
    return out


def default_batch_name() -> str:
    """A batch name for an assignment made without one, so that every batch can be undone."""
    return datetime.now(UTC).strftime("batch-%Y%m%d-%H%M%S")


def batches(session: Session, taxonomy: Taxonomy | None = None, study: Any = None) -> list[dict[str, Any]]:
    """One row per (batch, taxonomy): pairs, runs, annotators, pairs started (an annotation exists),
    pairs submitted, runs complete (every annotator assigned in the batch submitted: k of k), created,
    policy (and seed) it was drawn by. With `study`: that study's batches only."""
    q = select(Assignment, Taxonomy.key, Taxonomy.version).join(Taxonomy, Taxonomy.id == Assignment.taxonomy_pk)
    if taxonomy is not None:
        q = q.where(Assignment.taxonomy_pk == taxonomy.id)
    if study is not None:
        q = q.where(Assignment.study_id == study.id)
    rows = session.exec(q).all()
    states = {(a.run_pk, a.user_id, a.taxonomy_pk): a.status for a in session.exec(select(Annotation)).all()}
    groups: dict[tuple, dict[str, Any]] = {}
    per_run: dict[tuple, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for a, key, version in rows:
        g = groups.setdefault((a.batch, a.taxonomy_pk), {
            "batch": a.batch, "taxonomy": f"{key}@{version}", "taxonomy_pk": a.taxonomy_pk, "pairs": 0,
            "runs": set(), "annotators": set(), "started": 0, "submitted": 0, "created_at": a.created_at,
            "policy": a.policy, "seed": a.seed, "study_id": a.study_id})
        g["pairs"] += 1
        g["runs"].add(a.run_pk)
        g["annotators"].add(a.user_id)
        st = states.get((a.run_pk, a.user_id, a.taxonomy_pk))
        g["started"] += st is not None
        g["submitted"] += st == "submitted"
        g["created_at"] = min(g["created_at"], a.created_at)
        per_run[(a.batch, a.taxonomy_pk)][a.run_pk].append(st or "new")
    names = dict(session.exec(select(User.id, User.username)).all())
    out = []
    for gk, g in groups.items():
        runs = per_run[gk]
        out.append({**g, "runs": len(g["runs"]), "annotators": sorted(names.get(u, str(u)) for u in g["annotators"]),
                    "runs_complete": sum(1 for sts in runs.values() if all(s == "submitted" for s in sts)),
                    "k": max((len(s) for s in runs.values()), default=0)})
    out.sort(key=lambda g: g["created_at"], reverse=True)
    return out


def undo_batch(session: Session, batch: str, taxonomy_pk: int, study: Any = None) -> tuple[int, int]:
    """Remove the assignments of `batch` under that taxonomy version (in `study` when given)
    that nobody has started; keeps (and counts) those with an annotation, so no work is lost.
    Undoing is not removing by hand: a later fill may draw those runs again. Returns (removed, kept)."""
    from app.annotations.assignments import release_quota
    from app.studies.models import AssignmentBatch

    q = select(Assignment).where(Assignment.batch == batch, Assignment.taxonomy_pk == taxonomy_pk)
    if study is not None:
        q = q.where(Assignment.study_id == study.id)
    rows = session.exec(q).all()
    started = set(session.exec(select(Annotation.run_pk, Annotation.user_id).where(
        Annotation.taxonomy_pk == taxonomy_pk)).all())
    removed = kept = 0
    gone = [a for a in rows if (a.run_pk, a.user_id) not in started]
    kept = len(rows) - len(gone)
    release_quota(session, gone)
    for a in gone:
        session.delete(a)
        removed += 1
    if not kept:
        design = session.exec(select(AssignmentBatch).where(AssignmentBatch.name == batch,
                                                            AssignmentBatch.taxonomy_pk == taxonomy_pk)).first()
        if design is not None and (study is None or design.study_id == study.id):
            session.delete(design)
    session.flush()
    return removed, kept


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def time_on_task(session: Session, taxonomy: Taxonomy) -> list[dict[str, Any]]:
    """Per human annotator, over their submitted annotations under `taxonomy`: runs, median and
    p90 time per run and per label (seconds of visible time on the page, as the panel counts it)."""
    per_run: dict[str, list[float]] = defaultdict(list)
    per_label: dict[str, list[float]] = defaultdict(list)
    q = (select(User.username, Annotation.id, Annotation.time_ms).join(User, User.id == Annotation.user_id)
         .where(Annotation.taxonomy_pk == taxonomy.id, Annotation.status == "submitted", User.kind == "human"))
    ids = {}
    for name, ann_id, ms in session.exec(q).all():
        per_run[name].append((ms or 0) / 1000)
        ids[ann_id] = name
    if ids:
        for ann_id, ms in session.exec(select(Label.annotation_id, Label.time_ms).where(
                Label.annotation_id.in_(list(ids)))).all():
            per_label[ids[ann_id]].append((ms or 0) / 1000)
    return [{"annotator": n, "runs": len(per_run[n]),
             "run_median_s": _quantile(per_run[n], .5), "run_p90_s": _quantile(per_run[n], .9),
             "labels": len(per_label[n]),
             "label_median_s": _quantile(per_label[n], .5), "label_p90_s": _quantile(per_label[n], .9)}
            for n in sorted(per_run)]


def runs_per_day(session: Session, taxonomy: Taxonomy, days: int = 14) -> list[dict[str, Any]]:
    """Human annotations submitted per day (UTC) over the last `days` days, oldest first, zeros included."""
    since = datetime.now(UTC) - timedelta(days=days - 1)
    counts: dict[str, int] = defaultdict(int)
    stamps = session.exec(select(Annotation.submitted_at).join(User, User.id == Annotation.user_id).where(
        Annotation.taxonomy_pk == taxonomy.id, Annotation.status == "submitted", User.kind == "human",
        Annotation.submitted_at.is_not(None))).all()
    for ts in stamps:
        ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
        if ts >= since.replace(hour=0, minute=0, second=0, microsecond=0):
            counts[ts.date().isoformat()] += 1
    out = []
    for i in range(days):
        d = (since + timedelta(days=i)).date().isoformat()
        out.append({"day": d, "submitted": counts.get(d, 0)})
    return out


def n_runs(session: Session) -> int:
    return session.exec(select(func.count()).select_from(Run)).one()
