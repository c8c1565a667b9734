"""Running detectors on stored runs and keeping their labels; detector hints per assignment batch.

Plain functions taking a session. A detector's labels on a run are one submitted annotation by
the non-human user ``detector:<name>`` (kind "judge", so agreement, reports and adjudication
treat it like any machine judge), origin "detector", ``source_version`` its version; a run where
it found nothing gets an explicit "no failure found" annotation (its silence is data). Running
again replaces exactly that detector's annotations on that run; nothing else is touched. A
detector that raises on a run is reported (`DetectSummary.errors`) and writes nothing for that
run; the other detectors and runs go on.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, insert
from sqlmodel import Session, select

from app.annotations.models import Annotation, AppSetting, Assignment, Label
from app.auth.models import User
from app.detectors import Detector, DetectorResult, Registry, load_registry, mode_map, run_detectors
from app.runs.models import Run, utcnow
from app.taxonomies.models import Taxonomy

log = logging.getLogger("a2annotate.detectors")

ORIGIN = "detector"
HINT_BATCHES_KEY = "detector_hints_batches"


class DetectError(ValueError):
    """A bad detect request (unknown detector or run); the message names it."""


def registry() -> Registry:
    """Built-in detectors, the `a2annotate.detectors` entry points and the DETECTORS setting."""
    from app.core.config import get_settings

    return load_registry(get_settings().detectors)


def select_detectors(reg: Registry, only: Iterable[str] | None) -> list[Detector]:
    """The detectors named in `only` (all when None); raises DetectError for an unknown name."""
    if not only:
        return list(reg.detectors)
    out = []
    for name in only:
        d = reg.get(name.strip())
        if d is None:
            raise DetectError(f"unknown detector {name!r} (known: {', '.join(reg.names())})")
        out.append(d)
    return out


def detector_user(session: Session, name: str, cache: dict | None = None) -> User:
    """The non-human annotator `detector:<name>`, created on first use."""
    username = f"detector:{name}"
    if cache is not None and username in cache:
        return cache[username]
    user = session.exec(select(User).where(User.username == username)).first()
    if user is not None and user.kind != "judge":
        raise DetectError(f"user {username!r} is a {user.kind} account, not a detector")
    if user is None:
        user = User(username=username, role="annotator", kind="judge", source_name=username.removeprefix("detector:"))
        session.add(user)
        session.flush()
    if cache is not None:
        cache[username] = user
    return user


def default_taxonomy(session: Session) -> Taxonomy | None:
    from app.taxonomies.service import resolve

    return resolve(session, None)


@dataclass
class DetectSummary:
    runs: int = 0
    #: detector name -> labels written
    labels: dict[str, int] = field(default_factory=dict)
    #: detector name -> runs on which it flagged something
    flagged_runs: dict[str, int] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        per = ", ".join(f"{k} {v}" for k, v in sorted(self.labels.items())) or "none"
        return f"detected on {self.runs} runs: labels {per}; errors {len(self.errors)}"

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "labels": dict(self.labels), "flagged_runs": dict(self.flagged_runs),
                "errors": list(self.errors), "problems": list(self.problems)}


def store_results(session: Session, run_row: Run, tax: Taxonomy, results: Iterable[DetectorResult],
                  cache: dict | None = None) -> None:
    """Replace each (non-failed) detector's annotations on the run with its new labels."""
    now = utcnow()
    for res in results:
        if res.error is not None:
            continue
        user = detector_user(session, res.detector.name, cache)
        old = session.exec(select(Annotation.id).where(Annotation.run_pk == run_row.id,
                                                       Annotation.user_id == user.id)).all()
        if old:
            session.execute(delete(Label).where(Label.annotation_id.in_(old)))
            session.execute(delete(Annotation).where(Annotation.id.in_(old)))
        ann = Annotation(run_pk=run_row.id, user_id=user.id, taxonomy_pk=tax.id, status="submitted",
                         no_failure=not res.labels, origin=ORIGIN, submitted_at=now, started_at=now,
                         updated_at=now, source_version=str(res.detector.version)[:100],
                         note=f"{res.detector.name} {res.detector.version}")
        session.add(ann)
        session.flush()
        if res.labels:
            session.connection().execute(insert(Label.__table__), [
                {"annotation_id": ann.id, "mode": lab["mode"], "agent": lab["agent"],
                 "principals": lab["principals"], "evidence": lab["evidence"], "note": lab["note"],
                 "confidence": None, "time_ms": 0, "created_at": now} for lab in res.labels])


