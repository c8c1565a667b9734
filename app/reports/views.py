"""REST routes of the outcome reports: outcomes per group, blind spots, cross-play.

Access: the outcome and blind-spot reports aggregate everybody's labels, so under blind mode
an annotator gets 403 (reviewers and admins always get them; annotators once an admin has
revealed labels).  Cross-play uses outcomes only (no labels) and is open to every user.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from app.annotations.http import JsonErrorRoute
from app.api.deps import ApiUser, SessionDep, StudyQuery, require_labels_visible, study_cache_key, study_scope
from app.reports import service  # noqa: F401
from app.results import http as stored

router = APIRouter(prefix="/api/v1/reports", tags=["reports"], route_class=JsonErrorRoute)

SourceQuery = Annotated[str, Query(
    description="Which labels count: `auto` (gold for adjudicated runs, else the human majority of the "
                "annotators who submitted the run), `gold`, `majority`, or `annotator:<name>` (one human or "
                "judge, e.g. `annotator:alice`, `annotator:judge:judge-l2`).")]
TaxonomyQuery = Annotated[str | None, Query(
    description="Taxonomy version: `key`, `key@version` or id; default the latest a2-failures.")]
FamilyQuery = Annotated[str | None, Query(description="Only runs of this scenario family.")]


class StoredFields(BaseModel):
    computed_at: str | None = Field(None, description="When this result was computed (ISO 8601, UTC).")
    stale: bool = Field(False, description="True when the data changed since: `recompute_job` refreshes it.")
    recompute_job: str | None = Field(None, description="The job recomputing a stale result, else null.")


class Table(BaseModel):
    columns: list[str]
    rows: list[dict[str, Any]]


class OutcomeReport(StoredFields):
    by: str = Field(description="The grouping.")
    unit: str = Field(description="What a group counts: `agent-run` (agent, model, harness) or `principal-run`.")
    label_source: str = Field(description="Which labels were used, e.g. `gold for 2 runs, human majority for 3 "
                                          "runs, unlabelled 1 run`.")
    threshold: float = Field(description="Score at or above which an outcome counts as success.")
    taxonomy: str = Field(description="`key@version` of the taxonomy the labels belong to.")
    family: str | None = None
    labels_without_agent: int = Field(0, description="Labels (submitted or gold) that name no responsible agent "
                                                     "of their run (trace-level labels): they count for no agent.")
    columns: list[str]
    rows: list[dict[str, Any]] = Field(description="One per group; rates in [0, 1], null when undefined.")


class BlindSpotReport(StoredFields):
    label_source: str
    threshold: float
    taxonomy: str
    family: str | None = None
    columns: list[str]
    runs: list[dict[str, Any]] = Field(description="One per blind-spot run, with `reasons`.")
    rates: dict[str, Table] = Field(description="Blind-spot rate per family, model and alignment.")


class Matrix(BaseModel):
    value: str
    rows: list[str | None]
    cols: list[str | None]
    values: list[list[float | None]]


class CrossplayReport(StoredFields):
    by: str
    threshold: float
    family: str | None = None
    columns: list[str]
    cells: list[dict[str, Any]] = Field(description="One per ordered pairing (side a vs side b).")
    matrix: Matrix



def _threshold(request: Request) -> float:
    return float(request.app.state.settings.success_threshold)


@router.get(
    "/outcomes", response_model=OutcomeReport,
    summary="Outcome report: aggregate success beside each principal's own success, per group",
    description=(
        "One row per group (`by`): `aggregate_success_rate` (runs that completed with aggregate score >= "
        "threshold) beside `principal_success_rate` (the agent's own principal's outcome; unknown outcomes "
        "are counted in `principal_unknown` and left out of the rate), their difference `success_gap`, "
        "mean principal score and metrics, and per failure category / mode the share of labelled units "
        "with such a label (`cat:DD`, `mode:DD1`). `by=agent|model|harness` counts agent-runs (a label "
        "counts for the agent it names); `principal|family|alignment|scenario` counts principal-runs. "
        "`label_source` says which labels were used. 403 for annotators under blind mode." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def outcomes(
    request: Request, session: SessionDep, user: ApiUser,
    by: Annotated[Literal["agent", "principal", "family", "model", "harness", "alignment", "scenario"],
                  Query(description="Grouping of the rows.")] = "agent",
    source: SourceQuery = "auto", taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    study: StudyQuery = None,
) -> dict[str, Any]:
    require_labels_visible(session, user, "reports")
    st, _ = study_scope(session, user, "reports", study)
    return stored.respond(request, session, user, "report_outcomes", {"study": study_cache_key(st),
        "by": by, "source": source, "taxonomy": taxonomy, "family": family, "threshold": _threshold(request)})


@router.get(
    "/blind-spots", response_model=BlindSpotReport,
    summary="Blind spots: runs the aggregate outcome calls a success although a principal lost or a failure was labelled",
    description=(
        "Runs whose aggregate outcome counts as success (completed, aggregate score >= threshold) while at "
        "least one principal's own outcome failed or a failure mode was labelled (with the labels chosen "
        "by `source`), each with `reasons` (`principal buyer failed (score 0.20)`, `labelled CF3 "
        "(buyer_agent)`), plus the blind-spot rate (blind-spot runs / aggregate-success runs) per family, "
        "model and alignment. 403 for annotators under blind mode." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def blind_spots(
    request: Request, session: SessionDep, user: ApiUser,
    source: SourceQuery = "auto", taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    study: StudyQuery = None,
) -> dict[str, Any]:
    require_labels_visible(session, user, "reports")
    st, _ = study_scope(session, user, "reports", study)
    return stored.respond(request, session, user, "report_blind_spots", {"study": study_cache_key(st),
        "source": source, "taxonomy": taxonomy, "family": family, "threshold": _threshold(request)})


@router.get(
    "/crossplay", response_model=CrossplayReport,
    summary="Cross-play: how each side's principal fared against the other side, per model or harness pairing",
    description=(
        "For runs of mixed or competitive alignment between agents of different principals: one cell per "
        "ordered pairing (side a's model vs side b's model, or harness) with each side's mean principal "
        "score and success rate over the observations, and the `value` column as a square matrix (rows: "
        "side a, columns: side b; null where never played). Uses outcomes only, no labels." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 422: {"description": "bad parameter; `detail` names it"}},
)
def crossplay(
    request: Request, session: SessionDep, user: ApiUser,
    by: Annotated[Literal["model", "harness"], Query(description="What a side is.")] = "model",
    value: Annotated[Literal["a_mean_score", "b_mean_score", "a_success_rate", "b_success_rate", "n", "runs"],
                     Query(description="The cell column shown in `matrix`.")] = "a_mean_score",
    family: FamilyQuery = None, study: StudyQuery = None,
) -> dict[str, Any]:
    st, _ = study_scope(session, user, "reports", study)
    return stored.respond(request, session, user, "report_crossplay", {"study": study_cache_key(st),
        "by": by, "value": value, "family": family, "threshold": _threshold(request)})
