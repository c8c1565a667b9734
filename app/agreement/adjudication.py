"""Adjudication: a reviewer turns the labels on a run into gold labels, with a rationale.

One ``GoldRun`` per (run, taxonomy version) holds the state (``open`` | ``adjudicated``) and
the ``GoldLabel`` rows.  What the reviewer works from are the *candidates*: the distinct
(mode, responsible agent) pairs among the submitted labels of the run, humans and judges, each
with the human annotators who gave it (``support``) out of those who submitted the run
(``n_humans``):

* ``unanimity``: every human annotator who submitted the run gave it, and at least two did.
  Opening the adjudication pre-accepts these as gold (origin ``unanimity``, evidence and
  principals the union over the annotators); the reviewer can undo that (``accepted=False``).
* ``majority``: a strict majority of the human submitters gave it (more than half; exactly
  half is not a majority).  One click accepts it (origin ``majority``).
* ``minority`` / ``judge``: fewer humans, or only judges; accepting one is an adjudication.

Each candidate is either undecided (no gold label of its pair), accepted (a gold label with
``accepted=True``) or rejected (a gold label with ``accepted=False``: the reviewer's decision that
it is *not* gold, stored like an acceptance so that a reload, another reviewer and the exports see
it).  Only accepted gold labels are gold: agreement, reports, detectors' scores and the gold shown
to annotators read ``accepted=True`` rows only.

Anything the reviewer adds, edits or merges is origin ``adjudication``.  Finishing sets the
status ``adjudicated`` (``no_failure`` when no accepted gold label remains) and stores the
reviewer and the rationale; the annotations of the run are then locked
(:func:`app.annotations.service.save_annotation` refuses changes) until the reviewer reopens it.

Gold labels are checked like annotations (mode in the taxonomy version, agent of the run,
principals of the run, evidence seqs that exist, at least one evidence event); errors name the
field (``label.agent: 'x' is not an agent of run r1``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.annotations.service import AnnotationError, RunContext, validate_labels
from app.auth.models import User
from app.core.errors import FieldError
from app.core.text import is_decimal
from app.runs.models import Agent, Principal, Run, utcnow
from app.taxonomies.models import Taxonomy

__all__ = [
    "ACTIONS",
    "AdjudicationError",
    "AdjudicationLocked",
    "GoldLabelStale",
    "accept",
    "add_label",
    "adjudication_view",
    "apply_action",
    "candidates",
    "edit_label",
    "finish",
    "get_gold_run",
    "gold_label_dict",
    "merge_labels",
    "open_adjudication",
    "reject",
    "remove_label",
    "reopen",
    "set_accepted",
    "submitted_labels",
]

ACTIONS = ("accept", "reject", "undo", "restore", "add", "edit", "merge", "remove", "finish", "reopen")
#: The label fields a gold label takes.
GOLD_LABEL_KEYS = ("mode", "agent", "principals", "evidence")


class AdjudicationError(FieldError):
    """Bad adjudication input; ``field`` names the offending value (``label.agent``, ``rationale``)."""


class AdjudicationLocked(RuntimeError):
    """The run is adjudicated: reopen it before changing its gold labels."""


class GoldLabelStale(RuntimeError):
    """The gold label changed since the reviewer read it (its `version` differs): nothing was
    written; `current` is the stored gold label."""

    def __init__(self, message: str, current: GoldLabel | None):
        super().__init__(message)
        self.current = current


def _version_param(value: Any, allow_zero: bool = False) -> int | None:
    """The `version` a change names (None: not given).  With `allow_zero` (accept / reject of a
    candidate), 0 means "this candidate had no gold label when I read it"."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise AdjudicationError("version", f"must be the gold label's version as last read"
                                           f"{' (0: it had none)' if allow_zero else ''}, got {value!r}")
    return value


