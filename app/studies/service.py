"""Studies: create, list, members; and the study scope, the one function every service applies.

`study_run_ids(session, study)` turns a study's saved selection into a SQL subquery of `run.id`;
reports, agreement, progress, adjudication, detectors and exports filter their runs with
`Run.id.in_(scope)` (`run_pk.in_(scope)` on the tables hanging off a run). Without a study the
scope is None and every service reads exactly what it read before studies existed.

A selection is a dict whose keys are in SELECTION_KEYS, each value a string or a list of strings
(any of them matches); several keys must all match:
- `family`, `scenario`, `alignment`, `status`: the run's scenario (its own scenario object when it
  has one) and status; `scenario` and `source` take `*` wildcards (`commerce/*`).
- `condition`: the run's `metadata.condition`, or `metadata.path.condition` (trees read by a profile).
- `model`, `harness`: some agent of the run has it.
- `source`: the file the run was imported from (`Run.source`), with `*` wildcards.
- `tags`: the run's `metadata.tags` holds one of them.
- `imported_after`, `imported_before`: an ISO date-time: the import batch by time (inclusive).
- `run_ids`: these runs.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, func, literal, or_, text
from sqlmodel import Session, select

from app.auth.models import User
from app.core.errors import FieldError
from app.runs.models import Agent, Run, Scenario
from app.studies.models import MEMBER_ROLES, Study, StudyMember
from app.taxonomies.models import Taxonomy

SELECTION_KEYS = ("family", "scenario", "alignment", "status", "condition", "model", "harness", "source", "tags",
                  "imported_after", "imported_before", "run_ids")
_TIME_KEYS = ("imported_after", "imported_before")


class StudyError(FieldError):
    """Bad study input; `field` names the value."""


class StudyNotFound(LookupError):
    """No study of that name or id."""


# --------------------------------------------------------------------------- selection


def _values(key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise StudyError(f"selection.{key}", f"must be a string or a non-empty list of strings, got {value!r}")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, str) or not v.strip():
            raise StudyError(f"selection.{key}[{i}]", f"must be a non-empty string, got {v!r}")
        out.append(v.strip())
    return out


def _time(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise StudyError(f"selection.{key}", f"must be an ISO date-time like 2026-05-01T10:00:00Z, got {value!r}")
    try:
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise StudyError(f"selection.{key}", f"{value!r} is not an ISO date-time (2026-05-01T10:00:00Z)") from None
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def check_selection(selection: Any) -> dict[str, Any]:
    """Returns the selection normalised (lists of strings; times in UTC ISO form); raises
    StudyError naming `selection.<key>` for an unknown key or a bad value."""
    if selection is None:
        return {}
    if not isinstance(selection, dict):
        raise StudyError("selection", f"must be an object of filters, got {type(selection).__name__}")
    out: dict[str, Any] = {}
    for key, value in selection.items():
        if key not in SELECTION_KEYS:
            raise StudyError(f"selection.{key}", f"unknown filter; use {', '.join(SELECTION_KEYS)}")
        if value is None or value == [] or value == "":
            continue
        out[key] = _time(key, value) if key in _TIME_KEYS else _values(key, value)
    return out


def _like(col, patterns: list[str]):
    conds = []
    for p in patterns:
        if "*" in p:
            esc = p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
            conds.append(col.like(esc, escape="\\"))
        else:
            conds.append(col == p)
    return or_(*conds)


def _tags_condition(dialect: str, tags: list[str]):
    """`metadata.tags` (a JSON list) holds one of `tags`."""
    if dialect == "postgresql":
        sql = ("EXISTS (SELECT 1 FROM json_array_elements_text(CASE WHEN json_typeof(run.extra -> 'tags') = 'array' "
               "THEN run.extra -> 'tags' ELSE '[]'::json END) AS study_tag(value) WHERE study_tag.value IN :study_tags)")
    else:
        sql = ("EXISTS (SELECT 1 FROM json_each(CASE WHEN json_type(run.extra, '$.tags') = 'array' "
               "THEN json_extract(run.extra, '$.tags') ELSE '[]' END) AS study_tag WHERE study_tag.value IN :study_tags)")
    return text(sql).bindparams(bindparam("study_tags", value=list(tags), expanding=True))


def selection_query(selection: dict[str, Any], dialect: str):
    """A select() of `run.id` for the runs a (checked) selection matches; not correlated with
    any enclosing query, so it can be used as `Run.id.in_(...)` anywhere."""
    q = select(Run.id)
    sel = selection or {}
    if any(k in sel for k in ("family", "alignment")):
        q = q.join(Scenario, Scenario.id == Run.scenario_id)
        if "family" in sel:
            fam = func.coalesce(Run.scenario_override["family"].as_string(), Scenario.family)
            q = q.where(fam.in_(sel["family"]))
        if "alignment" in sel:
            al = func.coalesce(Run.scenario_override["alignment"].as_string(), Scenario.alignment)
            q = q.where(al.in_(sel["alignment"]))
    if "scenario" in sel:
        q = q.where(_like(Run.scenario_id, sel["scenario"]))
    if "status" in sel:
        q = q.where(Run.status.in_(sel["status"]))
    if "condition" in sel:
        cond = func.coalesce(Run.extra["condition"].as_string(), Run.extra[("path", "condition")].as_string())
        q = q.where(cond.in_(sel["condition"]))
    if "model" in sel:
        q = q.where(Run.id.in_(select(Agent.run_pk).where(Agent.model.in_(sel["model"]))))
    if "harness" in sel:
        q = q.where(Run.id.in_(select(Agent.run_pk).where(Agent.harness.in_(sel["harness"]))))
    if "source" in sel:
        q = q.where(_like(Run.source, sel["source"]))
    if "tags" in sel:
        q = q.where(_tags_condition(dialect, sel["tags"]))
    if "imported_after" in sel:
        q = q.where(Run.imported_at >= datetime.fromisoformat(sel["imported_after"]))
    if "imported_before" in sel:
        q = q.where(Run.imported_at <= datetime.fromisoformat(sel["imported_before"]))
    if "run_ids" in sel:
        q = q.where(Run.run_id.in_(sel["run_ids"]))
    return q.correlate(None)


def study_run_ids(session: Session, study: Study | None):
    """THE study scope: a SQL subquery selecting the `run.id` of the study's runs, or None
    without a study (every run, as before studies). Services apply it as `Run.id.in_(scope)`."""
    if study is None:
        return None
    return selection_query(study.selection or {}, session.get_bind().dialect.name)


def scope_condition(column, scope):
    """`column IN scope`, or a condition that is always true when there is no scope."""
    if scope is None:
        return literal(True)
    return column.in_(scope)


def study_run_pks(session: Session, study: Study) -> set[int]:
    """The primary keys of the study's runs (for services that filter rows in Python)."""
    return set(session.exec(study_run_ids(session, study)).all())


