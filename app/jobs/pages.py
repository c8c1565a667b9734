"""The `/jobs` page: background jobs with their progress, result and error; cancel by button.

Everybody sees their own jobs; reviewers and admins see all. While a job is queued or running
the page refreshes itself every few seconds (a meta refresh: no script)."""
from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.jobs import service
from app.jobs.views import cancel_as, may_cancel
from app.web.csrf import verify_form_csrf
from app.web.deps import PageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)

#: seconds between refreshes while a job is queued or running
REFRESH_SECONDS = 3


@router.get("/jobs")
def jobs_page(request: Request, session: SessionDep, user: PageUser, state: str | None = None):
    owner = None if user.role in ("admin", "reviewer") else user.id
    jobs = service.list_jobs(session, user_id=owner, state=state or None, limit=200)
    rows = [dict(service.payload(j), may_cancel=may_cancel(user, j)) for j in jobs]
    active = any(r["state"] in ("queued", "running") for r in rows)
    return render(request, "jobs.html", rows=rows, state=state or "", refresh=REFRESH_SECONDS if active else None,
                  states=("queued", "running", "done", "failed", "cancelled"))


@router.post("/jobs/{job_id}/cancel", dependencies=[Depends(verify_form_csrf)])
def cancel_page(job_id: str, session: SessionDep, user: PageUser):
    cancel_as(session, user, job_id)
    return RedirectResponse("/jobs", status_code=303)
