"""The `/estimates` page (reviewers and admins): failure rates per group with the three methods
side by side in a forest plot (server-rendered SVG), the table, the planner, and the table as
CSV or Parquet (`/estimates/data.csv|parquet` with the page's query string)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from markupsafe import Markup
from sqlmodel import Session

from app.agreement.service import filter_options
from app.api.deps import SessionDep
from app.core.errors import FieldError
from app.estimates import service
from app.estimates.tables import table_bytes
from app.reports import charts
from app.web.deps import ReviewerPage
from app.web.templating import render

router = APIRouter(include_in_schema=False)

#: the most groups the forest plot shows (the table and the files have all)
MAX_PLOT_GROUPS = 30
METHOD_COLORS = {"human": charts.PALETTE[0], "judge": charts.PALETTE[5], "ppi": charts.PALETTE[2]}


def _params(target: str | None, by: str | None, judge: str | None, taxonomy: str | None,
            half_width: str | None) -> dict[str, Any]:
    """The page's form values as estimates_payload arguments (``target``: ``mode:CODE`` or
    ``category:C``; ``half_width``: the planner's target)."""
    out: dict[str, Any] = {"by": by or None, "judge": judge or None, "taxonomy": taxonomy or None}
    if target:
        kind, _, value = target.partition(":")
        if kind not in ("mode", "category") or not value:
            raise service.EstimateError("target", f"expected mode:CODE or category:NAME, got {target!r}")
        out[kind] = value
    if half_width:
        try:
            hw = float(half_width)
        except ValueError:
            raise service.EstimateError("half_width", f"expected a number, got {half_width!r}") from None
        if not 0 < hw < 1:
            raise service.EstimateError("half_width", "the target half-width must be between 0 and 1")
        out["target_half_width"] = hw
    return out


def _targets(session: Session, taxonomy: str | None) -> list[tuple[str, str]]:
    from app.reports.service import resolve_taxonomy

    tax = resolve_taxonomy(session, taxonomy)
    modes = tax.definition.get("modes") or []
    cats = sorted({m["category"] for m in modes})
    return ([(f"category:{c}", f"category {c}") for c in cats]
            + [(f"mode:{m['code']}", f"{m['code']} {m.get('name', '')}".strip()) for m in modes])


def forest(payload: dict[str, Any]) -> str:
    """The forest plot of a payload's rows: one group per line block, one line per method."""
    groups: list[str] = []
    by_group: dict[str, dict[str, dict[str, Any]]] = {}
    for r in payload["rows"]:
        if r["group"] not in by_group:
            groups.append(r["group"])
            by_group[r["group"]] = {}
        by_group[r["group"]][r["method"]] = r
    groups = groups[:MAX_PLOT_GROUPS]
    methods = [m for m in service.METHODS if any(m in by_group[g] for g in groups)]
    series = {m: [(by_group[g].get(m, {}).get("rate"), by_group[g].get(m, {}).get("ci_low"),
                   by_group[g].get(m, {}).get("ci_high")) for g in groups] for m in methods}
    return charts.forest_plot(
        groups, series, title=f"Rate of {payload['kind']} {payload['target']}"
                              + (f" by {payload['by']}" if payload["by"] else ""),
        description=f"{payload['confidence']:.0%} intervals per group: human labels alone, the judge alone "
                    "(biased by its errors) and both by prediction-powered inference.",
        colors=METHOD_COLORS)


@router.get("/estimates")
def estimates_page(request: Request, session: SessionDep, user: ReviewerPage, target: str | None = None,
                   by: str | None = None, judge: str | None = None, taxonomy: str | None = None,
                   half_width: str | None = None):
    options = filter_options(session)
    ctx: dict[str, Any] = {"options": options, "by_choices": service.BY, "form": {
        "target": target or "", "by": by or "", "judge": judge or "", "taxonomy": taxonomy or "",
        "half_width": half_width or ""}, "payload": None, "error": None}
    try:
        ctx["targets"] = _targets(session, taxonomy or None)
        if target:
            payload = service.estimates_payload(session, **_params(target, by, judge, taxonomy, half_width))
            ctx["payload"] = payload
            ctx["forest_svg"] = Markup(forest(payload))
            ctx["query"] = urlencode({k: v for k, v in ctx["form"].items() if v})
    except FieldError as exc:  # a bad parameter, or an unknown taxonomy (ReportError)
        ctx["error"] = str(exc)
        ctx.setdefault("targets", [])
        return render(request, "estimates.html", status_code=422, **ctx)
    return render(request, "estimates.html", **ctx)


@router.get("/estimates/data.{fmt}")
def estimates_data(fmt: str, session: SessionDep, user: ReviewerPage, target: str | None = None,
                   by: str | None = None, judge: str | None = None, taxonomy: str | None = None):
    """The page's table as CSV or Parquet (same query parameters)."""
    if fmt not in ("csv", "parquet"):
        raise HTTPException(404, f"unknown format {fmt!r} (csv or parquet)")
    try:
        payload = service.estimates_payload(session, **_params(target, by, judge, taxonomy, None))
    except service.EstimateError as exc:
        raise HTTPException(422, str(exc)) from None
    body, media = table_bytes(payload["rows"], fmt)
    return Response(body, media_type=media,
                    headers={"Content-Disposition": f'attachment; filename="estimates-{payload["target"]}.{fmt}"'})
