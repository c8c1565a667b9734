"""Reviewer pages: `/agreement` (dashboard), `/agreement/judges` (humans vs machines),
`/disagreements` (runs ranked by disagreement) and `/adjudicate/{run_id}` (gold labels; with
`?fragment=1` its trace and panel as JSON, for going to the next run without a full reload).

Reviewers and admins only.  Forms carry the session's CSRF token (`verify_form_csrf`); a change
redirects back (303) with a one-time message naming the field on error.
"""
from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse
from sqlmodel import Session

from app.agreement import adjudication, service
from app.api.deps import MAX_PAGE, SessionDep, study_cache_key
from app.core.db import begin_write
from app.core.text import is_decimal
from app.reports.charts import forest_plot, heatmap
from app.results import service as stored_results
from app.web.csrf import verify_form_csrf
from app.web.deps import ReviewerPage, study_switcher
from app.web.templating import render

router = APIRouter(include_in_schema=False)
CSRF = [Depends(verify_form_csrf)]

#: Bootstrap resamples the pages use unless `n_boot` is given (the dashboard stays quick).
PAGE_N_BOOT = 500
COEFFICIENT_NAMES = {
    "percent": "Percent",
    "cohen_kappa": "Cohen κ",
    "fleiss_kappa": "Fleiss κ",
    "krippendorff_alpha": "Krippendorff α",
    "gwet_ac1": "Gwet AC1",
}


def _filters(taxonomy: str | None, family: str | None, annotators: list[str] | None, include_judges: bool,
             **extra: Any) -> dict[str, Any]:
    names = service.parse_annotators(annotators or None)
    return {"taxonomy": (taxonomy or "").strip() or None, "family": (family or "").strip() or None,
            "annotators": names or [], "include_judges": bool(include_judges), **extra}


def _query(f: dict[str, Any], **over: Any) -> str:
    """The query string of the filters `f` (overridden by `over`), without empty values."""
    d = {**f, **over}
    pairs: list[tuple[str, Any]] = []
    for k, v in d.items():
        if v in (None, "", [], False):
            continue
        if isinstance(v, list):
            pairs.append((k, ",".join(v)))
        else:
            pairs.append((k, "1" if v is True else v))
    return urlencode(pairs)


PARADOX_COLOR = "#d35400"


def _mode_forest(report: dict[str, Any]) -> str | None:
    """Per mode (and overall): Fleiss' kappa and Gwet's AC1 with their intervals, the kappa of a
    row flagged by the kappa paradox drawn in the warning colour and marked ⚑."""
    # the modes somebody marked (a mode nobody marked has no kappa and a trivial AC1 of 1)
    rows = [("overall", report["overall"])] + [(r["mode"], r) for r in report["modes"] if r.get("prevalence")]
    keys = [("fleiss_kappa", "Fleiss κ"), ("gwet_ac1", "Gwet AC1")]
    keys = [(k, name) for k, name in keys if k in report["settings"]["coefficients"]]
    if not keys:
        return None

    def triple(c: Any) -> tuple[float | None, float | None, float | None]:
        if not c or c.get("value") is None:
            return (None, None, None)
        ci = c.get("ci") or (None, None)
        return (c["value"], ci[0], ci[1])

    series = {name: [triple(r.get(k)) for _, r in rows] for k, name in keys}
    flagged = [bool(r.get("kappa_paradox")) for _, r in rows]
    colors = {name: [PARADOX_COLOR if f else None for f in flagged] for k, name in keys if k == "fleiss_kappa"}
    if len(rows) < 2:
        return None
    return forest_plot([g for g, _ in rows], series, title="Agreement per mode, with intervals",
                       description="Fleiss' kappa and Gwet's AC1 per mode; kappa paradox rows in orange.",
                       value_format="{:.2f}", domain=(0.0, 1.0), row_colors=colors,
                       row_notes=["⚑ paradox" if f else None for f in flagged],
                       legend_extra=[("κ under the kappa paradox: read AC1", PARADOX_COLOR)] if any(flagged) else ())


def _kappa_heatmap(annotators: list[str], matrix: list[list[float | None]], title: str, kinds: list[str] | None = None
                   ) -> str | None:
    if len(annotators) < 2:
        return None
    labels = [f"{a} (judge)" if kinds and kinds[i] == "judge" and not a.startswith("judge:") else a
              for i, a in enumerate(annotators)]
    return heatmap(labels, labels, matrix, title=title, vmin=-1.0, vmax=1.0, scale="diverging",
                   row_title="annotator", col_title="annotator",
                   description="Cohen's kappa between two annotators over the pooled run x mode cells both "
                               "submitted; the diagonal is not measured.")


def _study(session, user, ref: str | None):
    """(study, its run scope) after the permission rule (404 unknown, 403 refused)."""
    from app.studies.access import study_for
    from app.studies.service import study_run_ids

    st = study_for(session, user, "agreement", ref)
    return st, study_run_ids(session, st)


