"""Taxonomy browser: every taxonomy and version, and one version's categories and mode definitions."""
from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.deps import SessionDep
from app.taxonomies import service
from app.taxonomies.views import taxonomy_index
from app.web.deps import PageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)


def _page(request: Request, session, ref: str | None):
    tax = service.resolve(session, ref)
    status = 200
    if tax is None and ref is not None:
        status = 404
    modes_by_cat: dict[str, list[dict]] = {}
    if tax is not None:
        for m in tax.definition.get("modes") or []:
            modes_by_cat.setdefault(m["category"], []).append(m)
    return render(request, "taxonomies.html", status_code=status, index=taxonomy_index(session), tax=tax,
                  ref=ref, modes_by_cat=modes_by_cat)


@router.get("/taxonomies")
def taxonomies_page(request: Request, session: SessionDep, user: PageUser):
    return _page(request, session, None)


@router.get("/taxonomies/{ref}")
def taxonomy_page(ref: str, request: Request, session: SessionDep, user: PageUser):
    return _page(request, session, ref)
