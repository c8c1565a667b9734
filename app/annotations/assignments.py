"""Assigning runs to annotators: a seeded random sample, k annotators per run, balanced loads.

`create_assignments` is reproducible: the filtered runs are sorted by run_id in Python (so the
database's collation does not matter), annotators are sorted by name, and one `random.Random(seed)`
draws the sample, the run order and the annotator rotation. Same database content and same inputs
give the same assignment on SQLite and PostgreSQL.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from app.annotations.models import Annotation, Assignment
from app.annotations.service import AnnotationError, tax_ref
from app.auth.models import User
from app.runs.models import Event, Run, Scenario
from app.runs.service import RunFilter, filtered_runs_query
from app.taxonomies.models import Taxonomy


@dataclass
class AssignmentResult:
    """What `create_assignments` did. `pairs` lists (run_id, username, position) created, in order."""

    taxonomy: str
    batch: str | None
    runs_matching: int = 0
    runs_selected: int = 0
    created: int = 0
    skipped_existing: int = 0
    per_annotator: dict[str, int] = field(default_factory=dict)
    pairs: list[tuple[str, str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Returns the JSON shape of the result (without the full pair list)."""
        return {"taxonomy": self.taxonomy, "batch": self.batch, "runs_matching": self.runs_matching,
                "runs_selected": self.runs_selected, "created": self.created,
                "skipped_existing": self.skipped_existing, "per_annotator": dict(self.per_annotator)}


def plan_assignments(run_ids: Sequence[str], annotators: Sequence[str], k: int, sample_size: int | None,
                     seed: int) -> list[tuple[str, list[str]]]:
    """Pure planning step. Returns [(run_id, [k distinct annotators])] in queue order.

    Runs are sorted, then sampled (`sample_size` of them, or all) and shuffled with
    `random.Random(seed)`; annotators are sorted and shuffled by the same RNG, then dealt
    round-robin: run i gets annotators (i*k .. i*k+k-1) mod n, so loads differ by at most one.
    """
    n = len(annotators)
    if k < 1:
        raise AnnotationError("k", f"must be at least 1, got {k}")
    if n == 0:
        raise AnnotationError("annotators", "name at least one annotator")
    if k > n:
        raise AnnotationError("k", f"k={k} annotators per run, but only {n} annotator(s) given")
    if sample_size is not None and sample_size < 1:
        raise AnnotationError("sample_size", f"must be at least 1 (or empty for all runs), got {sample_size}")
    rng = random.Random(seed)
    runs = sorted(run_ids)
    if sample_size is not None and sample_size < len(runs):
        chosen = rng.sample(runs, sample_size)  # random order already
    else:
        chosen = list(runs)
        rng.shuffle(chosen)
    people = sorted(annotators)
    rng.shuffle(people)
    return [(rid, [people[(i * k + j) % n] for j in range(k)]) for i, rid in enumerate(chosen)]


def _annotator_users(session: Session, names: Sequence[str]) -> list[User]:
    seen: set[str] = set()
    users = []
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            raise AnnotationError(f"annotators[{i}]", f"must be a user name, got {name!r}")
        if name in seen:
            raise AnnotationError(f"annotators[{i}]", f"{name!r} is listed twice")
        seen.add(name)
        user = session.exec(select(User).where(User.username == name)).first()
        if user is None:
            raise AnnotationError(f"annotators[{i}]", f"no user {name!r}")
        if user.kind != "human":
            raise AnnotationError(f"annotators[{i}]", f"{name!r} is {'an automated judge' if user.kind == 'judge' else 'a dataset source'}, not a person: it cannot be assigned runs")
        if not user.is_active:
            raise AnnotationError(f"annotators[{i}]", f"user {name!r} is deactivated")
        users.append(user)
    return users