# --------------------------------------------------------------------------------------------
# dashboard


@router.get("/agreement")
def agreement_page(
    request: Request, session: SessionDep, user: ReviewerPage,
    taxonomy: str | None = None, family: str | None = None,
    annotators: Annotated[list[str] | None, Query()] = None,
    include_judges: bool = False, level: str = "run",
    n_boot: Annotated[int | None, Query(ge=0, le=service.MAX_N_BOOT)] = None, seed: int = 0,
    k: Annotated[int | None, Query(ge=0, le=1000, description="attribution: steps within +-k agree")] = None,
    study: str | None = None,
):
    """Per-mode, per-category and overall agreement with intervals, the kappa-paradox flag, the
    pairwise kappa heatmap, blame agreement, evidence overlap and each annotator against gold."""
    f = _filters(taxonomy, family, annotators, include_judges, level=level)
    options = service.filter_options(session)
    nb = PAGE_N_BOOT if n_boot is None else n_boot
    ctx: dict[str, Any] = {"f": f, "options": options, "n_boot": nb, "seed": seed, "names": COEFFICIENT_NAMES,
                           "report": None, "gold": None, "chart": None, "error": None, "attribution": None,
                           "forest": None, "freshness": None}
    st, _ = _study(session, user, study)
    ctx["switcher"] = study_switcher(session, user, "agreement", st)
    common = {"taxonomy": f["taxonomy"], "family": f["family"], "annotators": f["annotators"] or None,
              "include_judges": f["include_judges"], "confidence": 0.95, "study": study_cache_key(st)}
    attribution = None
    try:
        service.check_level(level)
        query = request.query_params
        got = stored_results.get_result(session, "agreement", stored_results.with_query(
            {**common, "level": level, "n_boot": nb, "seed": seed}, query, ignore=("k",)), user_id=user.id)
        gold_got = stored_results.get_result(session, "agreement_gold", stored_results.with_query(
            {**common, "n_boot": 0, "seed": 0, "level": level}, query, ignore=("k",)), user_id=user.id)
        # attribution agreement (who and when: the CLI's `agreement --k K`), for a taxonomy that has it
        from app.taxonomies.service import attribution_schema

        schema = attribution_schema(service._resolve_taxonomy(session, f["taxonomy"]))
        attr_got = None
        if schema is not None:  # a stored result too: its own key, as k is its own parameter
            kk = k if k is not None else int(schema.get("k", 1))
            attr_got = stored_results.get_result(session, "agreement_attribution", stored_results.with_query(
                {**common, "k": kk}, query), user_id=user.id)
    except (service.AgreementError, stored_results.ResultFailed) as exc:
        ctx["error"] = str(exc)
        return render(request, "agreement/dashboard.html", status_code=422, **ctx)
    pending = [g.job_id for g in (got, gold_got, attr_got) if g is not None and g.state == "pending"]
    if pending:
        ctx["error"] = (f"The agreement is being computed in the background (job {', '.join(pending)}); "
                        "reload this page in a moment.")
        return render(request, "agreement/dashboard.html", status_code=202, **ctx)
    report, gold = got.payload, gold_got.payload
    if attr_got is not None and attr_got.payload.get("n_attributions"):  # none: the selection has no attributions
        attribution = attr_got.payload
    parts = [g for g in (got, gold_got, attr_got) if g is not None]
    ctx["freshness"] = {"computed_at": got.computed_at, "stale": any(g.stale for g in parts),
                        "job": next((g.job_id for g in parts if g.job_id), None)}
    pw = report["pairwise_cohen"]
    kinds = [report["annotator_kinds"].get(a, "human") for a in pw["annotators"]]
    ctx.update(forest=_mode_forest(report))
    ctx.update(report=report, gold=gold, attribution=attribution, chart=_kappa_heatmap(pw["annotators"], pw["matrix"],
                                                              "Pairwise Cohen's kappa", kinds),
               judges_url="/agreement/judges?" + _query({"taxonomy": f["taxonomy"], "family": f["family"]}),
               disagreements_url="/disagreements?" + _query(f, level=None))
    return render(request, "agreement/dashboard.html", **ctx)