def detect_run(session: Session, run_row: Run, detectors: list[Detector], *, run: dict | None = None,
               tax: Taxonomy | None = None, cache: dict | None = None) -> list[DetectorResult]:
    """Run `detectors` on one stored run and store their labels (the caller commits)."""
    from app.runs.service import to_canonical
    from app.taxonomies.service import mode_codes

    tax = tax or default_taxonomy(session)
    if tax is None:
        raise DetectError("no taxonomy is registered (run `a2annotate db upgrade`)")
    run = run if run is not None else to_canonical(session, run_row)
    results = run_detectors(run, detectors, mode_map(tax.definition), mode_codes(tax))
    store_results(session, run_row, tax, results, cache)
    return results


def detect_all(session: Session, *, only: Iterable[str] | None = None, run_ids: Iterable[str] | None = None,
               reg: Registry | None = None, batch_size: int = 200,
               progress: Callable[[DetectSummary], None] | None = None, scope: Any = None) -> DetectSummary:
    """Run the detectors (all, or those named in `only`) on every stored run (or `run_ids`; only
    the runs of `scope`, a study's run-id subquery, when given), committing every `batch_size`
    runs. Never raises for one detector or one run."""
    reg = reg or registry()
    detectors = select_detectors(reg, only)
    summary = DetectSummary(problems=list(reg.problems))
    tax = default_taxonomy(session)
    if tax is None:
        raise DetectError("no taxonomy is registered (run `a2annotate db upgrade`)")
    q = select(Run).order_by(Run.run_id)
    if scope is not None:
        q = q.where(Run.id.in_(scope))
    if run_ids is not None:
        ids = list(run_ids)
        q = q.where(Run.run_id.in_(ids))
        found = set(session.exec(select(Run.run_id).where(Run.run_id.in_(ids))).all())
        missing = [r for r in ids if r not in found]
        if missing:
            raise DetectError(f"no run {missing[0]!r}")
    cache: dict = {}
    pending = 0
    for run_row in session.exec(q).all():
        sp = session.begin_nested()
        try:
            results = detect_run(session, run_row, detectors, tax=tax, cache=cache)
            sp.commit()
        except Exception as exc:  # noqa: BLE001 - a run the database refuses is reported, the rest go on
            sp.rollback()
            cache.clear()
            summary.errors.append({"run_id": run_row.run_id, "detector": "*", "error": f"{type(exc).__name__}: {exc}"})
            continue
        summary.runs += 1
        for res in results:
            name = res.detector.name
            summary.labels.setdefault(name, 0)
            summary.flagged_runs.setdefault(name, 0)
            if res.error is not None:
                summary.errors.append({"run_id": run_row.run_id, "detector": name, "error": res.error})
                log.warning("detector %s failed on run %s: %s", name, run_row.run_id, res.error)
                continue
            summary.labels[name] += len(res.labels)
            summary.flagged_runs[name] += bool(res.labels)
        pending += 1
        if pending >= batch_size:
            session.commit()
            pending = 0
        if progress is not None:
            progress(summary)
    session.commit()
    return summary


