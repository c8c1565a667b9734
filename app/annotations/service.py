"""Annotation services. Plain functions that take a session.

`save_annotation` creates or replaces one annotator's annotation of a run under one taxonomy
version (validating every label against the run and the taxonomy); `list_annotations` reads them
back under blind mode; `sync_audit_annotations` turns a run's audits into judge annotations.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from sqlalchemy import (
    BigInteger,
    String,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    union_all,
    update,
)
from sqlmodel import Session, select

from app.annotations.models import Annotation, GoldRun, Label
from app.auth.models import User
from app.auth.service import judge_user
from app.core.errors import FieldError
from app.core.text import is_decimal
from app.runs.models import Agent, Event, Principal, Run, utcnow
from app.taxonomies.models import Taxonomy


def sync_audit_annotations(session: Session, run_row: Run, run: dict, tax_cache: dict | None = None) -> None:
    """Turn the run's audits into submitted annotations by `judge:<source>` users.

    One annotation per (source, taxonomy). A source listed in `metadata.audited_by` that flagged
    nothing in this run gets an explicit "no failure found" annotation (its silence is data).
    Audits whose mode is in no known taxonomy are kept in the audit table only.

    Imported datasets (MAD, Who&When) add, in an audit's `metadata`: `taxonomy` (`key` or
    `key@version`: the labels go under that version instead of the first taxonomy having the
    mode), `annotator_kind: "human"` with `annotator` (the labels belong to that human
    annotator, not to a judge). An audit with `mode: null` is an attribution-only label. An
    `audited_by` entry may be an object `{source, taxonomy?, annotator_kind?, annotator?}`.
    """
    tax_cache = tax_cache if tax_cache is not None else {}
    old = session.exec(select(Annotation.id).where(Annotation.run_pk == run_row.id,
                                                   Annotation.origin == "audit")).all()
    if old:
        session.execute(delete(Label).where(Label.annotation_id.in_(old)))
        session.execute(delete(Annotation).where(Annotation.id.in_(old)))
    insert_audit_annotations(session, [(run_row.id, run)], tax_cache)


def _audit_groups(session: Session, run: dict, tax_cache: dict) -> tuple[dict[tuple[str, str, int], list[dict]],
                                                                          dict[int, Taxonomy]]:
    """The annotations `sync_audit_annotations` makes of one run: ``{(annotator name, kind,
    taxonomy id): [audits]}`` in the order they are made, and the taxonomies by id."""
    from app.taxonomies.service import canonical_mode, latest, resolve, taxonomy_for_mode

    refs = tax_cache.setdefault("refs", {})

    def by_ref(ref: str) -> Taxonomy | None:
        if ref not in refs:
            refs[ref] = resolve(session, ref)
        return refs[ref]

    def who(source: str, meta: dict) -> tuple[str, str]:
        if meta.get("annotator_kind") == "human" and isinstance(meta.get("annotator"), str) and meta["annotator"]:
            return meta["annotator"], "human"
        return source, "judge"

    groups: dict[tuple[str, str, int], list[dict]] = {}
    taxes = {}
    if "default_tax" not in tax_cache:  # looked up (and its JSON decoded) once per import, not per run
        tax_cache["default_tax"] = latest(session, "a2-failures")
    default_tax = tax_cache["default_tax"]
    for audit in run.get("audits") or []:
        meta = audit.get("metadata") or {}
        ref = meta.get("taxonomy")
        if isinstance(ref, str) and ref:
            tax = by_ref(ref)
            if tax is not None and audit["mode"] is not None and canonical_mode(tax, audit["mode"]) is None:
                tax = None
        elif audit["mode"] is None:
            tax = default_tax
        else:
            tax = taxonomy_for_mode(session, audit["mode"], tax_cache)
        if tax is None:
            continue
        taxes[tax.id] = tax
        name, kind = who(audit["source"], meta)
        groups.setdefault((name, kind, tax.id), []).append(audit)
    audited_by = (run.get("metadata") or {}).get("audited_by") or []
    for entry in audited_by if isinstance(audited_by, list) else []:
        if isinstance(entry, str):
            entry = {"source": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str) or not entry["source"]:
            continue
        ref = entry.get("taxonomy")
        tax = by_ref(ref) if isinstance(ref, str) and ref else default_tax
        if tax is None:
            continue
        taxes.setdefault(tax.id, tax)
        name, kind = who(entry["source"], entry)
        if "taxonomy" in entry:
            groups.setdefault((name, kind, tax.id), [])
        elif not any(k[0] == name for k in groups):
            groups[(name, kind, tax.id)] = []
    return groups, taxes


def insert_audit_annotations(session: Session, runs: Sequence[tuple[int, dict]], tax_cache: dict) -> None:
    """The judge annotations `sync_audit_annotations` makes, for runs (``(run pk, run)``) that
    have none from audits yet (just stored), all at once: one INSERT of the annotations
    returning their ids, one of their labels."""
    from app.taxonomies.service import canonical_mode

    now = utcnow()
    users = tax_cache.setdefault("annotator_ids", {})
    annotations: list[dict[str, Any]] = []
    made: list[tuple[Taxonomy, list[dict]]] = []
    for run_pk, run in runs:
        groups, taxes = _audit_groups(session, run, tax_cache)
        for (name, kind, tax_id), audits in groups.items():
            if (name, kind) not in users:
                users[(name, kind)] = (judge_user(session, name) if kind == "judge"
                                       else imported_human_user(session, name)).id
            annotations.append({"run_pk": run_pk, "user_id": users[(name, kind)], "taxonomy_pk": tax_id,
                                "status": "submitted", "no_failure": not audits, "origin": "audit", "time_ms": 0,
                                "note": None, "started_at": now, "updated_at": now, "submitted_at": now,
                                "hints_on": None, "source_version": None, "version": 1})
            made.append((taxes[tax_id], audits))
    if not annotations:
        return
    table = Annotation.__table__
    conn = session.connection()
    ids = conn.execute(insert(table).returning(table.c.id, sort_by_parameter_order=True), annotations).scalars().all()
    rows = [{"annotation_id": ann_id,
             "mode": None if a["mode"] is None else (canonical_mode(tax, a["mode"]) or a["mode"]),
             "agent": a.get("agent") or "", "principals": [], "evidence": list(a.get("evidence") or []),
             "note": a.get("note"), "confidence": None, "time_ms": 0, "created_at": now}
            for ann_id, (tax, audits) in zip(ids, made) for a in audits]
    if rows:
        conn.execute(insert(Label.__table__), rows)


def imported_human_user(session: Session, name: str) -> User:
    """The annotator `name` of an imported dataset (e.g. `mad:annotator_1`, `whowhen:annotators`),
    created on first use as a source (kind "source", no password: it cannot log in, is never
    assignable and is not listed among the users)."""
    from app.auth.models import source_name_for
    from app.auth.service import get_user

    user = get_user(session, name)
    if user is None:
        user = User(username=name, role="annotator", kind="source", source_name=source_name_for(name, "source"))
        session.add(user)
        session.flush()
    return user


# --------------------------------------------------------------------------- saving annotations

STATUSES = ("draft", "submitted")
#: The label fields a request may send (anything else is refused, so typos do not vanish).
LABEL_KEYS = ("mode", "agent", "principals", "evidence", "note", "confidence", "time_ms")


class AnnotationError(FieldError):
    """Bad annotation input. `field` is the path of the offending value (e.g. `labels[1].agent`)."""


class NotFoundError(LookupError):
    """The run, taxonomy or annotation asked for does not exist."""


class LockedError(RuntimeError):
    """The run is adjudicated under this taxonomy version: its annotations can no longer change."""


def tax_ref(tax: Taxonomy) -> str:
    """Returns `key@version`, the way users name one taxonomy version."""
    return f"{tax.key}@{tax.version}"


def resolve_taxonomy(session: Session, ref: str | None, field: str = "taxonomy") -> Taxonomy:
    """Returns the taxonomy version named by `ref` (`key`, `key@version`, numeric id, or None for
    the default a2-failures latest); raises AnnotationError naming `field` when there is none."""
    from app.taxonomies.service import resolve

    if ref is not None and not isinstance(ref, str):
        raise AnnotationError(field, f"must be a taxonomy key like 'a2-failures' or 'a2-failures@1', got {ref!r}")
    tax = resolve(session, ref.strip() if isinstance(ref, str) else None)
    if tax is None:
        raise AnnotationError(field, f"unknown taxonomy {ref!r}" if ref else "no taxonomy is registered")
    return tax


def get_run_or_error(session: Session, run_id: Any, field: str = "run_id", *, ids_only: bool = False) -> Run:
    """Returns the Run row with this run_id; raises NotFoundError (AnnotationError if not text).
    `ids_only`: only `id` and `run_id` are read (what a save needs; the rest loads on access)."""
    from sqlalchemy.orm import load_only

    from app.runs.service import get_run

    if not isinstance(run_id, str) or not run_id.strip():
        raise AnnotationError(field, f"must be a non-empty run id, got {run_id!r}")
    run = (session.exec(select(Run).where(Run.run_id == run_id).options(load_only(Run.id, Run.run_id))).first()
           if ids_only else get_run(session, run_id))
    if run is None:
        raise NotFoundError(f"no run {run_id!r}")
    return run


class RunContext:
    """The agent ids, principal ids and event seqs of one run (what labels may refer to).

    With `labels`, only the ids those labels name are looked up, all in one query (a save
    names a few; a long run has thousands of events): `validate_labels` asks only about ids the
    labels name, so it gives the same answers and errors as with the whole run loaded."""

    #: most ids looked up by name in one query; beyond it the run's ids are all loaded
    MAX_REFS = 500

    def __init__(self, session: Session, run: Run, labels: Sequence[Any] | None = None):
        self.run_id = run.run_id
        refs = _references(labels) if labels is not None else None
        if refs is None or sum(len(r) for r in refs) > self.MAX_REFS:
            self.agents = set(session.exec(select(Agent.agent_id).where(Agent.run_pk == run.id)).all())
            self.principals = set(session.exec(select(Principal.principal_id)
                                               .where(Principal.run_pk == run.id)).all())
            self.seqs = set(session.exec(select(Event.seq).where(Event.run_pk == run.id)).all())
            return
        agents, principals, seqs = refs
        self.agents, self.principals, self.seqs = set(), set(), set()
        parts = []
        if agents:
            parts.append(select(literal("a"), Agent.agent_id).where(Agent.run_pk == run.id,
                                                                    Agent.agent_id.in_(agents)))
        if principals:
            parts.append(select(literal("p"), Principal.principal_id).where(
                Principal.run_pk == run.id, Principal.principal_id.in_(principals)))
        if seqs:
            parts.append(select(literal("s"), cast(Event.seq, String)).where(Event.run_pk == run.id,
                                                                             Event.seq.in_(seqs)))
        if not parts:
            return
        stmt = parts[0] if len(parts) == 1 else union_all(*parts)
        for kind, value in session.execute(stmt).all():
            if kind == "a":
                self.agents.add(value)
            elif kind == "p":
                self.principals.add(value)
            else:
                self.seqs.add(int(value))


#: event seqs are 32-bit integers in the database; a seq outside cannot name an event
_SEQ_RANGE = (-(2**31), 2**31 - 1)


def _references(labels: Any) -> tuple[list[str], list[str], list[int]] | None:
    """The agent ids, principal ids and event seqs that `labels` name, where they are well
    formed (what is not is refused by `validate_labels` before any lookup would matter); None
    when `labels` is not a list."""
    if labels is None:
        return [], [], []
    if not isinstance(labels, (list, tuple)):
        return None
    agents: dict[str, None] = {}
    principals: dict[str, None] = {}
    seqs: dict[int, None] = {}

    def text_id(v: Any) -> bool:  # a NUL cannot be sent to PostgreSQL; it names nothing anyway
        return isinstance(v, str) and bool(v) and "\x00" not in v

    for raw in labels:
        lab = raw.model_dump() if hasattr(raw, "model_dump") else raw
        if not isinstance(lab, Mapping):
            continue
        if text_id(lab.get("agent")):
            agents[lab["agent"]] = None
        for key, into in (("principals", principals), ("evidence", seqs)):
            values = lab.get(key)
            if not isinstance(values, list):
                continue
            for v in values:
                if key == "principals":
                    if text_id(v):
                        into[v] = None
                    continue
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                if isinstance(v, int) and not isinstance(v, bool) and _SEQ_RANGE[0] <= v <= _SEQ_RANGE[1]:
                    into[v] = None
    return list(agents), list(principals), list(seqs)


def _label_rules(tax: Taxonomy) -> dict[str, tuple[bool, int]]:
    """Returns {field: (required, min_items)} from the taxonomy's `label_fields` (defaults: agent
    required, at least one evidence event)."""
    rules = {"agent": (True, 0), "evidence": (True, 1), "principals": (False, 0)}
    for f in tax.definition.get("label_fields") or []:
        name = f.get("name")
        if name in rules:
            rules[name] = (bool(f.get("required")), int(f.get("min_items") or 0))
    return rules


def _as_mapping(label: Any, field: str) -> Mapping[str, Any]:
    if hasattr(label, "model_dump"):
        label = label.model_dump()
    if not isinstance(label, Mapping):
        raise AnnotationError(field, f"a label must be an object, got {type(label).__name__}")
    return label


def _text_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnnotationError(field, f"must be a list of ids, got {value!r}")
    for j, v in enumerate(value):
        if not isinstance(v, str) or not v.strip():
            raise AnnotationError(f"{field}[{j}]", f"must be a non-empty id, got {v!r}")
    return list(dict.fromkeys(value))


def _seq_list(value: Any, field: str) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnnotationError(field, f"must be a list of event seqs, got {value!r}")
    out = []
    for j, v in enumerate(value):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise AnnotationError(f"{field}[{j}]", f"must be an event seq (integer), got {v!r}")
        out.append(v)
    return list(dict.fromkeys(out))


def validate_labels(ctx: RunContext, tax: Taxonomy, labels: Sequence[Any], *, complete: bool = True,
                    imported: bool = False) -> list[dict]:
    """Check `labels` against the run and taxonomy version; returns them normalized (mode codes
    resolved from aliases, duplicate ids dropped) as dicts with the LABEL_KEYS.

    With `complete=False` (drafts) the required fields and minimum evidence are not enforced, but
    every value that is given must still be valid. With `imported=True` (labels made elsewhere)
    a label may be trace-level (a mode, no agent, no evidence) or attribution-only (no mode, an
    agent and at least one evidence event). Raises AnnotationError naming `labels[i].field`.
    """
    from app.taxonomies.service import attribution_schema, canonical_mode

    if labels is None:
        labels = []
    if not isinstance(labels, (list, tuple)):
        raise AnnotationError("labels", f"must be a list of labels, got {type(labels).__name__}")
    rules = _label_rules(tax)
    attribution = attribution_schema(tax)
    out = []
    for i, raw in enumerate(labels):
        p = f"labels[{i}]"
        lab = _as_mapping(raw, p)
        unknown = sorted(set(lab) - set(LABEL_KEYS))
        if unknown:
            raise AnnotationError(f"{p}.{unknown[0]}", f"unknown field (label fields: {', '.join(LABEL_KEYS)})")
        mode = lab.get("mode")
        if (imported or attribution is not None) and (mode is None or mode == ""):
            code = None  # attribution-only: checked below, once agent and evidence are read
        elif not isinstance(mode, str) or not mode.strip():
            raise AnnotationError(f"{p}.mode", f"a failure mode code is required, got {mode!r}")
        else:
            code = canonical_mode(tax, mode)
            if code is None:
                raise AnnotationError(f"{p}.mode", f"{mode!r} is not a mode of taxonomy {tax_ref(tax)}")
        agent = lab.get("agent")
        if agent is None or (isinstance(agent, str) and not agent.strip()):
            if complete and rules["agent"][0] and not imported:
                raise AnnotationError(f"{p}.agent", "the responsible agent is required")
            agent = ""
        elif not isinstance(agent, str):
            raise AnnotationError(f"{p}.agent", f"must be an agent id, got {agent!r}")
        elif agent not in ctx.agents:
            raise AnnotationError(f"{p}.agent", f"{agent!r} is not an agent of run {ctx.run_id}")
        principals = _text_list(lab.get("principals"), f"{p}.principals")
        for j, pr in enumerate(principals):
            if pr not in ctx.principals:
                raise AnnotationError(f"{p}.principals[{j}]", f"{pr!r} is not a principal of run {ctx.run_id}")
        evidence = _seq_list(lab.get("evidence"), f"{p}.evidence")
        for j, seq in enumerate(evidence):
            if seq not in ctx.seqs:
                raise AnnotationError(f"{p}.evidence[{j}]", f"{seq} is not an event seq of run {ctx.run_id}")
        if code is None and attribution is not None and not imported:
            # an attribution (agent, step, reason): drafts may be incomplete
            if complete and not agent:
                raise AnnotationError(f"{p}.agent", "an attribution names the responsible agent")
            if complete and len(evidence) != 1:
                raise AnnotationError(f"{p}.evidence", "an attribution names one step: the event of the decisive "
                                                       f"mistake (got {len(evidence)})")
            if complete and attribution.get("reason") == "required" and not (lab.get("note") or "").strip():
                raise AnnotationError(f"{p}.note", "the reason is required by this taxonomy")
        elif code is None and (not agent or not evidence):
            raise AnnotationError(f"{p}.mode", "a label without a mode is an attribution and needs an agent "
                                               "and at least one evidence event")
        if complete and not imported and code is not None:
            for name, values in (("evidence", evidence), ("principals", principals)):
                required, min_items = rules[name]
                need = max(min_items, 1 if required else 0)
                if len(values) < need:
                    raise AnnotationError(f"{p}.{name}", f"at least {need} required" + (
                        " (the seq of an event that shows the failure)" if name == "evidence" else ""))
        confidence = lab.get("confidence")
        if confidence is not None:
            if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
                    or not math.isfinite(confidence) or not 0 <= confidence <= 1:
                raise AnnotationError(f"{p}.confidence", f"must be a number from 0 to 1, got {confidence!r}")
            confidence = float(confidence)
        note = lab.get("note")
        if note is not None and not isinstance(note, str):
            raise AnnotationError(f"{p}.note", f"must be text, got {note!r}")
        if note and "\x00" in note:
            raise AnnotationError(f"{p}.note", NUL_MESSAGE)
        time_ms = _time_ms(lab.get("time_ms"), f"{p}.time_ms")
        out.append({"mode": code, "agent": agent, "principals": principals, "evidence": evidence,
                    "note": note or None, "confidence": confidence, "time_ms": time_ms})
    return out


NUL_MESSAGE = "contains a NUL character (\\u0000), which the database cannot store"
#: largest time in ms the database keeps (a 32-bit integer column: about 24.8 days)
MAX_TIME_MS = 2**31 - 1


def _time_ms(value: Any, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TIME_MS:
        raise AnnotationError(field, f"must be a whole number of milliseconds >= 0 and <= {MAX_TIME_MS}, got {value!r}")
    return value


def is_adjudicated(session: Session, run: Run, tax: Taxonomy) -> bool:
    """True when the run's gold labels under this taxonomy version are final."""
    gold = session.exec(select(GoldRun).where(GoldRun.run_pk == run.id, GoldRun.taxonomy_pk == tax.id)).first()
    return gold is not None and gold.status == "adjudicated"


