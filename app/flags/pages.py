"""The reviewers' page of flagged and skipped runs."""
from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.core.db import begin_write
from app.flags import service
from app.web.csrf import verify_form_csrf
from app.web.deps import ReviewerPage
from app.web.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/flagged")
def flagged_page(request: Request, session: SessionDep, user: ReviewerPage, history: bool = False):
    """Open flags (and skips) with reason and note, each linking to the run; resolve puts the run
    back in the annotator's queue."""
    rows = service.list_flags(session, service.KINDS, include_resolved=history)
    return render(request, "flagged.html", rows=rows, history=history, reasons=service.REASONS,
                  n_flags=sum(1 for r in rows if r["kind"] == "flag" and not r["resolved"]),
                  n_skips=sum(1 for r in rows if r["kind"] == "skip" and not r["resolved"]))


@router.post("/flagged/{flag_id}/resolve", dependencies=[Depends(verify_form_csrf)])
def resolve_page(request: Request, flag_id: int, session: SessionDep, user: ReviewerPage):
    begin_write(session)  # SQLite: wait for the write lock like saves (no "database is locked")
    if service.resolve_flag(session, flag_id, user) is None:
        raise HTTPException(404, f"no flag {flag_id}")
    session.commit()
    return RedirectResponse("/flagged", status_code=303)