def detect_on_import(session: Session, run_row: Run, run: dict, cache: dict) -> None:
    """The import hook (DETECTORS_ON_IMPORT=true): every detector on the run just stored, inside
    the run's own savepoint. A failing detector is logged and does not reject the run."""
    if "detector_registry" not in cache:
        cache["detector_registry"] = registry()
    reg = cache["detector_registry"]
    users = cache.setdefault("detector_users", {})
    sp = session.begin_nested()
    try:
        results = detect_run(session, run_row, reg.detectors, run=run, cache=users)
        sp.commit()
    except Exception as exc:  # noqa: BLE001 - the run itself still imports
        sp.rollback()
        users.clear()
        log.warning("detectors could not store labels for run %s: %s", run_row.run_id, exc)
        return
    for res in results:
        if res.error is not None:
            log.warning("detector %s failed on run %s: %s", res.detector.name, run_row.run_id, res.error)


# --------------------------------------------------------------------------- hints per batch

def hint_batches(session: Session) -> list[str]:
    """The assignment batches whose annotators see detector hints (none by default)."""
    row = session.get(AppSetting, HINT_BATCHES_KEY)
    return sorted(row.value) if row and isinstance(row.value, list) else []


def set_hints(session: Session, batch: str, on: bool) -> list[str]:
    """Turn detector hints on or off for one assignment batch; returns the batches with hints."""
    batch = (batch or "").strip()
    known = set(session.exec(select(Assignment.batch).where(Assignment.batch.is_not(None)).distinct()).all())
    if batch not in known:
        raise DetectError(f"no assignment batch {batch!r}")
    row = session.get(AppSetting, HINT_BATCHES_KEY) or AppSetting(key=HINT_BATCHES_KEY, value=[])
    now = set(row.value if isinstance(row.value, list) else [])
    now = now | {batch} if on else now - {batch}
    row.value = sorted(now)
    session.add(row)
    session.flush()
    return row.value


def all_batches(session: Session) -> list[dict[str, Any]]:
    """Every assignment batch with its number of assignments and whether hints are on."""
    from sqlalchemy import func

    on = set(hint_batches(session))
    rows = session.execute(select(Assignment.batch, func.count()).where(Assignment.batch.is_not(None))
                           .group_by(Assignment.batch).order_by(Assignment.batch)).all()
    return [{"batch": b, "assignments": n, "hints": b in on} for b, n in rows]


def hints_enabled(session: Session, user_id: int, run_pk: int) -> bool:
    """True when `user` has an assignment of this run in a batch with hints on."""
    on = hint_batches(session)
    if not on:
        return False
    return session.exec(select(Assignment.id).where(Assignment.run_pk == run_pk, Assignment.user_id == user_id,
                                                    Assignment.batch.in_(on))).first() is not None


def run_hints(session: Session, run_pk: int, tax: Taxonomy) -> list[dict[str, Any]]:
    """The detector labels stored on a run under `tax`, for the labeling panel."""
    rows = session.execute(
        select(User.username, Annotation.source_version, Label.mode, Label.agent, Label.evidence, Label.note)
        .join(Annotation, Annotation.id == Label.annotation_id).join(User, User.id == Annotation.user_id)
        .where(Annotation.run_pk == run_pk, Annotation.taxonomy_pk == tax.id, Annotation.origin == ORIGIN)
        .order_by(User.username, Label.id)).all()
    return [{"detector": u.split(":", 1)[1], "version": v, "mode": m, "agent": a, "evidence": list(ev or []),
             "reason": n} for u, v, m, a, ev, n in rows]


# --------------------------------------------------------------------------- scores

REFERENCES = ("truth", "gold")