def find_annotation(session: Session, user: User, run: Run, tax: Taxonomy) -> Annotation | None:
    """Returns `user`'s annotation of `run` under this taxonomy version, or None."""
    return session.exec(select(Annotation).where(Annotation.run_pk == run.id, Annotation.user_id == user.id,
                                                 Annotation.taxonomy_pk == tax.id)).first()


class StaleVersionError(RuntimeError):
    """The annotation changed since the client read it: `current` is the stored annotation
    (None when it was deleted); nothing was written."""

    def __init__(self, message: str, current: Annotation | None):
        super().__init__(message)
        self.current = current


def _insert_stmt(session: Session, table):
    """An INSERT for `table` that supports ON CONFLICT on this session's database."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    return dialect_insert(table)


def save_annotation(session: Session, user: User, run: Run, taxonomy: Taxonomy, labels: Sequence[Any],
                    no_failure: bool = False, status: str = "draft", time_ms: int = 0,
                    note: str | None = None, *, origin: str = "human", check_lock: bool = True,
                    imported: bool = False, version: int | None = None) -> Annotation:
    """Create or replace `user`'s annotation of `run` under `taxonomy` (one version) and return it.

    Labels are validated (see `validate_labels`; drafts may be incomplete). `status="submitted"`
    needs labels or `no_failure=True` and sets `submitted_at`; `status="draft"` on a submitted
    annotation withdraws the submission. `time_ms` (time spent since the client's last save) is
    added to the stored total atomically (`time_ms = time_ms + :d` in the database); each
    label's `time_ms` is stored as sent. `imported=True` accepts trace-level and attribution-only
    labels (see `validate_labels`). Raises AnnotationError on bad input and LockedError once the
    run is adjudicated under this taxonomy version.

    Optimistic concurrency: `version` is the annotation version the client last saw (0: it saw
    none); when the stored one differs, StaleVersionError carries the current annotation and
    nothing is written. `version=None` saves unconditionally (last writer wins). The first save
    is an upsert (INSERT ... ON CONFLICT DO NOTHING), so two concurrent first saves never fail
    on the unique key: one creates, the other updates (or gets StaleVersionError with version 0).
    """
    return _save(session, user, run, taxonomy, labels, no_failure, status, time_ms, note, origin=origin,
                 check_lock=check_lock, imported=imported, version=version)[0]


def save_annotation_to_api(session: Session, user: User, run: Run, taxonomy: Taxonomy, labels: Sequence[Any],
                           no_failure: bool = False, status: str = "draft", time_ms: int = 0,
                           note: str | None = None, *, version: int | None = None) -> dict[str, Any]:
    """`save_annotation` of a human's own annotation, answering its API shape (as
    `annotations_to_api`) built from what was written, without reading it back."""
    ann, clean = _save(session, user, run, taxonomy, labels, no_failure, status, time_ms, note, version=version)
    return annotation_to_api(ann, run.run_id, user, taxonomy, clean)


def _save_checks(session: Session, user: User, run: Run, tax: Taxonomy, *, locks: bool,
                 hints: bool) -> tuple[bool, bool, bool]:
    """(adjudicated, recording, hints on) of this save, in one query: the gold run's status under
    `tax` and whether the run is still recording (with `locks`), and whether detector hints are
    on for `user` and `run` (with `hints`; see `app.detectors.service.hints_enabled`)."""
    from app.annotations.models import AppSetting, Assignment
    from app.capture.models import LiveRun
    from app.detectors.service import HINT_BATCHES_KEY

    cols = []
    if locks:
        cols.append(exists().where(GoldRun.run_pk == run.id, GoldRun.taxonomy_pk == tax.id,
                                   GoldRun.status == "adjudicated"))
        cols.append(exists().where(LiveRun.run_id == run.run_id, LiveRun.state == "recording"))
    if hints:
        cols.append(select(AppSetting.value).where(AppSetting.key == HINT_BATCHES_KEY).scalar_subquery())
        cols.append(select(Assignment.batch).where(Assignment.run_pk == run.id, Assignment.user_id == user.id,
                                                   Assignment.batch.is_not(None)).distinct()
                    .limit(1).scalar_subquery())
    if not cols:
        return False, False, False
    row = list(session.execute(select(*cols)).one())
    adjudicated, recording = (bool(row.pop(0)), bool(row.pop(0))) if locks else (False, False)
    on = False
    if hints:
        batches, first = row
        if isinstance(batches, list) and batches and first is not None:
            # the user may have this run in several batches: only then is a second query needed
            on = first in batches or session.exec(
                select(Assignment.id).where(Assignment.run_pk == run.id, Assignment.user_id == user.id,
                                            Assignment.batch.in_(batches))).first() is not None
    return adjudicated, recording, on


def _save(session: Session, user: User, run: Run, taxonomy: Taxonomy, labels: Sequence[Any],
          no_failure: bool = False, status: str = "draft", time_ms: int = 0, note: str | None = None, *,
          origin: str = "human", check_lock: bool = True, imported: bool = False,
          version: int | None = None) -> tuple[Annotation, list[dict]]:
    """`save_annotation`; also returns the labels written (normalized, in their order)."""
    if status not in STATUSES:
        raise AnnotationError("status", f"must be 'draft' or 'submitted', got {status!r}")
    if not isinstance(no_failure, bool):
        raise AnnotationError("no_failure", f"must be true or false, got {no_failure!r}")
    if note is not None and not isinstance(note, str):
        raise AnnotationError("note", f"must be text, got {note!r}")
    if note and "\x00" in note:
        raise AnnotationError("note", NUL_MESSAGE)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise AnnotationError("version", f"must be the annotation version last read (0 for none), got {version!r}")
    time_ms = _time_ms(time_ms, "time_ms")
    ctx = RunContext(session, run, labels)
    clean = validate_labels(ctx, taxonomy, labels, complete=status == "submitted", imported=imported)
    if no_failure and clean:
        raise AnnotationError("no_failure", f"'no failure found' cannot be marked together with {len(clean)} label(s)")
    if status == "submitted" and not clean and not no_failure:
        raise AnnotationError("labels", "a submitted annotation needs at least one label or no_failure=true")
    mark_hints = user.kind == "human" and origin == "human"  # whether hints were on (once on, it stays on)
    adjudicated, recording, hints_on = _save_checks(session, user, run, taxonomy, locks=check_lock,
                                                    hints=mark_hints)
    if adjudicated:
        raise LockedError(f"run {run.run_id} is adjudicated under {tax_ref(taxonomy)}: its annotations can no longer change")
    if recording:
        raise LockedError(f"run {run.run_id} is still recording (live capture): it can be annotated once final")
    now = utcnow()
    values = {"status": status, "no_failure": no_failure, "origin": origin, "note": note or None,
              "updated_at": now, "submitted_at": now if status == "submitted" else None}
    key = {"run_pk": run.id, "user_id": user.id, "taxonomy_pk": taxonomy.id}
    table = Annotation.__table__
    # the row written comes back with RETURNING, as an ORM object (no read after the write)
    orm = {"populate_existing": True}
    ann = None
    if not version:  # None or 0: no version seen, so this may be the first save
        first = dict(values, time_ms=time_ms, started_at=now, version=1)
        if mark_hints:
            first["hints_on"] = hints_on
        stmt = (_insert_stmt(session, Annotation).values(**key, **first)
                .on_conflict_do_nothing(index_elements=["run_pk", "user_id", "taxonomy_pk"])
                .returning(Annotation))
        ann = session.scalars(stmt, execution_options=orm).first()
    if ann is None:  # it exists: compare-and-swap on the version, add the time in the database
        total = cast(table.c.time_ms, BigInteger) + time_ms  # no 32-bit overflow before the cap
        where = [table.c.run_pk == run.id, table.c.user_id == user.id, table.c.taxonomy_pk == taxonomy.id]
        if version is not None:
            where.append(table.c.version == version)
        more = dict(values, version=table.c.version + 1,
                    time_ms=case((total > MAX_TIME_MS, MAX_TIME_MS), else_=total))  # the total saturates
        if mark_hints:
            more["hints_on"] = True if hints_on else func.coalesce(table.c.hints_on, False)
        stmt = update(Annotation).where(*where).values(**more).returning(Annotation)
        ann = session.scalars(stmt, execution_options={**orm, "synchronize_session": False}).first()
        if ann is None:
            current = find_annotation(session, user, run, taxonomy)
            if current is not None:
                session.refresh(current)
            seen = "none" if not version else f"version {version}"
            now_at = f"version {current.version}" if current is not None else "no annotation (it was deleted)"
            raise StaleVersionError(f"annotation changed elsewhere: you last saw {seen}, the stored one is {now_at}; "
                                    "reload it, or send its current version to overwrite it", current)
        session.execute(delete(Label).where(Label.annotation_id == ann.id))
    if clean:
        session.execute(insert(Label.__table__), [{"annotation_id": ann.id, "created_at": now, **lab} for lab in clean])
    return ann, clean


# --------------------------------------------------------------------------- reading annotations

def annotations_to_api(session: Session, anns: Sequence[Annotation]) -> list[dict[str, Any]]:
    """Returns the API shape of each annotation (same order), with labels, run id, annotator name
    and taxonomy `{id, key, version}`; looks everything up in a few queries."""
    if not anns:
        return []
    ids = [a.id for a in anns]
    runs = dict(session.exec(select(Run.id, Run.run_id).where(Run.id.in_({a.run_pk for a in anns}))).all())
    users = {u.id: u for u in session.exec(select(User).where(User.id.in_({a.user_id for a in anns}))).all()}
    taxes = {t.id: t for t in session.exec(select(Taxonomy).where(Taxonomy.id.in_({a.taxonomy_pk for a in anns}))).all()}
    labels: dict[int, list[Label]] = {}
    for lab in session.exec(select(Label).where(Label.annotation_id.in_(ids)).order_by(Label.id)).all():
        labels.setdefault(lab.annotation_id, []).append(lab)
    return [annotation_to_api(a, runs[a.run_pk], users[a.user_id], taxes[a.taxonomy_pk],
                              [{"mode": lab.mode, "agent": lab.agent, "principals": lab.principals,
                                "evidence": lab.evidence, "note": lab.note, "confidence": lab.confidence,
                                "time_ms": lab.time_ms} for lab in labels.get(a.id, [])])
            for a in anns]


def annotation_to_api(a: Annotation, run_id: str, user: User, tax: Taxonomy, labels: Sequence[Mapping]
                      ) -> dict[str, Any]:
    """The API shape of annotation `a` of run `run_id` by `user` under `tax` with `labels` (dicts
    with the LABEL_KEYS, in label order)."""
    return {
        "id": a.id, "run_id": run_id, "annotator": user.username, "annotator_kind": user.kind,
        "taxonomy": {"id": tax.id, "key": tax.key, "version": tax.version},
        "status": a.status, "no_failure": a.no_failure, "origin": a.origin, "time_ms": a.time_ms,
        "note": a.note, "version": a.version,
        "labels": [{"mode": lab["mode"], "agent": lab["agent"] or None, "principals": list(lab["principals"] or []),
                    "evidence": list(lab["evidence"] or []), "note": lab["note"], "confidence": lab["confidence"],
                    "time_ms": lab["time_ms"]} for lab in labels],
        "started_at": _iso(a.started_at), "updated_at": _iso(a.updated_at), "submitted_at": _iso(a.submitted_at),
        "hints_on": a.hints_on, "source_version": a.source_version,
    }


def _iso(value) -> str | None:
    """ISO 8601 in UTC with its offset (stored datetimes are UTC, with or without tzinfo)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def list_annotations(session: Session, viewer: User, *, run_id: str | None = None, annotator: str | None = None,
                     taxonomy: str | None = None, status: str | None = None, page: int = 1,
                     page_size: int = 100) -> tuple[int, list[Annotation]]:
    """Returns (total, one page of annotations) that `viewer` may see under blind mode, filtered.

    `taxonomy` is `key@version` or a numeric id for one version, or a bare key for all its
    versions. Ordered by run_id, taxonomy version, annotator name.
    """
    from sqlalchemy import func

    from app.annotations.blind import visible_annotation_filter

    q = (select(Annotation).join(Run, Run.id == Annotation.run_pk).join(User, User.id == Annotation.user_id)
         .join(Taxonomy, Taxonomy.id == Annotation.taxonomy_pk)
         .where(visible_annotation_filter(session, viewer)))
    if run_id:
        q = q.where(Run.run_id == run_id)
    if annotator:
        q = q.where(User.username == annotator)
    if status:
        if status not in STATUSES:
            raise AnnotationError("status", f"must be 'draft' or 'submitted', got {status!r}")
        q = q.where(Annotation.status == status)
    if taxonomy:
        if "@" in taxonomy or is_decimal(taxonomy):
            q = q.where(Annotation.taxonomy_pk == resolve_taxonomy(session, taxonomy).id)
        else:
            q = q.where(Taxonomy.key == taxonomy)
    total = session.exec(select(func.count()).select_from(q.subquery())).one()
    rows = session.exec(q.order_by(Run.run_id, Taxonomy.key, Taxonomy.version, User.username)
                        .offset((page - 1) * page_size).limit(page_size)).all()
    return total, list(rows)
