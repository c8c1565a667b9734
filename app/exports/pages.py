"""The export page: every table in every format it comes in, with its options, blind mode respected.

Downloads go through the REST export (`/api/v1/exports/{table}.{fmt}`), which applies the same blind
rule as the rest of the app; this page only lists what the caller may take and builds the links.
"""
from __future__ import annotations

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


@router.get("/exports")
def exports_page(request: Request, session: SessionDep, user: PageUser, study: str | None = None):
    """Every export table with its formats; report tables take a label source and a taxonomy;
    with `study` every download holds only that study's runs."""
    from app.annotations.blind import labels_visible_to
    from app.studies.access import study_for
    from app.taxonomies.service import all_versions
    from app.web.deps import study_switcher

    st = study_for(session, user, "export", study)
    return render(request, "exports.html", tables=_tables(session, user), sources=SOURCES,
                  taxonomies=all_versions(session), blind=not labels_visible_to(session, user),
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