# --------------------------------------------------------------------------- studies


def get_study(session: Session, ref: Any) -> Study:
    """The study named `ref` (its name, or its numeric id); raises StudyNotFound."""
    if isinstance(ref, Study):
        return ref
    if not isinstance(ref, (str, int)) or (isinstance(ref, str) and not ref.strip()):
        raise StudyNotFound(f"no study {ref!r}")
    ref_s = str(ref).strip()
    study = session.exec(select(Study).where(Study.name == ref_s)).first()
    if study is None and ref_s.isdigit() and len(ref_s) <= 18:
        study = session.get(Study, int(ref_s))
    if study is None:
        raise StudyNotFound(f"no study {ref_s!r}")
    return study


def optional_study(session: Session, ref: Any) -> Study | None:
    """None for an empty reference, else `get_study`."""
    if ref is None or (isinstance(ref, str) and not ref.strip()):
        return None
    return get_study(session, ref)


def _user(session: Session, name: str, field: str) -> User:
    user = session.exec(select(User).where(User.username == name)).first()
    if user is None:
        raise StudyError(field, f"no user {name!r}")
    if user.kind != "human":
        raise StudyError(field, f"{name!r} is an automated judge, not a person")
    return user


def create_study(session: Session, name: str, *, taxonomy: str | None = None, selection: Any = None,
                 leads: list[str] | tuple = (), annotators: list[str] | tuple = (), description: str | None = None,
                 created_by: User | None = None) -> Study:
    """Create a study; `leads` must have the reviewer (or admin) role. Raises StudyError for a
    taken name, an unknown taxonomy, user or filter. The caller commits."""
    from app.taxonomies.service import resolve

    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 200:
        raise StudyError("name", "must be a non-empty name of at most 200 characters")
    name = name.strip()
    if name.isdigit():
        raise StudyError("name", "must not be a number (numbers name studies by id)")
    if session.exec(select(Study).where(Study.name == name)).first() is not None:
        raise StudyError("name", f"a study named {name!r} exists already")
    tax = resolve(session, taxonomy or None)
    if tax is None:
        raise StudyError("taxonomy", f"unknown taxonomy {taxonomy!r}" if taxonomy else "no taxonomy is registered")
    study = Study(name=name, description=description, taxonomy_pk=tax.id, selection=check_selection(selection),
                  created_by=created_by.id if created_by is not None else None)
    session.add(study)
    session.flush()
    for who in leads:
        set_member(session, study, who, "lead")
    for who in annotators:
        set_member(session, study, who, "annotator")
    return study


