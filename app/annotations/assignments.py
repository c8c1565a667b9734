"""Assigning runs to annotators: a batch drawn by a sampling policy, k annotators per run, balanced loads.

A batch is drawn by a policy (`app.annotations.policies`: random, the default, stratified,
disagreement, uncertainty, flagged, all) from a frame (the runs matching the filter, within the
study when one is given; runs still recording are left out), then dealt to annotators. Every
(run, annotator) row records the study, the policy, the seed, the run's inclusion probability
and its stratum; the batch's design (frame size, strata) is an `assignment_batch` row.

"k distinct annotators per run" holds in the database: distinct by the unique constraint on
(run, annotator, taxonomy version), at most k by the per-run counter `run_quota` (one row per
study, taxonomy version and run), which a fill locks (in run order, so concurrent fills never
deadlock) and raises with `UPDATE ... SET n = n + m WHERE n + m <= k`, a CHECK constraint
holding n <= k underneath. A (run, annotator) pair removed by hand (`remove_assignment`) is kept
in `assignment_removal` and no later fill gives it back.

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

from sqlalchemy import func, update
from sqlmodel import Session, select

from app.annotations import policies
from app.annotations.models import Annotation, Assignment, Label
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
    #: pairs not made because the run already had k annotators in this study (the quota)
    skipped_full: int = 0
    #: pairs not made because the lead removed that run from that annotator before
    skipped_removed: int = 0
    policy: str = "random"
    seed: int | None = None
    study: str | None = None
    strata: dict[str, Any] = field(default_factory=dict)
    #: [(run_id, inclusion probability, stratum, score)] in queue order
    picks: list[tuple[str, float, str | None, float | None]] = field(default_factory=list)
    per_annotator: dict[str, int] = field(default_factory=dict)
    pairs: list[tuple[str, str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Returns the JSON shape of the result (without the full pair list)."""
        return {"taxonomy": self.taxonomy, "batch": self.batch, "runs_matching": self.runs_matching,
                "runs_selected": self.runs_selected, "created": self.created,
                "skipped_existing": self.skipped_existing, "skipped_full": self.skipped_full,
                "skipped_removed": self.skipped_removed, "per_annotator": dict(self.per_annotator),
                "policy": self.policy, "seed": self.seed, "study": self.study, "strata": dict(self.strata)}


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




def _frame(session: Session, run_filter: RunFilter, study: Any) -> dict[str, int]:
    """run_id -> run pk of the runs a batch may draw from: matching the filter, in the study when
    given, and not still recording (live runs are assigned once final)."""
    from app.capture.service import finalize_idle, recording_run_ids
    from app.studies.service import study_run_ids

    q = filtered_runs_query(run_filter)
    scope = study_run_ids(session, study)
    if scope is not None:
        q = q.where(Run.id.in_(scope))
    runs = {r.run_id: r.id for r in session.exec(q).all()}
    finalize_idle(session)
    for rid in recording_run_ids(session, list(runs)):
        del runs[rid]
    return runs


#: run fields a stratified batch can split by (besides `detector:<name>` and `judge:<name>`)
STRATUM_FIELDS = ("family", "scenario", "alignment", "status", "condition", "model", "harness", "source")


