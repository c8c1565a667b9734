"""The annotator's pages: the queue (home), the runs list and the run page (trace + labeling)."""
from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from sqlmodel import Session, select

from app.annotations.models import Annotation, Assignment
from app.api.deps import MAX_PAGE, SessionDep
from app.auth.models import User
from app.runs import service as runs_service
from app.runs.models import Agent, Run, Scenario
from app.taxonomies.models import Taxonomy
from app.web.deps import PageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)

RUN_FILTERS = ("family", "alignment", "status", "scenario", "model", "harness")
PAGE_SIZES = (25, 50, 100, 200)


def _tax_ref(tax: Taxonomy) -> str:
    return f"{tax.key}@{tax.version}"


# --------------------------------------------------------------------------- home: the queue

@router.get("/")
def home(request: Request, session: SessionDep, user: PageUser):
    """The annotator's queue: counts, the list in order, and a Start / Next run button."""
    from app.annotations.assignments import user_queue

    queue = user_queue(session, user)
    nxt = next((i for i in queue["items"] if i["status"] not in ("submitted", "skipped", "flagged")), None)
    return render(request, "home.html", queue=queue, next_item=nxt)


# --------------------------------------------------------------------------- runs list

def _distinct(session: Session, column) -> list[str]:
    return [v for v in session.exec(select(column).distinct().order_by(column)).all() if v]


