"""The studies page `/admin/studies`: every study (an admin) or those you lead, with runs,
taxonomy, selection, members and links to its assignments, progress, detectors, reports and
agreement; an admin creates studies here."""
from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.studies import service
from app.studies.access import leads_any
from app.taxonomies.service import all_versions
from app.web.csrf import verify_form_csrf
from app.web.deps import AdminPage, PageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/admin/studies")
def studies_page(request: Request, session: SessionDep, user: PageUser):
    if not leads_any(session, user):
        raise HTTPException(403, "this page requires role admin, or a reviewer who leads a study")
    rows = [s for s in service.list_studies(session, user)
            if user.role == "admin" or any(m["username"] == user.username and m["role"] == "lead"
                                           for m in s["members"])]
    return render(request, "admin/studies.html", studies=rows, taxonomies=all_versions(session),
                  keys=service.SELECTION_KEYS, flash=request.session.pop("flash", None))


@router.post("/admin/studies", dependencies=[Depends(verify_form_csrf)])
def studies_create(request: Request, session: SessionDep, user: AdminPage, name: Annotated[str, Form()],
                   taxonomy: Annotated[str, Form()] = "", selection: Annotated[str, Form()] = "",
                   leads: Annotated[str, Form()] = "", annotators: Annotated[str, Form()] = ""):
    """Create a study: `selection` is a JSON object of filters; leads and annotators comma lists."""
    try:
        sel = json.loads(selection) if selection.strip() else {}
    except json.JSONDecodeError as exc:
        request.session["flash"] = {"kind": "error", "text": f"selection: not JSON ({exc.msg})"}
        return RedirectResponse("/admin/studies", status_code=303)
    try:
        study = service.create_study(session, name, taxonomy=taxonomy or None, selection=sel,
                                     leads=[x.strip() for x in leads.split(",") if x.strip()],
                                     annotators=[x.strip() for x in annotators.split(",") if x.strip()],
                                     created_by=user)
    except service.StudyError as exc:
        session.rollback()
        request.session["flash"] = {"kind": "error", "text": f"Could not create the study: {exc}"}
        return RedirectResponse("/admin/studies", status_code=303)
    request.session["flash"] = {"kind": "ok", "text": f"Created study {study.name}."}
    return RedirectResponse("/admin/studies", status_code=303)