def update_selection(session: Session, study: Study, selection: Any) -> Study:
    study.selection = check_selection(selection)
    session.add(study)
    session.flush()
    return study


def set_member(session: Session, study: Study, username: str, role: str) -> StudyMember:
    """Add `username` to the study as `role` (lead | annotator), or change their role. A lead
    must be a reviewer or an admin."""
    if role not in MEMBER_ROLES:
        raise StudyError("role", f"must be one of {', '.join(MEMBER_ROLES)}, not {role!r}")
    user = _user(session, username, "lead" if role == "lead" else "annotator")
    if role == "lead" and user.role not in ("reviewer", "admin"):
        raise StudyError("lead", f"{username!r} has the {user.role} role; a study lead must be a reviewer or admin")
    member = session.exec(select(StudyMember).where(StudyMember.study_id == study.id,
                                                    StudyMember.user_id == user.id)).first()
    if member is None:
        member = StudyMember(study_id=study.id, user_id=user.id, role=role)
    member.role = role
    session.add(member)
    session.flush()
    return member


def remove_member(session: Session, study: Study, username: str) -> bool:
    user = session.exec(select(User).where(User.username == username)).first()
    if user is None:
        return False
    member = session.exec(select(StudyMember).where(StudyMember.study_id == study.id,
                                                    StudyMember.user_id == user.id)).first()
    if member is None:
        return False
    session.delete(member)
    session.flush()
    return True


def members(session: Session, study: Study) -> list[dict[str, Any]]:
    rows = session.exec(select(User.username, User.role, StudyMember.role).join(
        StudyMember, StudyMember.user_id == User.id).where(StudyMember.study_id == study.id)
        .order_by(User.username)).all()
    return [{"username": u, "user_role": ur, "role": r} for u, ur, r in rows]


def member_role(session: Session, user: User, study: Study) -> str | None:
    """`lead`, `annotator`, or None when `user` is not a member of `study`."""
    return session.exec(select(StudyMember.role).where(StudyMember.study_id == study.id,
                                                       StudyMember.user_id == user.id)).first()


def led_study_ids(session: Session, user: User) -> set[int]:
    return set(session.exec(select(StudyMember.study_id).where(StudyMember.user_id == user.id,
                                                              StudyMember.role == "lead")).all())


def visible_studies(session: Session, user: User) -> list[Study]:
    """The studies `user` may pick in a switcher: all for an admin, else those they belong to."""
    q = select(Study).order_by(Study.name)
    if user.role != "admin":
        q = q.where(Study.id.in_(select(StudyMember.study_id).where(StudyMember.user_id == user.id)))
    return list(session.exec(q).all())