def create_assignments(session: Session, run_filter: RunFilter, sample_size: int | None, seed: int,
                       annotators: Sequence[str], k: int, taxonomy: Taxonomy,
                       batch: str | None = None) -> AssignmentResult:
    """Assign a seeded random sample of the runs matching `run_filter` to `k` of `annotators` each.

    Each annotator's new runs are appended to their queue (positions after their current last)
    in the sampled random order, so runs shared by several annotators come up at about the same
    time for all of them. (run, annotator) pairs already assigned under `taxonomy` are skipped.
    Returns an AssignmentResult; raises AnnotationError for bad inputs (k larger than the number
    of annotators, unknown or inactive users, non-positive sample size). The caller commits.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise AnnotationError("seed", f"must be an integer, got {seed!r}")
    users = _annotator_users(session, annotators)
    by_name = {u.username: u for u in users}
    runs = {r.run_id: r.id for r in session.exec(filtered_runs_query(run_filter)).all()}
    from app.capture.service import finalize_idle, recording_run_ids

    finalize_idle(session)
    for rid in recording_run_ids(session, list(runs)):  # live runs are assigned once final
        del runs[rid]
    plan = plan_assignments(list(runs), list(by_name), k, sample_size, seed)
    result = AssignmentResult(taxonomy=tax_ref(taxonomy), batch=batch, runs_matching=len(runs),
                              runs_selected=len(plan), per_annotator={u.username: 0 for u in users})
    existing = set(session.exec(
        select(Assignment.run_pk, Assignment.user_id)
        .where(Assignment.taxonomy_pk == taxonomy.id, Assignment.user_id.in_([u.id for u in users]))).all())
    next_pos = {uid: (pos if pos is not None else -1) + 1 for uid, pos in session.exec(
        select(Assignment.user_id, func.max(Assignment.position))
        .where(Assignment.user_id.in_([u.id for u in users])).group_by(Assignment.user_id)).all()}
    for run_id, names in plan:
        run_pk = runs[run_id]
        for name in names:
            user = by_name[name]
            if (run_pk, user.id) in existing:
                result.skipped_existing += 1
                continue
            pos = next_pos.get(user.id, 0)
            next_pos[user.id] = pos + 1
            session.add(Assignment(run_pk=run_pk, user_id=user.id, taxonomy_pk=taxonomy.id, position=pos,
                                   batch=batch))
            result.created += 1
            result.per_annotator[name] += 1
            result.pairs.append((run_id, name, pos))
    session.flush()
    return result


# --------------------------------------------------------------------------- queues

def user_queue(session: Session, user: User, taxonomy: Taxonomy | None = None) -> dict[str, Any]:
    """Returns `user`'s queue: counts `assigned`, `drafts`, `submitted`, `remaining`, `set_aside`
    and `items` [{run_id, position, taxonomy, status: new|draft|submitted|skipped|flagged, batch,
    reason, title, family, n_events}] in queue order (all taxonomy versions unless `taxonomy` is
    given; title and family are the run's scenario's, n_events its event count). A run the user
    skipped or flagged (app.flags, not yet resolved by a reviewer) and not submitted is
    `skipped` / `flagged`, with the reason."""
    from app.flags.service import open_flags_of

    q = (select(Assignment, Run.run_id, Taxonomy).join(Run, Run.id == Assignment.run_pk)
         .join(Taxonomy, Taxonomy.id == Assignment.taxonomy_pk).where(Assignment.user_id == user.id))
    if taxonomy is not None:
        q = q.where(Assignment.taxonomy_pk == taxonomy.id)
    rows = session.exec(q.order_by(Assignment.position, Assignment.id)).all()
    pks = sorted({a.run_pk for a, _, _ in rows})
    about: dict[int, tuple[str | None, str | None]] = {}
    n_events: dict[int, int] = {}
    for start in range(0, len(pks), 500):
        part = pks[start:start + 500]
        about.update({pk: (title, family) for pk, title, family in session.exec(
            select(Run.id, Scenario.title, Scenario.family).join(Scenario, Scenario.id == Run.scenario_id)
            .where(Run.id.in_(part))).all()})
        n_events.update(dict(session.exec(select(Event.run_pk, func.count(Event.id))
                                          .where(Event.run_pk.in_(part)).group_by(Event.run_pk)).all()))
    states = {(a.run_pk, a.taxonomy_pk): a.status for a in session.exec(
        select(Annotation).where(Annotation.user_id == user.id)).all()}
    flags = open_flags_of(session, user)
    items = []
    for a, run_id, tax in rows:
        st = states.get((a.run_pk, a.taxonomy_pk))
        flag = flags.get((a.run_pk, a.taxonomy_pk))
        if flag is not None and st != "submitted":
            st = "skipped" if flag.kind == "skip" else "flagged"
        items.append({"run_id": run_id, "position": a.position,
                      "taxonomy": {"id": tax.id, "key": tax.key, "version": tax.version},
                      "status": st or "new", "batch": a.batch, "reason": flag.reason if flag is not None else None,
                      "title": about.get(a.run_pk, (None, None))[0], "family": about.get(a.run_pk, (None, None))[1],
                      "n_events": n_events.get(a.run_pk, 0)})
    submitted = sum(1 for i in items if i["status"] == "submitted")
    drafts = sum(1 for i in items if i["status"] == "draft")
    aside = sum(1 for i in items if i["status"] in ("skipped", "flagged"))
    return {"assigned": len(items), "drafts": drafts, "submitted": submitted,
            "remaining": len(items) - submitted, "set_aside": aside, "items": items}


def next_in_queue(session: Session, user: User, taxonomy: Taxonomy | None = None) -> dict[str, Any] | None:
    """Returns the first queue item (by position) that `user` has not submitted, skipped or
    flagged, or None."""
    for item in user_queue(session, user, taxonomy)["items"]:
        if item["status"] not in ("submitted", "skipped", "flagged"):
            return item
    return None
