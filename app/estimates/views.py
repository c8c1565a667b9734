"""REST route of the failure-rate estimates: `GET /api/v1/estimates`.

Estimates aggregate every annotator's labels and the judges', so under blind mode an annotator
gets 403 (reviewers and admins always get them; annotators once an admin has revealed labels).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.annotations.http import JsonErrorRoute
from app.api.deps import ApiUser, SessionDep, require_labels_visible
from app.estimates import service
from app.estimates.tables import table_bytes

router = APIRouter(prefix="/api/v1", tags=["estimates"], route_class=JsonErrorRoute)


class EstimateRow(BaseModel):
    group: str = Field(description="The group (`all` without `by`).")
    mode: str = Field(description="The mode code, or the category for `category=`.")
    method: Literal["human", "judge", "ppi"] = Field(
        description="`human`: human labels alone; `judge`: the judge's share of flagged units (biased by the "
                    "judge's errors); `ppi`: prediction-powered inference (PPI++) over both.")
    rate: float | None = Field(description="The estimated rate in [0, 1]; null when it cannot be estimated (`note`).")
    ci_low: float | None
    ci_high: float | None
    n_human: int = Field(description="Units with a human (or gold) label used.")
    n_judge: int = Field(description="Units with a judge label used.")
    lam: float | None = Field(None, description="PPI++ power-tuning weight in [0, 1] (0: the human labels alone).")
    n_effective: float | None = Field(None, description="Simple-random human labels an interval this narrow would "
                                                        "take (PPI; weighted samples: Kish's effective n).")
    note: str | None = None


class EstimateReport(BaseModel):
    target: str
    kind: Literal["mode", "category"]
    by: str | None
    judge: str | None = Field(description="The judge annotator used (`judge:<name>` / `detector:<name>`).")
    study: str | None = None
    confidence: float
    weighted: bool = Field(description="Whether human labels were weighted by 1 / inclusion probability.")
    notes: list[str]
    n_units: int
    rows: list[EstimateRow]
    plan: list[dict[str, Any]] | None = Field(None, description="With `target_half_width`: per group, how many more "
                                                                "randomly sampled human labels reach it.")


@router.get(
    "/estimates", response_model=EstimateReport,
    summary="Failure rates with intervals: from humans, from a judge, and from both (PPI++)",
    description=(
        "The rate of one failure mode (`mode`) or category (`category`) among runs (or, with `by=agent|model|"
        "harness`, agent-runs; `by=principal`, principal-runs), per group, with three methods side by side: "
        "`human` (Wilson interval; weighted by 1 / inclusion probability when the sample was not simple random), "
        "`judge` (needs `judge`; biased by the judge's errors) and `ppi` (needs `judge`; judge labels on every "
        "unit corrected by human labels on a random sample). The human label of a run is its gold label where "
        "adjudicated, else the strict majority of its human annotators. `target_half_width` adds a planner: "
        "how many more randomly sampled human labels bring each interval to that half-width. `format=csv|"
        "parquet` answers the rows as a file. 403 for annotators under blind mode."),
    responses={200: {"content": {"text/csv": {}, "application/vnd.apache.parquet": {}}},
               403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def estimates(
    session: SessionDep, user: ApiUser,
    mode: Annotated[str | None, Query(description="A mode code, e.g. `CF1`.")] = None,
    category: Annotated[str | None, Query(description="A category, e.g. `CF` (instead of `mode`).")] = None,
    by: Annotated[Literal["agent", "principal", "family", "model", "harness"] | None,
                  Query(description="Grouping of the rows; none: one group `all` of runs.")] = None,
    judge: Annotated[str | None, Query(description="The judge: `NAME`, `judge:NAME` or `detector:NAME`.")] = None,
    taxonomy: Annotated[str | None, Query(description="`key`, `key@version` or id; default the latest a2-failures.")] = None,
    confidence: Annotated[float, Query(description="Interval confidence, in [0.5, 1).")] = 0.95,
    target_half_width: Annotated[float | None, Query(gt=0, lt=1, description="Planner target half-width.")] = None,
    format: Annotated[Literal["json", "csv", "parquet"], Query(description="Answer as JSON or as a table file.")] = "json",
) -> Any:
    require_labels_visible(session, user, "estimates")
    try:
        payload = service.estimates_payload(session, mode=mode, category=category, by=by, judge=judge,
                                            taxonomy=taxonomy, confidence=confidence,
                                            target_half_width=target_half_width)
    except service.EstimateError as exc:
        raise HTTPException(422, str(exc)) from None
    if format == "json":
        return payload
    body, media = table_bytes(payload["rows"], format)
    return Response(body, media_type=media,
                    headers={"Content-Disposition": f'attachment; filename="estimates-{payload["target"]}.{format}"'})