def _reference(session: Session, tax: Taxonomy, reference: str) -> dict[str, set[tuple[str, str]]]:
    from app.annotations.models import GoldLabel, GoldRun
    from app.taxonomies.service import mode_codes

    codes = set(mode_codes(tax))
    out: dict[str, set[tuple[str, str]]] = {}
    if reference == "truth":
        for run_id, extra in session.execute(select(Run.run_id, Run.extra)):
            truth = (extra or {}).get("demo_truth")
            if isinstance(truth, list):
                out[run_id] = {(t["mode"], t.get("agent") or "") for t in truth
                               if isinstance(t, dict) and t.get("mode") in codes}
        return out
    if reference != "gold":
        raise DetectError(f"reference must be one of {', '.join(REFERENCES)}, got {reference!r}")
    for (run_id,) in session.execute(select(Run.run_id).join(GoldRun, GoldRun.run_pk == Run.id)
                                     .where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated")):
        out[run_id] = set()
    for run_id, mode, agent in session.execute(
            select(Run.run_id, GoldLabel.mode, GoldLabel.agent).join(GoldRun, GoldRun.run_pk == Run.id)
            .join(GoldLabel, GoldLabel.gold_run_id == GoldRun.id)
            .where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated", GoldLabel.accepted.is_(True))):
        out[run_id].add((mode, agent or ""))
    return out


def score_report(session: Session, *, reference: str = "truth", level: str = "run", n_boot: int = 1000,
                 seed: int = 0, confidence: float = 0.95, taxonomy: str | None = None) -> dict[str, Any]:
    """Each detector (then, on the detectors' modes, every other machine judge and the human labels
    made with hints on / off) against the demo's seeded
    truth (``reference="truth"``) or the adjudicated gold labels (``"gold"``), per mode the
    detector maps to: precision, recall, F1 with intervals (see `app.detectors.scoring`)."""
    from app.detectors.scoring import score_source
    from app.taxonomies.service import resolve

    if level not in ("run", "agent"):
        raise DetectError(f"level must be 'run' or 'agent', got {level!r}")
    tax = resolve(session, taxonomy) if taxonomy else default_taxonomy(session)
    if tax is None:
        raise DetectError(f"unknown taxonomy {taxonomy!r}" if taxonomy else "no taxonomy is registered")
    ref = _reference(session, tax, reference)
    mapping = mode_map(tax.definition)
    reg = registry()
    units: dict[str, dict[Any, tuple[str, set]]] = {}
    versions: dict[str, set[str]] = {}
    emitted: dict[str, set[str]] = {}
    human_units: dict[str, dict[Any, tuple[str, set]]] = {"humans, hints on": {}, "humans, hints off": {}}
    judge_units: dict[str, dict[Any, tuple[str, set]]] = {}
    rows = session.execute(
        select(Annotation.id, User.username, User.kind, Annotation.origin, Annotation.hints_on,
               Annotation.source_version, Run.run_id)
        .join(User, User.id == Annotation.user_id).join(Run, Run.id == Annotation.run_pk)
        .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted")).all()
    ann_info = {}
    for aid, username, kind, origin, hints_on, version, run_id in rows:
        if run_id not in ref:
            continue
        if origin == ORIGIN:
            units.setdefault(username, {})[(username, run_id)] = (run_id, set())
            versions.setdefault(username, set()).add(version or "?")
            ann_info[aid] = (units[username], (username, run_id), username)
        elif kind == "judge":
            judge_units.setdefault(username, {})[(username, run_id)] = (run_id, set())
            ann_info[aid] = (judge_units[username], (username, run_id), None)
        elif kind == "human" and origin == "human":
            group = "humans, hints on" if hints_on else "humans, hints off"
            human_units[group][(username, run_id)] = (run_id, set())
            ann_info[aid] = (human_units[group], (username, run_id), None)
    if ann_info:
        ids = list(ann_info)
        for start in range(0, len(ids), 5000):
            chunk = ids[start:start + 5000]
            for ann_id, mode, agent in session.execute(
                    select(Label.annotation_id, Label.mode, Label.agent).where(Label.annotation_id.in_(chunk))):
                target, key, det = ann_info[ann_id]
                target[key][1].add((mode, agent or ""))
                if det is not None:
                    emitted.setdefault(det, set()).add(mode)
    sources = []
    all_modes: list[str] = []
    for username in sorted(units):
        name = username.split(":", 1)[1]
        d = reg.get(name)
        modes = set(emitted.get(username, set()))
        if d is not None:
            for k in (d.key, d.name):
                if k in mapping:
                    modes.add(mapping[k])
        modes_l = sorted(modes)
        all_modes += [m for m in modes_l if m not in all_modes]
        res = score_source(units[username], ref, modes_l, level=level, n_boot=n_boot, seed=seed,
                           confidence=confidence)
        sources.append({"source": username, "kind": "detector", "versions": sorted(versions[username]),
                        "registered": d is not None, **res})
    for group, us in [*sorted(judge_units.items()), *human_units.items()]:
        if us and all_modes:
            res = score_source(us, ref, sorted(all_modes), level=level, n_boot=n_boot, seed=seed,
                               confidence=confidence)
            sources.append({"source": group, "kind": "humans" if group in human_units else "judge", "versions": [],
                            "registered": True, **res})
    return {"taxonomy": f"{tax.key}@{tax.version}", "reference": reference, "level": level,
            "n_reference_runs": len(ref), "confidence": confidence, "n_boot": n_boot, "sources": sources,
            "human_agreement": hinted_agreement(session, n_boot=n_boot, seed=seed, confidence=confidence,
                                                taxonomy=f"{tax.key}@{tax.version}"),
            "problems": list(reg.problems)}


def page_hints(session: Session, user: User, run: Run, tax: Taxonomy) -> dict[str, Any] | None:
    """The hints for the labeling panel, ``{"labels": [...], "ran": bool}`` (``ran``: some
    detector has run on this run), when hints are on for this annotator's batch of the run;
    else None (no hints shown at all)."""
    if not hints_enabled(session, user.id, run.id):
        return None
    ran = session.exec(select(Annotation.id).where(Annotation.run_pk == run.id, Annotation.taxonomy_pk == tax.id,
                                                   Annotation.origin == ORIGIN)).first() is not None
    return {"labels": run_hints(session, run.id, tax), "ran": ran}


HINT_COEFFICIENTS = ("percent", "fleiss_kappa", "krippendorff_alpha")


def hinted_agreement(session: Session, *, n_boot: int = 200, seed: int = 0, taxonomy: str | None = None,
                     confidence: float = 0.95) -> dict[str, Any]:
    """Agreement among the human annotators, computed separately over the annotations made with
    detector hints on and over those made with hints off (the same machinery and coefficients as
    `a2annotate agreement`, all modes pooled): ``{"hints on": {...}, "hints off": {...}}`` with
    ``n_submissions``, ``n_units`` and ``overall`` (``percent``, ``fleiss_kappa``,
    ``krippendorff_alpha``, each ``{"value", "n_units", "ci", "reason"?}``), or ``overall: None``
    when that side has no submissions."""
    from app.agreement.service import load_agreement_data
    from app.agreement.units import agreement_report

    data = load_agreement_data(session, taxonomy=taxonomy)
    flags = {(u, r): bool(h) for u, r, h in session.execute(
        select(User.username, Run.run_id, Annotation.hints_on).join(User, User.id == Annotation.user_id)
        .join(Run, Run.id == Annotation.run_pk)
        .where(Annotation.taxonomy_pk == data.taxonomy.id, Annotation.status == "submitted", User.kind == "human"))}
    out: dict[str, Any] = {}
    for name, want in (("hints on", True), ("hints off", False)):
        s_mask = [flags.get((a, r), False) == want for a, r in zip(data.submissions["annotator"], data.submissions["run_id"])]
        l_mask = [flags.get((a, r), False) == want for a, r in zip(data.labels["annotator"], data.labels["run_id"])]
        subs, labs = data.submissions[s_mask], data.labels[l_mask]
        if subs.empty:
            out[name] = {"n_submissions": 0, "n_units": 0, "overall": None}
            continue
        rep = agreement_report(labs, subs, data.modes, data.mode_category, data.agents, n_boot=n_boot, seed=seed,
                               coefficients=HINT_COEFFICIENTS, confidence=confidence)
        out[name] = {"n_submissions": len(subs), "n_units": rep["n_units"],
                     "overall": {c: rep["overall"][c] for c in HINT_COEFFICIENTS}}
    return out
