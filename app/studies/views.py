"""REST routes for studies: list, create, show, members, queue rules and fills.

Thin: each route checks the one permission rule (app.studies.access) and calls app.studies.service
or app.studies.rules. Creating a study and changing its members or selection is an admin's; its
leads manage its queue rules and fills.
"""
from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from app.annotations.http import JsonErrorRoute, api_csrf
from app.api.deps import AdminUser, ApiUser, SessionDep
from app.core.db import begin_write
from app.studies import rules as rules_service
from app.studies import service
from app.studies.access import study_for

router = APIRouter(prefix="/api/v1/studies", tags=["studies"], route_class=JsonErrorRoute,
                   dependencies=[Depends(api_csrf)])


class StudyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200, description="Unique name (not a number).")
    taxonomy: str | None = Field(None, description="Taxonomy version (`key@version`); default latest a2-failures.")
    selection: dict[str, Any] = Field(default_factory=dict, description=(
        "The saved run filter, keys " + ", ".join(f"`{k}`" for k in service.SELECTION_KEYS) + "; each a string "
        "or a list (any of); `scenario` and `source` take `*` wildcards; `imported_after` / `imported_before` "
        "ISO date-times. Empty: every run."))
    leads: list[str] = Field(default_factory=list, description="Reviewers (or admins) who lead the study.")
    annotators: list[str] = Field(default_factory=list, description="Members labelling in the study.")
    description: str | None = None


class MemberIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    username: str
    role: Literal["lead", "annotator"] | None = Field(None, description="null removes the member.")


class RuleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=100)
    policy: Literal["random", "all", "flagged"] = Field(description=(
        "`random`: each arriving run is taken with probability `rate` (a seeded hash of its id decides); "
        "`all`; `flagged`: runs a detector or judge (`source`, default any) labelled."))
    k: int = Field(ge=1)
    annotators: list[str]
    seed: int = 0
    rate: float | None = Field(None, gt=0, le=1)
    source: str | None = None


def _err(exc: Exception) -> HTTPException:
    if isinstance(exc, service.StudyNotFound):
        return HTTPException(404, str(exc))
    return HTTPException(422, str(exc))


@router.get("", summary="Studies you can see (all for an admin, else those you belong to)")
def list_studies(session: SessionDep, user: ApiUser) -> list[dict[str, Any]]:
    return service.list_studies(session, user)


@router.post("", summary="Create a study (admin)", status_code=201,
             description="A name, a taxonomy version, a run selection and members. 422 names the bad field.")
def create_study(body: StudyIn, session: SessionDep, user: AdminUser) -> dict[str, Any]:
    begin_write(session)
    try:
        study = service.create_study(session, body.name, taxonomy=body.taxonomy, selection=body.selection,
                                     leads=body.leads, annotators=body.annotators, description=body.description,
                                     created_by=user)
    except (service.StudyError, service.StudyNotFound) as exc:
        raise _err(exc) from None
    return service.study_dict(session, study)


@router.get("/{name}", summary="One study: taxonomy, selection, members, number of runs, rules")
def get_study(name: str, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    study = study_for(session, user, "reports", name)
    out = service.study_dict(session, study)
    from sqlmodel import select

    from app.studies.models import QueueRule

    out["rules"] = [rules_service.rule_dict(r) for r in session.exec(
        select(QueueRule).where(QueueRule.study_id == study.id).order_by(QueueRule.name)).all()]
    return out


@router.put("/{name}/selection", summary="Change a study's run selection (admin)")
def put_selection(name: str, selection: dict[str, Any], session: SessionDep, user: AdminUser) -> dict[str, Any]:
    begin_write(session)
    try:
        study = service.update_selection(session, service.get_study(session, name), selection)
    except (service.StudyError, service.StudyNotFound) as exc:
        raise _err(exc) from None
    return service.study_dict(session, study)


@router.post("/{name}/members", summary="Add, change or remove a member (admin)")
def post_member(name: str, body: MemberIn, session: SessionDep, user: AdminUser) -> dict[str, Any]:
    begin_write(session)
    try:
        study = service.get_study(session, name)
        if body.role is None:
            service.remove_member(session, study, body.username)
        else:
            service.set_member(session, study, body.username, body.role)
    except (service.StudyError, service.StudyNotFound) as exc:
        raise _err(exc) from None
    return service.study_dict(session, study)


@router.post("/{name}/rules", summary="Store a queue rule (admin or study lead)", status_code=201,
             description="Applied after each import and by `POST /api/v1/studies/{name}/fill`; see docs/studies.md.")
def post_rule(name: str, body: RuleIn, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    study = study_for(session, user, "assign", name)
    begin_write(session)
    try:
        rule = rules_service.add_rule(session, study, body.name, policy=body.policy, k=body.k,
                                      annotators=body.annotators, seed=body.seed, rate=body.rate, source=body.source)
    except service.StudyError as exc:
        raise _err(exc) from None
    return rules_service.rule_dict(rule)


@router.post("/{name}/fill", summary="Apply the study's queue rules now (admin or study lead)",
             description="Tops the queue up from every run of the study (a rule's runs that already have k "
                         "annotators, and runs removed from an annotator by hand, are left alone). Answers "
                         "one result per rule, keyed `<study>:<rule>` (the batch name).")
def post_fill(name: str, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    from app.annotations.policies import PolicyError
    from app.annotations.service import AnnotationError

    study = study_for(session, user, "assign", name)
    begin_write(session)
    try:
        return rules_service.apply_rules(session, study)
    except (AnnotationError, PolicyError) as exc:
        raise HTTPException(422, str(exc)) from None