def study_dict(session: Session, study: Study, *, with_counts: bool = True) -> dict[str, Any]:
    tax = session.get(Taxonomy, study.taxonomy_pk)
    out: dict[str, Any] = {"id": study.id, "name": study.name, "description": study.description,
                           "taxonomy": f"{tax.key}@{tax.version}" if tax else None,
                           "selection": dict(study.selection or {}), "members": members(session, study),
                           "created_at": study.created_at.isoformat() if study.created_at else None}
    if with_counts:
        scope = study_run_ids(session, study)
        out["runs"] = session.exec(select(func.count()).select_from(scope.subquery())).one()
    return out


def list_studies(session: Session, user: User | None = None) -> list[dict[str, Any]]:
    rows = visible_studies(session, user) if user is not None else list(
        session.exec(select(Study).order_by(Study.name)).all())
    return [study_dict(session, s) for s in rows]


def run_in_study(session: Session, study: Study, run_pk: int) -> bool:
    scope = study_run_ids(session, study)
    return session.exec(select(func.count()).select_from(
        scope.where(Run.id == run_pk).subquery())).one() > 0


__all__ = ["SELECTION_KEYS", "StudyError", "StudyNotFound", "check_selection", "create_study", "get_study",
           "list_studies", "member_role", "optional_study", "scope_condition", "selection_query", "set_member",
           "study_run_ids", "study_run_pks"]


def inclusion_probabilities(session: Session, study: Study, batches: list[str] | None = None) -> dict[int, float]:
    """run pk -> the probability that the run is in the study's probability sample: the union of
    its `random`, `stratified` and `all` batches (or of the `batches` named), treated as
    independent draws: 1 - prod_b (1 - pi_b(run)), pi_b the batch's inclusion probability for the
    run's stratum, 0 for a run outside the batch's frame (imported after the batch was drawn).
    Covers every run of the study now; a run drawn by a batch keeps the stratum it was drawn in,
    the others' strata are read now. Rule batches (`random` with a rate) apply to every run."""
    from app.annotations.assignments import run_strata
    from app.annotations.models import Assignment
    from app.annotations.policies import PROBABILITY_POLICIES
    from app.studies.models import AssignmentBatch

    q = select(AssignmentBatch).where(AssignmentBatch.study_id == study.id,
                                      AssignmentBatch.policy.in_(PROBABILITY_POLICIES))
    if batches is not None:
        q = q.where(AssignmentBatch.name.in_(list(batches)))
    designs = list(session.exec(q.order_by(AssignmentBatch.id)).all())
    pk_to_id = dict(session.exec(select(Run.id, Run.run_id).where(Run.id.in_(study_run_ids(session, study)))).all())
    miss = {pk: 1.0 for pk in pk_to_id}  # probability of being missed by every batch so far
    tax = session.get(Taxonomy, study.taxonomy_pk)
    for d in designs:
        params = d.params or {}
        rule_rate = params.get("rate") if d.policy == "random" else None
        in_frame = [pk for pk in pk_to_id if rule_rate is not None
                    or (d.frame_max_run_pk is not None and pk <= d.frame_max_run_pk)]
        if rule_rate is not None:
            probs = {pk: float(rule_rate) for pk in in_frame}
        elif d.policy == "stratified":
            drawn = dict(session.exec(select(Assignment.run_pk, Assignment.stratum).where(
                Assignment.batch == d.name, Assignment.taxonomy_pk == d.taxonomy_pk)).all())
            now = run_strata(session, tax, {pk_to_id[pk]: pk for pk in in_frame if pk not in drawn},
                             params.get("stratify_by"))
            probs = {}
            for pk in in_frame:
                h = drawn.get(pk, now.get(pk_to_id[pk]))
                probs[pk] = float((d.strata or {}).get(h, {}).get("inclusion_prob", 0.0))
        else:
            p = float((d.strata or {}).get("", {}).get("inclusion_prob", 1.0 if d.policy == "all" else 0.0))
            probs = {pk: p for pk in in_frame}
        for pk, p in probs.items():
            miss[pk] *= 1 - p
    return {pk: 1 - m for pk, m in miss.items()}