@router.get("/agreement/judges")
def judges_page(request: Request, session: SessionDep, user: ReviewerPage,
                taxonomy: str | None = None, family: str | None = None):
    """Humans vs machines: pairwise kappa with judges, each judge against the humans, against
    the human majority and against gold, with per-mode precision and recall."""
    f = _filters(taxonomy, family, None, True)
    ctx: dict[str, Any] = {"f": f, "options": service.filter_options(session), "report": None, "chart": None,
                           "error": None, "freshness": None}
    try:  # a stored result (app.results): served with its age, recomputed by a job when the data change
        got = stored_results.get_result(session, "agreement_judges_page", stored_results.with_query(
            {"taxonomy": f["taxonomy"], "family": f["family"], "n_boot": 0, "seed": 0}, request.query_params),
            user_id=user.id)
    except stored_results.ResultFailed as exc:
        ctx["error"] = str(exc)
        return render(request, "agreement/judges.html", status_code=422, **ctx)
    if got.state == "pending":
        ctx["error"] = (f"The judges' agreement is being computed in the background (job {got.job_id}); "
                        "reload this page in a moment.")
        return render(request, "agreement/judges.html", status_code=202, **ctx)
    report = got.payload["report"]
    ctx["freshness"] = {"computed_at": got.computed_at, "stale": got.stale, "job": got.job_id}
    pw = report["pairwise_cohen"]
    ctx.update(report=report, chart=_kappa_heatmap(pw["annotators"], pw["matrix"],
                                                   "Pairwise Cohen's kappa, humans and judges", pw["kinds"]),
               modes=got.payload["modes"])
    return render(request, "agreement/judges.html", **ctx)


# --------------------------------------------------------------------------------------------
# disagreements