def _lock_gold_run(session: Session, gold: GoldRun) -> None:
    """Take the GoldRun row's lock (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the request's write
    transaction is already exclusive), so that looking for a pair's gold label and creating it is
    one step: two reviewers deciding one candidate at once cannot create two gold labels."""
    session.execute(select(GoldRun.id).where(GoldRun.id == gold.id).with_for_update())


def _check_decided_as_read(g: GoldLabel | None, expected: int | None, mode: str, agent: str | None) -> None:
    """For accept / reject naming `version` (0: no gold label as last read): raise GoldLabelStale
    when the pair's gold label appeared or disappeared since (a changed version is caught by
    `_bump`)."""
    if expected is None:
        return
    pair = f"{mode} ({agent or 'no agent'})"
    if expected == 0 and g is not None:
        raise GoldLabelStale(f"{pair} was decided elsewhere since you read it (gold label {g.id}, "
                             f"{'accepted' if g.accepted else 'rejected'}, version {g.version}); reload it, or "
                             f"send its current version to overwrite it", g)
    if expected > 0 and g is None:
        raise GoldLabelStale(f"the gold label of {pair} was removed elsewhere since you read it (version "
                             f"{expected}); reload it, or send version 0 to decide it again", None)


def _bump(session: Session, g: GoldLabel, expected: int | None = None) -> None:
    """Bump `g`'s version in the database, only if it is still `expected` (when given): a
    compare-and-swap that also takes the row's lock, so two reviewers editing one gold label
    cannot both win. Raises GoldLabelStale when it changed elsewhere."""
    from sqlalchemy import update
    from sqlalchemy.orm.attributes import set_committed_value

    t = GoldLabel.__table__
    where = [t.c.id == g.id]
    if expected is not None:
        where.append(t.c.version == expected)
    new = session.execute(update(t).where(*where).values(version=t.c.version + 1).returning(t.c.version)).scalar()
    if new is None:
        session.refresh(g)
        raise GoldLabelStale(f"gold label {g.id} changed elsewhere: you last saw version {expected}, the stored one "
                             f"is version {g.version}; reload it, or send its current version to overwrite it", g)
    set_committed_value(g, "version", new)


def gold_label_dict(g: GoldLabel | None, names: Mapping[int, str] | None = None) -> dict[str, Any] | None:
    """The API shape of one gold label (None for None)."""
    if g is None:
        return None
    return {"id": g.id, "mode": g.mode, "agent": g.agent or None, "principals": list(g.principals or []),
            "evidence": list(g.evidence or []), "origin": g.origin, "accepted": bool(g.accepted),
            "rationale": g.rationale, "created_by": (names or {}).get(g.created_by), "version": g.version}


# --------------------------------------------------------------------------------------------
# reading


def get_gold_run(session: Session, run: Run, tax: Taxonomy) -> GoldRun | None:
    """Returns the run's GoldRun under this taxonomy version, or None."""
    return session.execute(select(GoldRun).where(GoldRun.run_pk == run.id, GoldRun.taxonomy_pk == tax.id)).scalars().first()