def run_strata(session: Session, tax: Taxonomy, runs: dict[str, int], by: str) -> dict[str, str]:
    """run_id -> stratum for `by`: a run field (STRATUM_FIELDS; for model and harness the run's
    distinct values joined by `+`), `detector:<name>` (its verdict: flagged | clear | not run) or
    `judge:<name>` (its predicted mode: the most confident label's mode, `no_failure`, or
    `not judged`)."""
    from app.runs.models import Agent, Scenario

    pk_to_id = {pk: rid for rid, pk in runs.items()}
    if not isinstance(by, str) or not by:
        raise policies.PolicyError("stratify_by", f"name a run field ({', '.join(STRATUM_FIELDS)}), "
                                                  "detector:<name> or judge:<name>")
    out: dict[str, str] = {}
    if by.startswith(("detector:", "judge:")):
        marks = _machine_sets(session, tax, list(pk_to_id), by, with_confidence=True)
        for pk, rid in pk_to_id.items():
            got = marks.get(pk)
            if got is None:
                out[rid] = "not run" if by.startswith("detector:") else "not judged"
            elif by.startswith("detector:"):
                out[rid] = "flagged" if got else "clear"
            else:
                out[rid] = max(got, key=lambda mc: (mc[1] if mc[1] is not None else 1.0, mc[0]))[0] if got \
                    else "no_failure"
        return out
    if by not in STRATUM_FIELDS:
        raise policies.PolicyError("stratify_by", f"unknown field {by!r}; use {', '.join(STRATUM_FIELDS)}, "
                                                  "detector:<name> or judge:<name>")
    pks = list(pk_to_id)
    if by in ("model", "harness"):
        col = Agent.model if by == "model" else Agent.harness
        vals: dict[int, set[str]] = {pk: set() for pk in pks}
        for pk, v in _chunked(session, lambda ids: select(Agent.run_pk, col).where(Agent.run_pk.in_(ids)), pks):
            if v is not None:
                vals[pk].add(v)
        return {pk_to_id[pk]: "+".join(sorted(v)) or "(none)" for pk, v in vals.items()}
    rows = _chunked(session, lambda ids: select(Run.id, Run.scenario_id, Run.status, Run.source, Run.extra,
                                                Run.scenario_override, Scenario.family, Scenario.alignment)
                    .join(Scenario, Scenario.id == Run.scenario_id).where(Run.id.in_(ids)), pks)
    for pk, scenario, status, source, extra, override, family, alignment in rows:
        override = override or {}
        extra = extra or {}
        value = {"family": override.get("family", family), "alignment": override.get("alignment", alignment),
                 "scenario": scenario, "status": status, "source": source,
                 "condition": extra.get("condition", (extra.get("path") or {}).get("condition")
                                        if isinstance(extra.get("path"), dict) else None)}[by]
        out[pk_to_id[pk]] = "(none)" if value is None else str(value)
    return out


def _chunked(session: Session, make, ids: list[int], size: int = 500) -> list[tuple]:
    rows: list[tuple] = []
    for i in range(0, len(ids), size):
        rows.extend(session.exec(make(ids[i:i + size])).all())
    return rows


def _human_sets(session: Session, tax: Taxonomy, pks: list[int]) -> dict[int, list[frozenset[str]]]:
    """run pk -> the mode sets of the submitted human annotations of the run."""
    anns = _chunked(session, lambda ids: select(Annotation.id, Annotation.run_pk).join(
        User, User.id == Annotation.user_id).where(Annotation.run_pk.in_(ids), Annotation.taxonomy_pk == tax.id,
                                                   Annotation.status == "submitted", User.kind == "human"), pks)
    modes: dict[int, set[str]] = {aid: set() for aid, _ in anns}
    for aid, mode in _chunked(session, lambda ids: select(Label.annotation_id, Label.mode).where(
            Label.annotation_id.in_(ids)), list(modes)):
        if mode is not None:
            modes[aid].add(mode)
    out: dict[int, list[frozenset[str]]] = {}
    for aid, pk in anns:
        out.setdefault(pk, []).append(frozenset(modes[aid]))
    return out


def _machine_sets(session: Session, tax: Taxonomy, pks: list[int], who: str, with_confidence: bool = False
                  ) -> dict[int, Any]:
    """run pk -> the modes (or [(mode, confidence)]) of the submitted annotation by `who`
    (`detector:<name>` / `judge:<name>`); runs it did not label are absent."""
    user = session.exec(select(User).where(User.username == who)).first()
    if user is None:
        raise policies.PolicyError("source", f"no detector or judge {who!r} has labelled anything")
    anns = dict(_chunked(session, lambda ids: select(Annotation.id, Annotation.run_pk).where(
        Annotation.run_pk.in_(ids), Annotation.user_id == user.id, Annotation.taxonomy_pk == tax.id,
        Annotation.status == "submitted"), pks))
    out: dict[int, Any] = {pk: [] for pk in anns.values()}
    for aid, mode, conf in _chunked(session, lambda ids: select(Label.annotation_id, Label.mode, Label.confidence)
                                    .where(Label.annotation_id.in_(ids)), list(anns)):
        if mode is not None:
            out[anns[aid]].append((mode, conf))
    if with_confidence:
        return out
    return {pk: frozenset(m for m, _ in v) for pk, v in out.items()}


