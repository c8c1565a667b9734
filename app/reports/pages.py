"""The `/reports` page (reviewers and admins): outcome table, charts, cross-play, blind spots.

Charts are inline SVG from :mod:`app.reports.charts` (no JavaScript, no external assets); every
chart links to its data as CSV (`/reports/data/{name}.csv` with the page's query string).
"""
from __future__ import annotations

import csv
import io
import math
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response
from markupsafe import Markup
from sqlmodel import Session

from app.api.deps import SessionDep
from app.reports import charts, service
from app.reports.outcomes import to_records
from app.web.deps import ReviewerPage
from app.web.templating import render

router = APIRouter(include_in_schema=False)

#: the most groups a dumbbell chart shows (the largest by unit count)
MAX_DUMBBELL_GROUPS = 25
#: the most blind-spot runs listed on the page (the CSV has all)
MAX_BLIND_SPOT_ROWS = 500
#: blind-spot runs shown before "show more"
BLIND_SPOT_FIRST = 15
CHART_DATA = ("outcomes", "prevalence", "success", "crossplay", "blind-spots")


class Params:
    """The page's query parameters, checked."""

    def __init__(self, by: str, source: str, taxonomy: str | None, family: str | None, crossplay: str,
                 min_runs: int = 1, sort: str | None = None, direction: str = "desc"):
        if by not in service.OUTCOME_BY:
            raise service.ReportError("by", f"must be one of {', '.join(service.OUTCOME_BY)}, got {by!r}")
        if crossplay not in service.CROSSPLAY_BY:
            raise service.ReportError("crossplay", f"must be model or harness, got {crossplay!r}")
        self.by = by
        self.source = service.check_source(source or "auto")
        self.taxonomy = taxonomy or None
        self.family = family or None
        self.crossplay = crossplay
        if isinstance(min_runs, bool) or not isinstance(min_runs, int) or min_runs < 1:
            raise service.ReportError("min_runs", f"must be a whole number of runs, at least 1, got {min_runs!r}")
        if direction not in ("asc", "desc"):
            raise service.ReportError("dir", f"must be asc or desc, got {direction!r}")
        self.min_runs = min_runs
        self.sort = sort or None
        self.direction = direction

    def query(self, **override: Any) -> str:
        """Returns the query string that reproduces these parameters (with `override` applied)."""
        q: dict[str, Any] = {"by": self.by, "source": self.source, "crossplay": self.crossplay}
        if self.taxonomy:
            q["taxonomy"] = self.taxonomy
        if self.family:
            q["family"] = self.family
        if self.min_runs > 1:
            q["min_runs"] = self.min_runs
        if self.sort:
            q["sort"], q["dir"] = self.sort, self.direction
        q.update({k: v for k, v in override.items() if v is not None})
        return urlencode(q)


def select_rows(rows: list[dict[str, Any]], columns: list[str], p: Params) -> tuple[list[dict[str, Any]], int]:
    """The outcome rows with at least `p.min_runs` runs, sorted by `p.sort` (a column; unknown
    values last, then by the group keys); returns (rows, how many were left out)."""
    if p.sort is not None and p.sort not in columns:
        raise service.ReportError("sort", f"must be one of the table's columns ({', '.join(columns)}), got {p.sort!r}")
    kept = [r for r in rows if (r.get("runs") or 0) >= p.min_runs]
    if p.sort:
        keyed = [r for r in kept if r.get(p.sort) is not None and not (isinstance(r.get(p.sort), float)
                                                                        and math.isnan(r[p.sort]))]
        missing = [r for r in kept if r not in keyed]
        keyed.sort(key=lambda r: (r[p.sort] if isinstance(r[p.sort], (int, float)) else str(r[p.sort])),
                   reverse=p.direction == "desc")
        kept = keyed + missing
    return kept, len(rows) - len([r for r in rows if (r.get("runs") or 0) >= p.min_runs])


def _min_runs(text: str) -> Any:
    """`min_runs` from the query: digits only (a form may send it empty: 1)."""
    text = (text or "").strip()
    if not text:
        return 1
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else text


def _group_label(row: dict[str, Any], keys: list[str]) -> str:
    return " · ".join("(none)" if row.get(k) is None else str(row[k]) for k in keys)


def _key_columns(columns: list[str]) -> list[str]:
    return columns[: columns.index("runs")]


def _category_names(data: service.ReportData) -> dict[str, str]:
    return {c["code"]: c.get("name", c["code"]) for c in data.taxonomy.definition.get("categories") or []}