def submitted_labels(session: Session, run: Run, tax: Taxonomy) -> list[dict[str, Any]]:
    """Returns the submitted annotations of the run under ``tax``, humans first then judges, by
    name: ``{annotator, kind, no_failure, labels: [{id, mode, agent, principals, evidence, note,
    confidence}]}``."""
    anns = session.execute(
        select(Annotation.id, Annotation.no_failure, User.username, User.kind)
        .join(User, User.id == Annotation.user_id)
        .where(Annotation.run_pk == run.id, Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted")
    ).all()
    out = {aid: {"annotator": name, "kind": kind if kind in ("judge", "source") else "human", "no_failure": bool(nf),
                 "labels": []} for aid, nf, name, kind in anns}
    if out:
        for lab in session.execute(select(Label).where(Label.annotation_id.in_(list(out)), Label.mode.is_not(None))
                                   .order_by(Label.id)).scalars():  # attribution-only labels have no mode to adjudicate
            out[lab.annotation_id]["labels"].append({
                "id": lab.id, "mode": lab.mode, "agent": lab.agent or None, "principals": list(lab.principals or []),
                "evidence": sorted(set(lab.evidence or [])), "note": lab.note, "confidence": lab.confidence})
    return sorted(out.values(), key=lambda a: (a["kind"] != "human", a["annotator"]))


def candidates(annotations: Sequence[Mapping[str, Any]], modes: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Returns the distinct (mode, agent) pairs of the submitted labels (see
    :func:`submitted_labels`), in taxonomy order: ``{mode, agent, humans, judges, support,
    n_humans, status (unanimity|majority|minority|judge), evidence, principals, label_ids}``
    where evidence and principals are the unions over the humans who gave the pair (over the
    judges when no human did)."""
    n_humans = sum(1 for a in annotations if a["kind"] == "human")
    groups: dict[tuple, dict[str, Any]] = {}
    for a in annotations:
        for lab in a["labels"]:
            key = (lab["mode"], lab["agent"])
            g = groups.setdefault(key, {"mode": key[0], "agent": key[1], "humans": [], "judges": [],
                                        "h_ev": set(), "h_pr": set(), "j_ev": set(), "j_pr": set(), "label_ids": []})
            side = "humans" if a["kind"] == "human" else "judges"
            if a["annotator"] not in g[side]:
                g[side].append(a["annotator"])
            p = "h" if side == "humans" else "j"
            g[f"{p}_ev"].update(lab["evidence"])
            g[f"{p}_pr"].update(lab["principals"])
            g["label_ids"].append(lab["id"])
    order = {m: i for i, m in enumerate(modes)}
    out = []
    for g in groups.values():
        support = len(g["humans"])
        if support and support == n_humans and n_humans >= 2:
            status = "unanimity"
        elif support * 2 > n_humans:
            status = "majority"
        elif support:
            status = "minority"
        else:
            status = "judge"
        src = "h" if support else "j"
        out.append({"mode": g["mode"], "agent": g["agent"], "humans": sorted(g["humans"]),
                    "judges": sorted(g["judges"]), "support": support, "n_humans": n_humans, "status": status,
                    "evidence": sorted(g[f"{src}_ev"]), "principals": sorted(g[f"{src}_pr"]),
                    "label_ids": g["label_ids"]})
    out.sort(key=lambda c: (order.get(c["mode"], len(order)), c["mode"], c["agent"] or ""))
    return out


def _gold_labels(session: Session, gold: GoldRun) -> list[GoldLabel]:
    return list(session.execute(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id)
                                .order_by(GoldLabel.id)).scalars())


def _find_gold(session: Session, gold: GoldRun, mode: str, agent: str | None) -> GoldLabel | None:
    for g in _gold_labels(session, gold):
        if g.mode == mode and (g.agent or None) == (agent or None):
            return g
    return None


def _modes(tax: Taxonomy) -> list[str]:
    from app.taxonomies.service import mode_codes

    return mode_codes(tax)


# --------------------------------------------------------------------------------------------
# opening


def open_adjudication(session: Session, run: Run, tax: Taxonomy, reviewer: User | None = None) -> GoldRun:
    """Returns the run's GoldRun, created when missing.  While it is open, the unanimity
    candidates are (re)synchronised: each one without a gold label gets one (origin
    ``unanimity``, accepted); unanimity gold labels whose pair is no longer unanimous are
    dropped.  A pair the reviewer rejected (or undid) stays rejected.  The caller commits."""
    gold = get_gold_run(session, run, tax)
    if gold is None:
        gold = GoldRun(run_pk=run.id, taxonomy_pk=tax.id, status="open")
        session.add(gold)
        session.flush()
    if gold.status != "open":
        return gold
    cands = candidates(submitted_labels(session, run, tax), _modes(tax))
    unanimous = {(c["mode"], c["agent"]): c for c in cands if c["status"] == "unanimity"}
    existing = {}
    for g in _gold_labels(session, gold):
        key = (g.mode, g.agent or None)
        if g.origin == "unanimity" and key not in unanimous:
            session.delete(g)
            continue
        existing[key] = g
    for key, c in unanimous.items():
        if key not in existing:
            session.add(GoldLabel(gold_run_id=gold.id, mode=c["mode"], agent=c["agent"] or "",
                                  principals=c["principals"], evidence=c["evidence"], origin="unanimity",
                                  accepted=True, created_by=reviewer.id if reviewer else None))
    session.flush()
    return gold


def _require_open(gold: GoldRun, run: Run) -> None:
    if gold.status == "adjudicated":
        raise AdjudicationLocked(f"run {run.run_id} is adjudicated: reopen it before changing its gold labels")


# --------------------------------------------------------------------------------------------
# changing gold labels


def _clean_label(session: Session, run: Run, tax: Taxonomy, label: Any) -> dict[str, Any]:
    """Returns the label validated like an annotation label (only GOLD_LABEL_KEYS kept)."""
    if hasattr(label, "model_dump"):
        label = label.model_dump(exclude_none=True)
    if not isinstance(label, Mapping):
        raise AdjudicationError("label", f"must be an object with mode, agent, evidence, got {label!r}")
    unknown = sorted(set(label) - set(GOLD_LABEL_KEYS) - {"note"})
    if unknown:
        raise AdjudicationError(f"label.{unknown[0]}", f"unknown field (gold label fields: {', '.join(GOLD_LABEL_KEYS)})")
    try:
        clean = validate_labels(RunContext(session, run), tax, [dict(label)], complete=True)[0]
    except AnnotationError as exc:
        field = exc.field.replace("labels[0]", "label", 1) if exc.field.startswith("labels[0]") else exc.field
        raise AdjudicationError(field, exc.message) from None
    return {k: clean[k] for k in GOLD_LABEL_KEYS}


def _gold_label(session: Session, gold: GoldRun, gold_label_id: Any) -> GoldLabel:
    if isinstance(gold_label_id, str) and is_decimal(gold_label_id.strip()):
        gold_label_id = int(gold_label_id)
    if isinstance(gold_label_id, bool) or not isinstance(gold_label_id, int):
        raise AdjudicationError("gold_label_id", f"must be the id of a gold label, got {gold_label_id!r}")
    g = session.get(GoldLabel, gold_label_id)
    if g is None or g.gold_run_id != gold.id:
        raise AdjudicationError("gold_label_id", f"no gold label {gold_label_id} on this run")
    return g


def _text(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise AdjudicationError(field, f"must be text, got {value!r}")
    return value.strip() or None


def _candidate(session: Session, run: Run, tax: Taxonomy, mode: Any, agent: str | None) -> dict[str, Any]:
    cands = candidates(submitted_labels(session, run, tax), _modes(tax))
    cand = next((c for c in cands if c["mode"] == mode and c["agent"] == agent), None)
    if cand is None:
        raise AdjudicationError("mode", f"no submitted label of run {run.run_id} has mode {mode!r} and agent {agent!r}")
    return cand


def _origin(cand: Mapping[str, Any]) -> str:
    return cand["status"] if cand["status"] in ("unanimity", "majority") else "adjudication"


def accept(session: Session, gold: GoldRun, run: Run, tax: Taxonomy, mode: Any, agent: Any,
           reviewer: User, rationale: str | None = None, version: Any = None) -> GoldLabel:
    """Accepts the candidate (mode, agent) as gold and returns its gold label: an existing gold
    label of that pair (accepted, or rejected before) is accepted; otherwise a new one with the
    candidate's union evidence, origin ``unanimity`` / ``majority`` by its support, else
    ``adjudication``.  With ``version`` (the pair's gold label version as last read, 0: it had
    none) a decision taken elsewhere since raises GoldLabelStale and writes nothing."""
    _require_open(gold, run)
    agent = agent or None
    expected = _version_param(version, allow_zero=True)
    existing = _find_gold(session, gold, mode, agent)
    _check_decided_as_read(existing, expected, mode, agent)
    if existing is not None:
        _bump(session, existing, expected)
        existing.accepted = True
        existing.rationale = _text(rationale, "rationale") or existing.rationale
        session.add(existing)
        session.flush()
        return existing
    cand = _candidate(session, run, tax, mode, agent)
    clean = _clean_label(session, run, tax, {"mode": cand["mode"], "agent": cand["agent"],
                                             "principals": cand["principals"], "evidence": cand["evidence"]})
    g = GoldLabel(gold_run_id=gold.id, mode=clean["mode"], agent=clean["agent"], principals=clean["principals"],
                  evidence=clean["evidence"], origin=_origin(cand), accepted=True,
                  rationale=_text(rationale, "rationale"), created_by=reviewer.id)
    session.add(g)
    session.flush()
    return g


def reject(session: Session, gold: GoldRun, run: Run, tax: Taxonomy, mode: Any, agent: Any,
           reviewer: User, rationale: str | None = None, version: Any = None) -> GoldLabel:
    """Rejects the candidate (mode, agent): the reviewer's decision that it is not gold.  An
    existing gold label of that pair becomes ``accepted=False``; a candidate without one gets a
    gold label with ``accepted=False`` (its union evidence and principals, origin as
    :func:`accept` would give it), so the decision is stored and told apart from "not decided
    yet".  Returns the gold label.  ``version`` as in :func:`accept`."""
    _require_open(gold, run)
    agent = agent or None
    expected = _version_param(version, allow_zero=True)
    existing = _find_gold(session, gold, mode, agent)
    _check_decided_as_read(existing, expected, mode, agent)
    text = _text(rationale, "rationale")
    if existing is not None:
        _bump(session, existing, expected)
        existing.accepted = False
        existing.rationale = text or existing.rationale
        session.add(existing)
        session.flush()
        return existing
    cand = _candidate(session, run, tax, mode, agent)
    # not validated as a gold label: nothing of it becomes gold, and a trace-level candidate (no
    # evidence) must be rejectable too; its fields come from submitted, checked annotations
    g = GoldLabel(gold_run_id=gold.id, mode=cand["mode"], agent=cand["agent"] or "",
                  principals=list(cand["principals"]), evidence=list(cand["evidence"]), origin=_origin(cand),
                  accepted=False, rationale=text, created_by=reviewer.id)
    session.add(g)
    session.flush()
    return g


def set_accepted(session: Session, gold: GoldRun, run: Run, gold_label_id: Any, accepted: bool,
                 version: Any = None) -> GoldLabel:
    """Undoes (``accepted=False``) or restores a gold label; returns it.  With ``version`` (the
    gold label's version as last read) a stale change raises GoldLabelStale."""
    _require_open(gold, run)
    g = _gold_label(session, gold, gold_label_id)
    _bump(session, g, _version_param(version))
    g.accepted = bool(accepted)
    session.add(g)
    session.flush()
    return g


def add_label(session: Session, gold: GoldRun, run: Run, tax: Taxonomy, label: Any, reviewer: User,
              rationale: str | None = None) -> GoldLabel:
    """Adds a gold label written by the reviewer (origin ``adjudication``); returns it.  A
    not-accepted gold label of the same (mode, agent) is replaced; an accepted one is an error
    (edit it instead)."""
    _require_open(gold, run)
    clean = _clean_label(session, run, tax, label)
    existing = _find_gold(session, gold, clean["mode"], clean["agent"])
    if existing is not None and existing.accepted:
        raise AdjudicationError("label.mode", f"gold label {existing.id} already has mode {clean['mode']} and agent "
                                              f"{clean['agent']}: edit it instead")
    return _store_adjudicated(session, gold, existing, clean, reviewer, rationale)


def edit_label(session: Session, gold: GoldRun, run: Run, tax: Taxonomy, gold_label_id: Any, label: Any,
               reviewer: User, rationale: str | None = None, version: Any = None) -> GoldLabel:
    """Replaces a gold label's mode, agent, principals and evidence; it becomes origin
    ``adjudication`` and accepted.  Returns it.  With ``version`` (as last read) a stale edit
    raises GoldLabelStale and writes nothing."""
    _require_open(gold, run)
    g = _gold_label(session, gold, gold_label_id)
    expected = _version_param(version)
    clean = _clean_label(session, run, tax, label)
    _bump(session, g, expected)
    other = _find_gold(session, gold, clean["mode"], clean["agent"])
    if other is not None and other.id != g.id:
        raise AdjudicationError("label.mode", f"gold label {other.id} already has mode {clean['mode']} and agent "
                                              f"{clean['agent']}")
    g.mode, g.agent, g.principals, g.evidence = clean["mode"], clean["agent"], clean["principals"], clean["evidence"]
    g.origin, g.accepted, g.created_by = "adjudication", True, reviewer.id
    g.rationale = _text(rationale, "rationale") or g.rationale
    session.add(g)
    session.flush()
    return g


def merge_labels(session: Session, gold: GoldRun, run: Run, tax: Taxonomy, label_ids: Any, reviewer: User,
                 label: Mapping[str, Any] | None = None, rationale: str | None = None) -> GoldLabel:
    """Merges annotators' labels (``label_ids``: Label ids of submitted annotations of this run)
    into one gold label (origin ``adjudication``): mode and agent from ``label`` or, when all the
    merged labels share one, that one; evidence and principals the union (unless ``label`` gives
    them).  An existing gold label of the resulting (mode, agent) is replaced.  Returns it."""
    _require_open(gold, run)
    if isinstance(label_ids, (str, int)) or not isinstance(label_ids, (list, tuple)) or not label_ids:
        raise AdjudicationError("label_ids", f"must be a non-empty list of label ids, got {label_ids!r}")
    ids = []
    for i, v in enumerate(label_ids):
        if isinstance(v, str) and is_decimal(v.strip()):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise AdjudicationError(f"label_ids[{i}]", f"must be a label id, got {v!r}")
        ids.append(v)
    known = {lab["id"]: lab for a in submitted_labels(session, run, tax) for lab in a["labels"]}
    for i, v in enumerate(ids):
        if v not in known:
            raise AdjudicationError(f"label_ids[{i}]", f"{v} is not a submitted label of run {run.run_id}")
    picked = [known[v] for v in ids]
    given = dict(label or {})
    given = {k: v for k, v in given.items() if v not in (None, "", [])}
    for key in ("mode", "agent"):
        if key not in given:
            values = {p[key] for p in picked}
            if len(values) != 1:
                shown = ", ".join(sorted(str(v) for v in values))
                raise AdjudicationError(f"label.{key}", f"the merged labels differ in {key} ({shown}): choose one")
            given[key] = values.pop()
    given.setdefault("evidence", sorted({s for p in picked for s in p["evidence"]}))
    given.setdefault("principals", sorted({s for p in picked for s in p["principals"]}))
    clean = _clean_label(session, run, tax, given)
    return _store_adjudicated(session, gold, _find_gold(session, gold, clean["mode"], clean["agent"]), clean,
                              reviewer, rationale)


def _store_adjudicated(session: Session, gold: GoldRun, existing: GoldLabel | None, clean: dict,
                       reviewer: User, rationale: str | None) -> GoldLabel:
    """Write `clean` (a checked label) into `existing` or a new gold label, as accepted adjudication."""
    if existing is not None:
        _bump(session, existing)
    g = existing or GoldLabel(gold_run_id=gold.id, mode=clean["mode"], agent=clean["agent"])
    g.principals, g.evidence = clean["principals"], clean["evidence"]
    g.origin, g.accepted, g.created_by = "adjudication", True, reviewer.id
    g.rationale = _text(rationale, "rationale")
    session.add(g)
    session.flush()
    return g


def remove_label(session: Session, gold: GoldRun, run: Run, gold_label_id: Any, version: Any = None) -> None:
    """Deletes a gold label.  Unanimity labels cannot be deleted (they would come back when the
    adjudication is opened again): undo them instead.  With ``version`` a stale removal raises
    GoldLabelStale."""
    _require_open(gold, run)
    g = _gold_label(session, gold, gold_label_id)
    if g.origin == "unanimity":
        raise AdjudicationError("gold_label_id", "a unanimity label cannot be removed: undo it instead")
    _bump(session, g, _version_param(version))
    session.delete(g)
    session.flush()


def finish(session: Session, gold: GoldRun, run: Run, reviewer: User, rationale: Any) -> GoldRun:
    """Marks the run adjudicated with the reviewer and the rationale (required); ``no_failure``
    when no accepted gold label remains.  Returns the GoldRun."""
    _require_open(gold, run)
    text = _text(rationale, "rationale")
    if not text:
        raise AdjudicationError("rationale", "a rationale is required to finish the adjudication")
    gold.status = "adjudicated"
    gold.no_failure = not any(g.accepted for g in _gold_labels(session, gold))
    gold.reviewer_id = reviewer.id
    gold.rationale = text
    gold.updated_at = utcnow()
    session.add(gold)
    session.flush()
    return gold


def reopen(session: Session, gold: GoldRun, reviewer: User) -> GoldRun:
    """Sets an adjudicated run back to ``open`` (its gold labels stay); returns the GoldRun."""
    gold.status = "open"
    gold.reviewer_id = reviewer.id
    gold.updated_at = utcnow()
    session.add(gold)
    session.flush()
    return gold


# --------------------------------------------------------------------------------------------
# one entry point for the API and the pages


def apply_action(session: Session, run: Run, tax: Taxonomy, reviewer: User, action: str,
                 params: Mapping[str, Any]) -> str:
    """Applies one adjudication ``action`` (see :data:`ACTIONS`) with ``params`` (``mode``,
    ``agent``, ``gold_label_id``, ``label``, ``label_ids``, ``rationale``) and returns a one-line
    summary of what changed.  Raises AdjudicationError (bad input, naming the field) or
    AdjudicationLocked (run adjudicated)."""
    if action not in ACTIONS:
        raise AdjudicationError("action", f"must be one of {', '.join(ACTIONS)}, got {action!r}")
    gold = open_adjudication(session, run, tax, reviewer)
    rationale = params.get("rationale")
    if action in ("accept", "reject", "add", "merge"):
        _lock_gold_run(session, gold)  # these look for the pair's gold label, then may create it
    if action in ("accept", "reject"):
        mode = params.get("mode")
        if not isinstance(mode, str) or not mode:
            raise AdjudicationError("mode", f"the mode of the label to {action} is required, got {mode!r}")
        agent = params.get("agent")
        if agent is not None and not isinstance(agent, str):
            raise AdjudicationError("agent", f"must be an agent id, got {agent!r}")
        if action == "accept":
            g = accept(session, gold, run, tax, mode, agent, reviewer, rationale, params.get("version"))
            return f"accepted {g.mode} ({g.agent or 'no agent'}) as gold, origin {g.origin}"
        g = reject(session, gold, run, tax, mode, agent, reviewer, rationale, params.get("version"))
        return f"rejected {g.mode} ({g.agent or 'no agent'}): not gold"
    if action in ("undo", "restore"):
        g = set_accepted(session, gold, run, params.get("gold_label_id"), action == "restore", params.get("version"))
        return f"{'restored' if g.accepted else 'rejected'} gold label {g.mode} ({g.agent or 'no agent'})"
    if action == "add":
        g = add_label(session, gold, run, tax, params.get("label"), reviewer, rationale)
        return f"added gold label {g.mode} ({g.agent})"
    if action == "edit":
        g = edit_label(session, gold, run, tax, params.get("gold_label_id"), params.get("label"), reviewer, rationale,
                       params.get("version"))
        return f"edited gold label {g.id}: {g.mode} ({g.agent})"
    if action == "merge":
        g = merge_labels(session, gold, run, tax, params.get("label_ids"), reviewer, params.get("label"), rationale)
        return f"merged {len(params.get('label_ids') or [])} label(s) into gold label {g.mode} ({g.agent})"
    if action == "remove":
        remove_label(session, gold, run, params.get("gold_label_id"), params.get("version"))
        return "removed the gold label"
    if action == "finish":
        finish(session, gold, run, reviewer, rationale)
        return f"run {run.run_id} adjudicated" + (" (no failure)" if gold.no_failure else "")
    reopen(session, gold, reviewer)
    return f"run {run.run_id} reopened"


def adjudication_view(session: Session, run: Run, tax: Taxonomy) -> dict[str, Any]:
    """Returns the JSON shape of a run's adjudication: ``run_id``, ``taxonomy``, ``status``,
    ``no_failure``, ``reviewer``, ``rationale``, ``updated_at``, ``agents``, ``principals``,
    ``n_humans``, ``annotators`` (see :func:`submitted_labels`), ``candidates`` (see
    :func:`candidates`, each with ``gold_label_id``, ``gold_version`` (0: none) and ``accepted``
    of its gold label if any, and ``decision``: ``accepted`` | ``rejected`` | None, undecided),
    ``decided`` (``{candidates, accepted, rejected, undecided}`` counts) and ``gold`` (``{id,
    mode, agent, principals, evidence, origin, accepted, rationale, created_by, version}``)."""
    gold = get_gold_run(session, run, tax)
    anns = submitted_labels(session, run, tax)
    cands = candidates(anns, _modes(tax))
    golds = _gold_labels(session, gold) if gold is not None else []
    user_ids = {g.created_by for g in golds if g.created_by}
    if gold is not None and gold.reviewer_id:
        user_ids.add(gold.reviewer_id)
    names = dict(session.execute(select(User.id, User.username).where(User.id.in_(user_ids))).all()) if user_ids else {}
    by_pair = {(g.mode, g.agent or None): g for g in golds}
    for c in cands:
        g = by_pair.get((c["mode"], c["agent"]))
        c["gold_label_id"] = g.id if g else None
        c["gold_version"] = g.version if g else 0
        c["accepted"] = bool(g.accepted) if g else False
        c["decision"] = None if g is None else ("accepted" if g.accepted else "rejected")
    decided = {"candidates": len(cands), "accepted": sum(1 for c in cands if c["decision"] == "accepted"),
               "rejected": sum(1 for c in cands if c["decision"] == "rejected")}
    decided["undecided"] = decided["candidates"] - decided["accepted"] - decided["rejected"]
    return {
        "run_id": run.run_id,
        "taxonomy": f"{tax.key}@{tax.version}",
        "status": gold.status if gold else "not opened",
        "no_failure": bool(gold.no_failure) if gold else False,
        "reviewer": names.get(gold.reviewer_id) if gold and gold.reviewer_id else None,
        "rationale": gold.rationale if gold else None,
        "updated_at": gold.updated_at.isoformat() if gold and gold.updated_at else None,
        "agents": list(session.execute(select(Agent.agent_id).where(Agent.run_pk == run.id)
                                       .order_by(Agent.position)).scalars()),
        "principals": list(session.execute(select(Principal.principal_id).where(Principal.run_pk == run.id)
                                           .order_by(Principal.position)).scalars()),
        "n_humans": sum(1 for a in anns if a["kind"] == "human"),
        "annotators": anns,
        "candidates": cands,
        "decided": decided,
        "gold": [gold_label_dict(g, names) for g in golds],
    }