def _machine_names(session: Session, source: str | None) -> list[str]:
    """The detector/judge users a `flagged` batch looks at: `source` (a name, `detector:*`,
    `judge:*`), or every detector and judge."""
    q = select(User.username).where(User.kind != "human")
    names = list(session.exec(q).all())
    if source in (None, "", "*"):
        return sorted(n for n in names if n.startswith(("detector:", "judge:")))
    if source.endswith(":*"):
        return sorted(n for n in names if n.startswith(source[:-1]))
    if source not in names:
        raise policies.PolicyError("source", f"no detector or judge {source!r} has labelled anything")
    return [source]


def draw_batch(session: Session, tax: Taxonomy, runs: dict[str, int], policy: str, sample_size: int | None,
               seed: int, params: dict[str, Any] | None = None, rng: random.Random | None = None
               ) -> tuple[list[policies.Pick], dict[str, Any]]:
    """The runs a batch of `policy` takes from the frame `runs` (run_id -> pk), as Picks in queue
    order, with the strata description. Parameters (`params`): stratified `stratify_by`,
    `allocation`; disagreement `against` (None: humans among themselves; else `judge:<name>` /
    `detector:<name>`); uncertainty `source` (`judge:<name>`); flagged `source` (a detector or
    judge, `detector:*`, `judge:*`; default every one); random `rate` (Bernoulli draw by run id
    instead of a fixed sample size, for queue rules)."""
    if params is not None and not isinstance(params, dict):
        raise policies.PolicyError("params", f"must be an object, got {type(params).__name__}")
    params = dict(params or {})
    for key, value in params.items():
        if key not in ("stratify_by", "allocation", "against", "source", "rate"):
            raise policies.PolicyError(f"params.{key}", "unknown parameter; use stratify_by, allocation, against, "
                                                        "source or rate")
        if key != "rate" and value is not None and not isinstance(value, str):
            raise policies.PolicyError(f"params.{key}", f"must be a string, got {value!r}")
    rng = rng if rng is not None else random.Random(seed)
    pk_to_id = {pk: rid for rid, pk in runs.items()}
    if policy not in policies.POLICIES:
        raise policies.PolicyError("policy", f"must be one of {', '.join(policies.POLICIES)}, got {policy!r}")
    if policy == "random":
        if params.get("rate") is not None:
            return policies.bernoulli(list(runs), seed, params["rate"]), {}
        picks = policies.simple_random(list(runs), sample_size, rng)
        p = picks[0].inclusion_prob if picks else 0.0
        return picks, {"": {"frame": len(runs), "sampled": len(picks), "inclusion_prob": p}} if runs else {}
    if policy == "all":
        return policies.every(list(runs), rng), {"": {"frame": len(runs), "sampled": len(runs), "inclusion_prob": 1.0}}
    if policy == "stratified":
        strata = run_strata(session, tax, runs, params.get("stratify_by"))
        return policies.stratified(strata, sample_size, params.get("allocation") or "proportional", rng)
    if policy == "flagged":
        flagged: set[int] = set()
        for who in _machine_names(session, params.get("source")):
            flagged |= {pk for pk, modes in _machine_sets(session, tax, list(pk_to_id), who).items() if modes}
        picks = policies.every([pk_to_id[pk] for pk in flagged], rng)
        return (picks if sample_size is None else picks[:sample_size]), {}
    if policy == "disagreement":
        humans = _human_sets(session, tax, list(pk_to_id))
        against = params.get("against")
        if against:
            machine = _machine_sets(session, tax, list(pk_to_id), against)
            scores = {pk_to_id[pk]: policies.versus_score(humans.get(pk, []), machine[pk]) for pk in machine}
        else:
            scores = {pk_to_id[pk]: policies.split_score(v) for pk, v in humans.items()}
        return policies.top_scored(scores, sample_size, rng), {}
    source = params.get("source")
    if not isinstance(source, str) or not source.startswith("judge:"):
        raise policies.PolicyError("source", "uncertainty needs the judge whose samples split: judge:<name>")
    conf = _machine_sets(session, tax, list(pk_to_id), source, with_confidence=True)
    scores = {pk_to_id[pk]: policies.confidence_split([c for _, c in v]) for pk, v in conf.items()}
    return policies.top_scored(scores, sample_size, rng), {}


