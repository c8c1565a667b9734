"""The export page: every table in every format it comes in, with its options, blind mode respected.

Downloads go through the REST export (`/api/v1/exports/{table}.{fmt}`), which applies the same blind
rule as the rest of the app; this page only lists what the caller may take and builds the links.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.exports.schema import TABLES
from app.web.deps import PageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)
SOURCES = ("auto", "gold", "majority")


def _tables(session, user) -> list[dict]:
    from app.annotations.blind import labels_visible_to

    see_all = labels_visible_to(session, user)
    out = []
    for name, spec in TABLES.items():
        own_only = spec.labels and not see_all and name in ("annotations", "annotations_canonical")
        refused = spec.labels and not see_all and not own_only
        out.append({"name": name, "description": spec.description, "formats": list(spec.formats),
                    "labels": spec.labels, "report": spec.report, "notes": spec.notes,
                    "own_only": own_only, "refused": refused, "n_columns": len(spec.columns)})
    return out


#: what a user wants, and the tables that give it (the page's sections, in order)
LABEL_TABLES = ("annotations", "gold_labels")
DATASET_TABLES = ("runs_canonical", "runs", "events", "agents", "principals", "scenarios", "annotations_canonical",
                  "audits", "checks")


def _batches(session) -> list[str]:
    from sqlmodel import select

    from app.annotations.models import Assignment

    return sorted(b for b in session.exec(select(Assignment.batch).distinct()).all() if b)


def scope_params(batch: str | None, study: Any = None) -> dict[str, str]:
    """The query parameters that limit the page's downloads to some runs: a batch's (every
    download) and a study's (the table downloads, `study=` of the REST exports)."""
    return {**({"batch": batch} if batch else {}), **({"study": study.name} if study is not None else {})}


@router.get("/exports")
def exports_page(request: Request, session: SessionDep, user: PageUser, batch: str | None = None,
                 taxonomy: str | None = None, study: str | None = None):
    """Exports by what a user wants: labels for analysis (wide and long), the full dataset,
    Hugging Face, MAD; every table below. `batch` limits the downloads to a batch's runs, `study`
    the table downloads to a study's runs."""
    from app.annotations.blind import labels_visible_to
    from app.studies.access import study_for
    from app.taxonomies.service import all_versions
    from app.web.deps import study_switcher

    st = study_for(session, user, "export", study)
    tables = _tables(session, user)
    by_name = {t["name"]: t for t in tables}
    batches = _batches(session)
    batch = batch if batch in batches else None
    scope = scope_params(batch, st)
    q = ("?" + urlencode(scope)) if scope else ""
    wide_q = "?" + urlencode({**scope, **({"taxonomy": taxonomy} if taxonomy else {})}) if (scope or taxonomy) else ""
    return render(request, "exports.html", tables=tables, sources=SOURCES, taxonomies=all_versions(session),
                  blind=not labels_visible_to(session, user), batches=batches, batch=batch, taxonomy=taxonomy or "",
                  scope_q=q, wide_q=wide_q, label_tables=[by_name[n] for n in LABEL_TABLES if n in by_name],
                  dataset_tables=[by_name[n] for n in DATASET_TABLES if n in by_name],
                  report_tables=[t for t in tables if t["report"]],
                  study=st, switcher=study_switcher(session, user, "export", st))


@router.get("/exports/download")
def exports_download(session: SessionDep, user: PageUser, table: str, fmt: str = "csv", source: str = "auto",
                     taxonomy: str = "", study: str = ""):
    """The export page's form for one table: redirects to its REST download."""
    spec = TABLES.get(table)
    if spec is None or fmt not in spec.formats:
        raise HTTPException(404, f"no export {table!r} as {fmt!r}")
    q = {}
    if spec.report:
        q = {"source": source or "auto", **({"taxonomy": taxonomy} if taxonomy else {})}
    if study:
        q["study"] = study
    url = f"/api/v1/exports/{table}.{fmt}" + (f"?{urlencode(q)}" if q else "")
    return RedirectResponse(url, status_code=303)