def prevalence_table(data: service.ReportData, source: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Returns the data of the "failure prevalence by model" chart: per model, the agent-runs,
    the labelled agent-runs, and the share of labelled agent-runs with a label per category."""
    frame = service.outcome_frame(data, "model", source)
    rows = to_records(frame)
    cats = [str(c) for c in frame.columns if str(c).startswith("cat:")]
    columns = ["model", "agent_runs", "labelled_agent_runs", *cats]
    return columns, [{"model": r["model"], "agent_runs": r["n"], "labelled_agent_runs": r["labelled_n"],
                      **{c: r[c] for c in cats}} for r in rows]


def success_table(outcomes: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Returns the data of the dumbbell chart: per group, aggregate and principal success."""
    keys = _key_columns(outcomes["columns"])
    columns = [*keys, "n", "aggregate_success_rate", "principal_success_rate", "success_gap"]
    return columns, [{c: r[c] for c in columns} for r in outcomes["rows"]]


def blind_spot_table(blind: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Returns the blind-spot runs with their reasons joined by "; "."""
    columns = ["run_id", "family", "alignment", "aggregate_score", "failed_principals", "labelled_modes", "reasons"]
    return columns, [{**{c: r[c] for c in columns},
                      "failed_principals": ";".join(r["failed_principals"]),
                      "labelled_modes": ";".join(r["labelled_modes"]),
                      "reasons": "; ".join(r["reasons"])} for r in blind["runs"]]


def to_csv(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """Returns ``rows`` as CSV text with a header; None is an empty field."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r.get(c) is None else r[c] for c in columns])
    return buf.getvalue()


def _with_study(session: Session, user, p: Params, study: str | None) -> Params:
    """`p` with the study's run scope (after the permission rule: 404 unknown, 403 refused)."""
    from app.studies.access import study_for
    from app.studies.service import study_run_ids

    p.study = study_for(session, user, "reports", study)
    p.scope = study_run_ids(session, p.study)
    return p


def _heat(value: Any, rgb: tuple[int, int, int] = (179, 38, 30), scale: float = 1.0) -> str:
    """Returns the class of a background whose strength follows ``value`` (0..1): ``heat-r-N``
    (red) or ``heat-b-N`` (blue, for rgb (31, 95, 191)), N from 1 to 20 (static/css/reports.css;
    classes, not a style attribute, under the strict CSP)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    alpha = max(0.0, min(1.0, abs(float(value)) * scale)) * 0.55
    if alpha < 0.02:
        return ""
    step = max(1, min(20, round(alpha / 0.55 * 20)))
    return f"heat-{'b' if rgb == (31, 95, 191) else 'r'}-{step}"


def _stored_page(request: Request, session: Session, p: Params):
    """The stored result (app/results, kind ``reports_page``) of these parameters: the page and
    its CSV links (`/reports/data/*.csv`) share it, so a CSV computes nothing in the request."""
    from app.api.deps import study_cache_key
    from app.results import service as stored

    try:
        return stored.get_result(session, "reports_page", stored.with_query(
            {"by": p.by, "source": p.source, "taxonomy": p.taxonomy, "family": p.family, "crossplay": p.crossplay,
             "threshold": float(request.app.state.settings.success_threshold),
             "study": study_cache_key(getattr(p, "study", None))},
            request.query_params, ignore=("min_runs", "sort", "dir")), user_id=None)
    except stored.ResultFailed as exc:
        raise service.ReportError("report", str(exc)) from None


def _page_context(request: Request, session: Session, p: Params) -> dict[str, Any]:
    """The page's data, from the stored result (app/results) of these parameters; ``pending``
    (a job id) while a job computes it."""
    got = _stored_page(request, session, p)
    if got.state == "pending":
        return {"pending": got.job_id}
    d = got.payload
    outcomes = dict(d["outcomes"])
    outcomes["rows"], hidden = select_rows(outcomes["rows"], outcomes["columns"], p)
    keys = _key_columns(outcomes["columns"])
    cat_names = d["cat_names"]
    cat_cols = [c for c in outcomes["columns"] if c.startswith("cat:")]
    mode_cols = [c for c in outcomes["columns"] if c.startswith("mode:")]

    prev_columns, prev_rows = d["prevalence"]["columns"], d["prevalence"]["rows"]
    prev_cats = [c for c in prev_columns if c.startswith("cat:")]
    bar = charts.bar_chart(
        [r["model"] for r in prev_rows],
        [(c.removeprefix("cat:"), [r[c] for r in prev_rows]) for c in prev_cats],
        title="Failure prevalence by model",
        description="Share of labelled agent-runs of each model whose agent is responsible for a label of each "
                    "failure category (" + ", ".join(f"{k} {v}" for k, v in cat_names.items()) + ").",
        max_value=None, axis_label="share of labelled agent-runs",
    )

    rows = outcomes["rows"]
    shown = rows
    if len(rows) > MAX_DUMBBELL_GROUPS:
        shown = sorted(rows, key=lambda r: -r["n"])[:MAX_DUMBBELL_GROUPS]
    dumbbell = charts.dumbbell_chart(
        [_group_label(r, keys) for r in shown],
        [r["aggregate_success_rate"] for r in shown],
        [r["principal_success_rate"] for r in shown],
        title=f"Aggregate vs principal success by {p.by}",
        first_label="aggregate success", second_label="own principal's success",
        description=f"Per {p.by}: share of {outcomes['unit']}s whose run counts as an aggregate success "
                    "(circle) and whose own principal succeeded (square).",
    )

    cp = d["crossplay"]
    m = cp["matrix"]
    heat = charts.heatmap(
        m["rows"], m["cols"], m["values"],
        title=f"Cross-play by {p.crossplay}: mean score of the row side's principal",
        description=f"Mixed and competitive runs between agents of different principals: cell (row, column) is "
                    f"the mean principal score of the side whose {p.crossplay} is the row, playing against the "
                    f"column (colour scale: the range of the data).",
        row_title=f"{p.crossplay} (this side)", col_title=f"against {p.crossplay}",
        scale="sequential",
    )

    blind = d["blind"]
    q = p.query()
    return {
        "p": p, "query": q, "options": service.filter_options(session), "by_choices": service.OUTCOME_BY,
        "outcomes": outcomes, "keys": keys, "cat_cols": cat_cols, "mode_cols": mode_cols, "cat_names": cat_names,
        "mode_names": d["mode_names"], "computed_at": got.computed_at, "stale": got.stale,
        "bar_svg": Markup(bar), "dumbbell_svg": Markup(dumbbell), "heatmap_svg": Markup(heat),
        "dumbbell_note": (f"Showing the {len(shown)} largest of {len(rows)} groups." if len(shown) < len(rows) else ""),
        "crossplay": cp, "blind": blind, "blind_rows": blind["runs"][:MAX_BLIND_SPOT_ROWS],
        "blind_first": BLIND_SPOT_FIRST,
        "heat": _heat, "n_runs": d["n_runs"], "hidden_groups": hidden,
    }


@router.get("/reports")
def reports_page(
    request: Request, session: SessionDep, user: ReviewerPage,
    by: str = "model", source: str = "auto", taxonomy: str | None = None, family: str | None = None,
    crossplay: str = "model", min_runs: str = "1", sort: str | None = None, dir: str = "desc",  # noqa: A002
    study: str | None = None,
):
    from app.web.deps import study_switcher

    try:
        p = _with_study(session, user, Params(by, source, taxonomy, family, crossplay, _min_runs(min_runs), sort,
                                              dir), study)
        ctx = _page_context(request, session, p)
        ctx["switcher"] = study_switcher(session, user, "reports", p.study)
    except service.ReportError as exc:
        return render(request, "reports/index.html", status_code=422, error=str(exc), p=None,
                      options=service.filter_options(session), by_choices=service.OUTCOME_BY)
    if "pending" in ctx:
        return render(request, "reports/index.html", status_code=202, p=None,
                      error=f"The reports are being computed in the background (job {ctx['pending']}); "
                            "reload this page in a moment.",
                      options=service.filter_options(session), by_choices=service.OUTCOME_BY)
    return render(request, "reports/index.html", error=None, **ctx)


@router.get("/reports/data/{name}.csv")
def report_data_csv(
    name: str, request: Request, session: SessionDep, user: ReviewerPage,
    by: str = "model", source: str = "auto", taxonomy: str | None = None, family: str | None = None,
    crossplay: str = Query("model"), min_runs: str = "1", sort: str | None = None, dir: str = "desc",  # noqa: A002
    study: str | None = None,
):
    """The data behind one chart or table of the page, as CSV (same query parameters), from the
    page's stored result: 202 with ``Location`` of the job while it is being computed."""
    if name not in CHART_DATA:
        raise HTTPException(404, f"unknown chart data {name!r} (one of {', '.join(CHART_DATA)})")
    try:
        p = _with_study(session, user, Params(by, source, taxonomy, family, crossplay, _min_runs(min_runs), sort,
                                              dir), study)
        got = _stored_page(request, session, p)
    except service.ReportError as exc:
        raise HTTPException(422, str(exc)) from None
    if got.state == "pending":
        return Response(f"being computed by job {got.job_id}; ask again in a moment\n", status_code=202,
                        media_type="text/plain; charset=utf-8", headers={"Location": f"/jobs/{got.job_id}"})
    d = got.payload
    if name == "outcomes":
        columns = d["outcomes"]["columns"]
        rows, _ = select_rows(d["outcomes"]["rows"], columns, p)
    elif name == "prevalence":
        columns, rows = d["prevalence"]["columns"], d["prevalence"]["rows"]
    elif name == "success":
        columns, rows = success_table(d["outcomes"])
    elif name == "crossplay":
        columns, rows = d["crossplay"]["columns"], d["crossplay"]["cells"]
    else:
        columns, rows = blind_spot_table(d["blind"])
    suffix = {"outcomes": f"-by-{p.by}", "success": f"-by-{p.by}", "crossplay": f"-by-{p.crossplay}"}.get(name, "")
    return Response(to_csv(columns, rows), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}{suffix}.csv"',
                             "Age": str(got.age_seconds() or 0)})