def _ensure_quotas(session: Session, study_key: int, tax: Taxonomy, run_pks: list[int], k: int) -> None:
    """A run_quota row for each run (n: the run's current assignments in that study), created
    with INSERT ... ON CONFLICT DO NOTHING so concurrent fills make it once."""
    from app.studies.models import RunQuota

    have = set()
    for i in range(0, len(run_pks), 500):
        have |= set(session.exec(select(RunQuota.run_pk).where(
            RunQuota.study_key == study_key, RunQuota.taxonomy_pk == tax.id,
            RunQuota.run_pk.in_(run_pks[i:i + 500]))).all())
    missing = sorted(pk for pk in run_pks if pk not in have)  # in run order: concurrent inserts never deadlock
    if not missing:
        return
    study_cond = Assignment.study_id.is_(None) if study_key == 0 else Assignment.study_id == study_key
    counts = dict(_chunked(session, lambda ids: select(Assignment.run_pk, func.count()).where(
        Assignment.run_pk.in_(ids), Assignment.taxonomy_pk == tax.id, study_cond).group_by(Assignment.run_pk),
        missing))
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    rows = [{"study_key": study_key, "taxonomy_pk": tax.id, "run_pk": pk, "n": counts.get(pk, 0),
             "k": max(k, counts.get(pk, 0))} for pk in missing]
    for i in range(0, len(rows), 500):
        session.execute(dialect_insert(RunQuota.__table__).values(rows[i:i + 500]).on_conflict_do_nothing(
            index_elements=["study_key", "taxonomy_pk", "run_pk"]))


def _lock_quotas(session: Session, study_key: int, tax: Taxonomy, run_pks: list[int]) -> dict[int, tuple[int, int]]:
    """run pk -> (quota id, n), the rows locked FOR UPDATE in run order (PostgreSQL; SQLite's
    writer already holds the database)."""
    from app.studies.models import RunQuota

    out: dict[int, tuple[int, int]] = {}
    ordered = sorted(run_pks)
    for i in range(0, len(ordered), 500):
        for qid, pk, n in session.exec(select(RunQuota.id, RunQuota.run_pk, RunQuota.n).where(
                RunQuota.study_key == study_key, RunQuota.taxonomy_pk == tax.id,
                RunQuota.run_pk.in_(ordered[i:i + 500])).order_by(RunQuota.run_pk).with_for_update()).all():
            out[pk] = (qid, n)
    return out


class QuotaExceeded(RuntimeError):
    """The database refused to raise a run's counter beyond k (a concurrent fill got there first)."""