@router.get("/runs")
def runs_page(
    request: Request, session: SessionDep, user: PageUser,
    family: str | None = None, alignment: str | None = None, status: str | None = None,
    scenario: str | None = None, model: str | None = None, harness: str | None = None,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1, page_size: Annotated[int, Query(ge=1, le=500)] = 50,
):
    """All runs with filters (family, alignment, status, scenario, model, harness) and paging."""
    values = {"family": family, "alignment": alignment, "status": status, "scenario": scenario,
              "model": model, "harness": harness}
    values = {k: (v.strip() or None) if isinstance(v, str) else None for k, v in values.items()}
    f = runs_service.RunFilter(**values)
    total, rows = runs_service.list_runs(session, f, page, page_size)
    summaries = runs_service.run_summaries(session, rows)
    from app.capture.service import finalize_idle, recording_run_ids

    finalize_idle(session)
    recording = recording_run_ids(session, [r.run_id for r in rows])
    for s in summaries:
        s["recording"] = s["run_id"] in recording
    mine = {}
    if rows:
        for run_pk, st in session.exec(select(Annotation.run_pk, Annotation.status).where(
                Annotation.user_id == user.id, Annotation.run_pk.in_([r.id for r in rows]))).all():
            # "submitted" wins over "draft" when several taxonomy versions exist
            if mine.get(run_pk) != "submitted":
                mine[run_pk] = st
    for s, r in zip(summaries, rows):
        s["mine"] = mine.get(r.id)
    options = {
        "family": _distinct(session, Scenario.family),
        "alignment": _distinct(session, Scenario.alignment),
        "status": _distinct(session, Run.status),
        "model": _distinct(session, Agent.model),
        "harness": _distinct(session, Agent.harness),
    }
    active = {k: v for k, v in values.items() if v}
    n_pages = max(1, -(-total // page_size))

    def page_url(p: int) -> str:
        return "/runs?" + urlencode({**active, "page": p, "page_size": page_size})

    return render(request, "runs.html", runs=summaries, total=total, page=page, page_size=page_size,
                  n_pages=n_pages, filters=values, options=options, page_sizes=PAGE_SIZES,
                  prev_url=page_url(page - 1) if page > 1 else None,
                  next_url=page_url(page + 1) if page < n_pages else None)


# --------------------------------------------------------------------------- run page

def choose_taxonomy(session: Session, user: User, run: Run, ref: str | None) -> Taxonomy | None:
    """The taxonomy version to label `run` under: `ref` if given, else the user's assignment for
    the run, else the user's existing annotation of it, else (reviewers and admins) the taxonomy
    of the run's first annotation by anyone (e.g. the attribution taxonomy of an imported Who&When
    run), else the default (a2-failures latest)."""
    from app.taxonomies.service import resolve

    if ref:
        return resolve(session, ref)
    pk = session.exec(select(Assignment.taxonomy_pk).where(Assignment.run_pk == run.id,
                                                           Assignment.user_id == user.id)
                      .order_by(Assignment.id.desc())).first()
    if pk is None:
        pk = session.exec(select(Annotation.taxonomy_pk).where(Annotation.run_pk == run.id,
                                                               Annotation.user_id == user.id)
                          .order_by(Annotation.updated_at.desc())).first()
    if pk is None and user.role in ("admin", "reviewer"):
        pk = session.exec(select(Annotation.taxonomy_pk).where(Annotation.run_pk == run.id)
                          .order_by(Annotation.id)).first()
    if pk is not None:
        return session.get(Taxonomy, pk)
    return resolve(session, None)


def taxonomy_view(tax: Taxonomy) -> dict[str, Any]:
    """Categories with their modes (code, name, definition, boundary, hint), in file order."""
    d = tax.definition or {}
    modes = [{k: m.get(k) for k in ("code", "name", "category", "definition", "boundary", "hint")}
             for m in d.get("modes") or []]
    cats = []
    for c in d.get("categories") or []:
        cats.append({"code": c.get("code"), "name": c.get("name"), "description": c.get("description"),
                     "modes": [m for m in modes if m["category"] == c.get("code")]})
    known = {c["code"] for c in cats}
    orphans = [m for m in modes if m["category"] not in known]
    if orphans:
        cats.append({"code": "", "name": "Other", "description": None, "modes": orphans})
    return {"ref": _tax_ref(tax), "key": tax.key, "version": tax.version, "name": tax.name,
            "categories": cats, "modes": modes}


def attributions_of(annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attribution labels (no mode: agent, step, reason) among `annotations` (the API shape),
    one entry each: ``{annotator, kind, source_name, agent, step, reason}``; `step` is the earliest
    evidence seq (the decisive mistake), as the attribution agreement takes it."""
    from app.auth.models import source_name_for

    out = []
    for a in annotations:
        kind = a.get("annotator_kind") or "human"
        for lab in a.get("labels") or []:
            if lab.get("mode") is None and lab.get("agent"):
                ev = [s for s in lab.get("evidence") or [] if isinstance(s, int)]
                out.append({"annotator": a["annotator"], "kind": kind,
                            "source_name": source_name_for(a["annotator"], kind), "agent": lab["agent"],
                            "step": min(ev) if ev else None, "reason": lab.get("note")})
    return out


@router.get("/runs/{run_id:path}")
def run_page(request: Request, run_id: str, session: SessionDep, user: PageUser,
             taxonomy: str | None = None):
    """One run: scenario, principals and outcomes, lanes per agent, private state, reachability,
    and the labeling panel. Other annotators' labels (and machine audits) are shown by the blind
    rule of app.annotations.blind: to reviewers and admins, and to annotators once an admin has
    revealed labels; the demo truth to admins only."""
    from fastapi.encoders import jsonable_encoder

    from app.annotations.blind import demo_truth_visible_to, labels_visible_to
    from app.annotations.service import annotations_to_api, find_annotation, is_adjudicated
    from app.core.config import get_settings
    from app.taxonomies.service import attribution_schema

    run = runs_service.get_run(session, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id!r}")
    tax = choose_taxonomy(session, user, run, taxonomy)
    if tax is None:
        raise HTTPException(404, f"no taxonomy {taxonomy!r}" if taxonomy else "no taxonomy is registered")
    from app.capture.service import finalize_idle, is_recording
    from app.web.trace_cache import cached_trace

    finalize_idle(session)
    recording = is_recording(session, run.run_id)
    # blind mode: the same rule as the API and exports (reviewers, admins, or everyone once revealed)
    see_others = labels_visible_to(session, user)
    view, trace_html = cached_trace(session, run, show_demo_truth=demo_truth_visible_to(user),
                                    success_threshold=get_settings().success_threshold, recording=recording,
                                    show_labels=see_others)
    tview = taxonomy_view(tax)
    others = []
    if see_others:
        from app.annotations.service import list_annotations

        _, rows = list_annotations(session, user, run_id=run.run_id, taxonomy=tview["ref"], page_size=200)
        others = [a for a in annotations_to_api(session, rows) if a["annotator"] != user.username]
    # the caller's own annotation goes in the page: no extra request, no 404 in the console
    own = find_annotation(session, user, run, tax)
    from app.flags.service import REASONS, flag_of, list_flags

    my_flag = flag_of(session, user, run, tax)
    flags_here = list_flags(session, run_pk=run.id) if user.role in ("admin", "reviewer") else []
    adjudicated = is_adjudicated(session, run, tax)
    config = {
        "run_id": view["run_id"], "taxonomy": tview["ref"],
        "mine": jsonable_encoder(annotations_to_api(session, [own])[0]) if own is not None else None,
        "locked": adjudicated or recording,  # a recording run is read-only until final
        "recording": recording,
        "modes": [{"code": m["code"], "name": m["name"], "category": m["category"]} for m in tview["modes"]],
        "categories": [{"code": c["code"], "name": c["name"]} for c in tview["categories"]],
        "agents": [{"id": a["id"], "principal": a["principal"], "principal_name": a["principal_name"]}
                   for a in view["agents"]],
        "principals": [{"id": p["id"], "name": p["name"]} for p in view["principals"]],
        "n_events": len(view["events"]),
        "flag": {"kind": my_flag.kind, "reason": my_flag.reason, "note": my_flag.note} if my_flag else None,
        "reasons": REASONS,
        "attribution": attribution_schema(tax),
        # reviewers (and everyone once labels are revealed): the others' attributions, marked in the trace
        "attributions": attributions_of(others),
    }
    from app.detectors.service import page_hints

    config["hints"] = page_hints(session, user, run, tax)  # None unless hints are on for this user's batch
    gold = None
    if adjudicated:  # the gold labels beside the caller's own (locked) labels
        from app.agreement.adjudication import adjudication_view

        adj = adjudication_view(session, run, tax)
        gold = {"no_failure": adj["no_failure"], "rationale": adj["rationale"],
                "labels": [g for g in adj["gold"] if g["accepted"]]}
    return render(request, "run.html", t=view, tax=tview, config=config, show_audits=see_others, gold=gold,
                  attribution=config["attribution"], attributions=config["attributions"],
                  others=others, is_admin=demo_truth_visible_to(user), flags_here=flags_here, trace_html=trace_html,
                  reasons=REASONS, recording=recording)