@router.get("/disagreements")
def disagreements_page(
    request: Request, session: SessionDep, user: ReviewerPage,
    taxonomy: str | None = None, family: str | None = None,
    annotators: Annotated[list[str] | None, Query()] = None, include_judges: bool = False,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1, page_size: Annotated[int, Query(ge=1, le=500)] = 50,
    study: str | None = None,
):
    """Runs ranked by disagreement, each annotator's labels side by side, links into the trace."""
    f = _filters(taxonomy, family, annotators, include_judges)
    ctx: dict[str, Any] = {"f": f, "options": service.filter_options(session), "data": None, "error": None}
    st, scope = _study(session, user, study)
    ctx["switcher"] = study_switcher(session, user, "agreement", st)
    try:
        data = service.load_agreement_data(session, taxonomy=f["taxonomy"], family=f["family"],
                                           annotators=f["annotators"] or None, include_judges=f["include_judges"],
                                           scope=scope)
        payload = service.disagreements_payload(data, page=page, page_size=page_size)
    except service.AgreementError as exc:
        ctx["error"] = str(exc)
        return render(request, "agreement/disagreements.html", status_code=422, **ctx)
    for r in payload["runs"]:
        modes = [m for m in data.modes if any(m == lab["mode"] for labs in r["labels"].values() for lab in labs)]
        r["rows"] = []
        for m in modes:
            cells = {a: [lab for lab in r["labels"][a] if lab["mode"] == m] for a in r["annotator_modes"]}
            blamed = {frozenset(lab["agent"] for lab in labs) for labs in cells.values() if labs}
            r["rows"].append({"mode": m, "disputed": m in r["disputed_modes"], "cells": cells,
                              "blame_differs": len(blamed) > 1})
        r["run_url"] = "/runs/" + quote(r["run_id"], safe="")
        r["adjudicate_url"] = "/adjudicate/" + quote(r["run_id"], safe="") + (
            "?" + urlencode({"taxonomy": payload["taxonomy"]}))
    n_pages = max(1, -(-payload["total"] // page_size))
    base = _query(f)
    ctx.update(data=payload, n_pages=n_pages,
               prev_url=f"/disagreements?{base}&page={page - 1}&page_size={page_size}" if page > 1 else None,
               next_url=f"/disagreements?{base}&page={page + 1}&page_size={page_size}" if page < n_pages else None)
    return render(request, "agreement/disagreements.html", **ctx)


# --------------------------------------------------------------------------------------------
# adjudication


def _run_tax(session: Session, run_id: str, taxonomy: str | None):
    from app.annotations.service import AnnotationError, NotFoundError, get_run_or_error, resolve_taxonomy

    try:
        return get_run_or_error(session, run_id), resolve_taxonomy(session, taxonomy or None)
    except (NotFoundError, AnnotationError) as exc:
        raise HTTPException(404, str(exc)) from None


def _adjudicate_url(run_id: str, tax_ref: str) -> str:
    return "/adjudicate/" + quote(run_id, safe="") + "?" + urlencode({"taxonomy": tax_ref})


@router.get("/adjudicate/{run_id:path}")
def adjudicate_page(request: Request, run_id: str, session: SessionDep, user: ReviewerPage,
                    taxonomy: str | None = None, fragment: bool = False):
    """All labels on a run by annotator, the candidates with their support, and the gold labels
    with accept / reject / undo / edit / merge / add / finish forms.  With `fragment=1` the answer
    is JSON `{run_id, taxonomy, url, title, trace_html, panel_html}`: the same trace and panel,
    rendered by the same (autoescaped) templates, which adjudicate.js swaps in to go to another
    run without a full page load."""
    from app.web.pages import taxonomy_view

    run, tax = _run_tax(session, run_id, taxonomy)
    adjudication.open_adjudication(session, run, tax, user)
    view = adjudication.adjudication_view(session, run, tax)
    tview = taxonomy_view(tax)
    mode_names = {m["code"]: m["name"] for m in tview["modes"]}
    from app.annotations.blind import demo_truth_visible_to
    from app.core.config import get_settings
    from app.web.trace_cache import cached_trace

    # the run's events beside the candidates (the same cached trace as the run page)
    _, trace_html = cached_trace(session, run, show_demo_truth=demo_truth_visible_to(user),
                                 success_threshold=get_settings().success_threshold)
    post_url = _adjudicate_url(run.run_id, view["taxonomy"])
    ctx = dict(v=view, tax=tview, mode_names=mode_names, run_url="/runs/" + quote(run.run_id, safe=""),
               post_url=post_url, flash=request.session.pop("flash", None),
               last=request.session.pop("adj_form", None) or {})
    if fragment:
        from app.web.templating import templates

        panel = templates.env.get_template("agreement/_adjudication_panel.html").render(request=request, **ctx)
        return JSONResponse({"run_id": run.run_id, "taxonomy": view["taxonomy"], "url": post_url,
                             "title": f"Adjudicate {run.run_id} · a2annotate", "trace_html": str(trace_html), "panel_html": panel},
                            headers={"Cache-Control": "no-store"})
    return render(request, "agreement/adjudicate.html", trace_html=trace_html, **ctx)


_SPLIT = re.compile(r"[\s,;]+")


def _seqs(text: str | None) -> list[Any]:
    """`"3, 5 7"` -> [3, 5, 7]; a token that is not a number stays text (validation names it)."""
    out: list[Any] = []
    for tok in _SPLIT.split((text or "").strip()):
        if tok:
            out.append(int(tok) if is_decimal(tok, signed=True) else tok)
    return out


#: the largest refused form kept in the (cookie) session to fill the form again
MAX_KEPT_FORM_CHARS = 1500


def _keep_form(request: Request, action: str, form: Any) -> None:
    """Keep a refused add / edit / finish form in the session so the page shows it filled in
    again (only when small: the session is a cookie)."""
    if action not in ("add", "edit", "finish"):
        return
    kept = {"action": action, "gold_label_id": str(form.get("gold_label_id") or ""),
            "label_mode": str(form.get("label_mode") or ""), "label_agent": str(form.get("label_agent") or ""),
            "label_evidence": str(form.get("label_evidence") or ""),
            "label_principals": [str(p) for p in form.getlist("label_principals")],
            "rationale": str(form.get("rationale") or "")}
    if sum(len(str(v)) for v in kept.values()) <= MAX_KEPT_FORM_CHARS:
        request.session["adj_form"] = kept


@router.post("/adjudicate/{run_id:path}", dependencies=CSRF)
async def adjudicate_post(request: Request, run_id: str, session: SessionDep, user: ReviewerPage,
                          taxonomy: str | None = None):
    """One adjudication action from a form; redirects back with a message."""
    form = await request.form()
    begin_write(session)
    run, tax = _run_tax(session, run_id, form.get("taxonomy") or taxonomy)
    action = str(form.get("action") or "")
    label: dict[str, Any] = {}
    for key in ("mode", "agent"):
        value = str(form.get(f"label_{key}") or "").strip()
        if value:
            label[key] = value
    if form.get("label_evidence") is not None:
        ev = _seqs(str(form.get("label_evidence")))
        if ev or action != "merge":
            label["evidence"] = ev
    principals = [str(p) for p in form.getlist("label_principals") if str(p).strip()]
    if principals:
        label["principals"] = principals
    params = {
        "mode": form.get("mode") or None,
        "agent": form.get("agent") or None,
        "gold_label_id": form.get("gold_label_id") or None,
        "label_ids": [str(x) for x in form.getlist("label_ids")],
        "label": label,
        "rationale": form.get("rationale"),
        "version": form.get("version") or None,
    }
    url = _adjudicate_url(run.run_id, f"{tax.key}@{tax.version}")
    try:
        message = adjudication.apply_action(session, run, tax, user, action, params)
    except adjudication.GoldLabelStale as exc:
        session.rollback()
        request.session["flash"] = {"kind": "error", "text": f"Not saved: {exc}. The page now shows the stored state."}
        return RedirectResponse(url, status_code=303)
    except (adjudication.AdjudicationError, adjudication.AdjudicationLocked) as exc:
        session.rollback()
        request.session["flash"] = {"kind": "error", "text": str(exc)}
        _keep_form(request, action, form)
        return RedirectResponse(url, status_code=303)
    request.session["flash"] = {"kind": "ok", "text": message[:1].upper() + message[1:] + "."}
    return RedirectResponse(url, status_code=303)