def create_assignments(session: Session, run_filter: RunFilter, sample_size: int | None, seed: int,
                       annotators: Sequence[str], k: int, taxonomy: Taxonomy,
                       batch: str | None = None, *, policy: str = "random", params: dict[str, Any] | None = None,
                       study: Any = None, created_by: User | None = None, rule_id: int | None = None,
                       frame: dict[str, int] | None = None) -> AssignmentResult:
    """Draw a batch by `policy` from the runs matching `run_filter` (in `study` when given) and
    deal each run to up to `k` distinct `annotators`.

    The draw (see `draw_batch`) is seeded: same database content and inputs, same batch on
    SQLite and PostgreSQL. Annotators are sorted and shuffled by the same RNG and dealt
    round-robin (run i starts at annotator i*k mod n, so loads differ by at most one); a run
    that already has annotators in this study, or whose dealt annotator already has it or had it
    removed, takes the next annotators in the rotation, up to k in all. Each annotator's new
    runs are appended to their queue (positions after their current last) in the drawn order.
    Every row records study, policy, seed, inclusion probability and stratum; with a `batch`
    name the design is stored as an `assignment_batch` row. Raises AnnotationError / PolicyError
    for bad inputs. The caller commits."""
    from app.studies.models import AssignmentBatch, AssignmentRemoval, RunQuota

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise AnnotationError("seed", f"must be an integer, got {seed!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise AnnotationError("k", f"must be at least 1, got {k}")
    users = _annotator_users(session, annotators)
    if not users:
        raise AnnotationError("annotators", "name at least one annotator")
    if k > len(users):
        raise AnnotationError("k", f"k={k} annotators per run, but only {len(users)} annotator(s) given")
    if sample_size is not None and (isinstance(sample_size, bool) or not isinstance(sample_size, int)
                                    or sample_size < 1):
        raise AnnotationError("sample_size", f"must be at least 1 (or empty for all runs), got {sample_size}")
    if study is not None and taxonomy.id != study.taxonomy_pk:
        raise AnnotationError("taxonomy", f"study {study.name!r} is labelled under another taxonomy version")
    by_name = {u.username: u for u in users}
    runs = frame if frame is not None else _frame(session, run_filter, study)
    rng = random.Random(seed)  # one RNG: the draw, then the annotator rotation
    picks, strata = draw_batch(session, taxonomy, runs, policy, sample_size, seed, params, rng)
    people = sorted(by_name)
    rng.shuffle(people)
    n_people = len(people)
    study_key = study.id if study is not None else 0
    result = AssignmentResult(taxonomy=tax_ref(taxonomy), batch=batch, runs_matching=len(runs),
                              runs_selected=len(picks), per_annotator={u.username: 0 for u in users},
                              policy=policy, seed=seed, study=study.name if study is not None else None,
                              strata=strata,
                              picks=[(p.run_id, p.inclusion_prob, p.stratum, p.score) for p in picks])
    if not picks:
        return result
    pick_pks = [runs[p.run_id] for p in picks]
    _ensure_quotas(session, study_key, taxonomy, pick_pks, k)
    quotas = _lock_quotas(session, study_key, taxonomy, pick_pks)
    # under the locks, the counters are set from the assignments themselves (a row deleted
    # behind the counter's back, e.g. by a user's removal, does not leave it stale)
    study_cond = Assignment.study_id.is_(None) if study is None else Assignment.study_id == study.id
    actual = dict(_chunked(session, lambda ids: select(Assignment.run_pk, func.count()).where(
        Assignment.run_pk.in_(ids), Assignment.taxonomy_pk == taxonomy.id, study_cond)
        .group_by(Assignment.run_pk), pick_pks))
    quotas = {pk: (qid, actual.get(pk, 0)) for pk, (qid, _) in quotas.items()}
    uids = [u.id for u in users]
    existing: set[tuple[int, int]] = set()
    removed: set[tuple[int, int]] = set()
    for i in range(0, len(pick_pks), 500):
        part = pick_pks[i:i + 500]
        existing |= set(session.exec(select(Assignment.run_pk, Assignment.user_id).where(
            Assignment.taxonomy_pk == taxonomy.id, Assignment.user_id.in_(uids), Assignment.run_pk.in_(part))).all())
        removed |= set(session.exec(select(AssignmentRemoval.run_pk, AssignmentRemoval.user_id).where(
            AssignmentRemoval.study_key == study_key, AssignmentRemoval.taxonomy_pk == taxonomy.id,
            AssignmentRemoval.user_id.in_(uids), AssignmentRemoval.run_pk.in_(part))).all())
    next_pos = {uid: (pos if pos is not None else -1) + 1 for uid, pos in session.exec(
        select(Assignment.user_id, func.max(Assignment.position))
        .where(Assignment.user_id.in_(uids)).group_by(Assignment.user_id)).all()}
    rows: list[dict[str, Any]] = []
    added: dict[int, int] = {}
    from app.runs.models import utcnow

    now = utcnow()
    for i, pick in enumerate(picks):
        run_pk = runs[pick.run_id]
        have = quotas[run_pk][1]
        for j in range(n_people):
            name = people[(i * k + j) % n_people]
            user = by_name[name]
            if j >= k and have >= k:
                break
            if (run_pk, user.id) in existing:
                if j < k:
                    result.skipped_existing += 1
                continue
            if (run_pk, user.id) in removed:
                if j < k:
                    result.skipped_removed += 1
                continue
            if have >= k:
                if j < k:
                    result.skipped_full += 1
                continue
            pos = next_pos.get(user.id, 0)
            next_pos[user.id] = pos + 1
            rows.append({"run_pk": run_pk, "user_id": user.id, "taxonomy_pk": taxonomy.id, "position": pos,
                         "batch": batch, "created_at": now, "study_id": study.id if study is not None else None,
                         "policy": policy, "seed": seed, "inclusion_prob": pick.inclusion_prob,
                         "stratum": pick.stratum})
            existing.add((run_pk, user.id))
            have += 1
            added[run_pk] = added.get(run_pk, 0) + 1
            result.created += 1
            result.per_annotator[name] += 1
            result.pairs.append((pick.run_id, name, pos))
    # the counter: the database refuses to go beyond k (row locked above; CHECK n <= k under it)
    for run_pk in sorted(added):
        qid, before = quotas[run_pk]
        res = session.execute(update(RunQuota).where(RunQuota.id == qid)
                              .values(n=before + added[run_pk], k=max(k, before + added[run_pk])))
        if res.rowcount != 1:
            raise QuotaExceeded(f"run {run_pk}: its counter is gone")
    if rows:
        for i in range(0, len(rows), 500):
            session.execute(Assignment.__table__.insert(), rows[i:i + 500])
    if batch is not None and rows:
        design = session.exec(select(AssignmentBatch).where(AssignmentBatch.name == batch,
                                                            AssignmentBatch.taxonomy_pk == taxonomy.id)).first()
        if design is None:
            design = AssignmentBatch(name=batch, taxonomy_pk=taxonomy.id, study_id=study.id if study else None,
                                     policy=policy, seed=seed, k=k, params=dict(params or {}),
                                     frame_size=len(runs), frame_max_run_pk=max(runs.values(), default=None),
                                     strata=strata, rule_id=rule_id,
                                     created_by=created_by.id if created_by is not None else None)
        else:  # a rule's batch grows with every top-up
            design.frame_size = max(design.frame_size, len(runs))
            design.frame_max_run_pk = max([v for v in (design.frame_max_run_pk, *runs.values()) if v is not None],
                                          default=None)
        session.add(design)
    session.flush()
    return result


def remove_assignment(session: Session, run_pk: int, user: User, taxonomy: Taxonomy, study: Any = None,
                      removed_by: User | None = None) -> bool:
    """Take a run out of an annotator's queue (unless they started it) and remember it, so no
    later fill in that study gives it back. Returns whether an assignment was removed."""
    from app.studies.models import AssignmentRemoval

    study_key = study.id if study is not None else 0
    study_cond = Assignment.study_id.is_(None) if study is None else Assignment.study_id == study.id
    row = session.exec(select(Assignment).where(Assignment.run_pk == run_pk, Assignment.user_id == user.id,
                                                Assignment.taxonomy_pk == taxonomy.id, study_cond)).first()
    started = session.exec(select(Annotation.id).where(Annotation.run_pk == run_pk, Annotation.user_id == user.id,
                                                       Annotation.taxonomy_pk == taxonomy.id)).first()
    if row is not None and started is not None:
        raise AnnotationError("run", "the annotator has already started this run; it stays in their queue")
    if session.exec(select(AssignmentRemoval.id).where(
            AssignmentRemoval.study_key == study_key, AssignmentRemoval.run_pk == run_pk,
            AssignmentRemoval.user_id == user.id, AssignmentRemoval.taxonomy_pk == taxonomy.id)).first() is None:
        session.add(AssignmentRemoval(study_key=study_key, run_pk=run_pk, user_id=user.id, taxonomy_pk=taxonomy.id,
                                      removed_by=removed_by.id if removed_by is not None else None))
    if row is None:
        session.flush()
        return False
    release_quota(session, [row])
    session.delete(row)
    session.flush()
    return True


def release_quota(session: Session, rows: Sequence[Assignment]) -> None:
    """Lower the run counters for assignments about to be deleted."""
    from app.studies.models import RunQuota

    per: dict[tuple[int, int, int], int] = {}
    for a in rows:
        key = (a.study_id or 0, a.taxonomy_pk, a.run_pk)
        per[key] = per.get(key, 0) + 1
    for (study_key, tax_pk, run_pk), m in sorted(per.items(), key=lambda kv: kv[0][2]):
        session.execute(update(RunQuota).where(RunQuota.study_key == study_key, RunQuota.taxonomy_pk == tax_pk,
                                               RunQuota.run_pk == run_pk, RunQuota.n >= m)
                        .values(n=RunQuota.n - m))


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
