"""The `/jobs` page: background jobs with their progress, result and error; cancel by button; and
`/jobs/{id}`, one job: state, progress bar, result summary, errors and warnings, a link to its result, the cancel button.

Everybody sees their own jobs; reviewers and admins see all (the API's rule, `may_see`). While a
job is queued or running the page refreshes itself every few seconds (a meta refresh: no script)."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.jobs import service
from app.jobs.views import cancel_as, may_cancel, may_see
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


#: where a finished job's result is seen, by kind (a file job links its download instead)
RESULT_PAGES = {"detect": ("/admin/detectors", "the detectors page and its scores"),
                "import": ("/runs", "the runs"),
                "judge": ("/judges", "the judges page")}


def _errors(job: dict[str, Any]) -> list[str]:
    """A finished job's errors, each with where it happened: an import's rejected runs
    (`{location, message}`, the location being file:line or the run), a detector run's failed
    (run, detector) pairs."""
    result = job.get("result")
    if not isinstance(result, dict):
        return []
    out: list[str] = []
    for e in result.get("errors") or []:
        if isinstance(e, dict):
            parts = [str(e["location"])] if e.get("location") else []
            parts += [f"{k} {e[k]}" for k in ("file", "line", "run_id", "detector", "field") if e.get(k)]
            where = ", ".join(parts)
            out.append(f"{where}: {e.get('error') or e.get('message') or e}" if where else str(e))
        else:
            out.append(str(e))
    return out


def _warnings(job: dict[str, Any]) -> list[str]:
    """What a finished job's result warns of: an import's warnings (with their location), a
    detector run's problems."""
    result = job.get("result")
    if not isinstance(result, dict):
        return []
    out: list[str] = []
    for w in result.get("warnings") or []:
        if isinstance(w, dict) and w.get("location") and w.get("message"):  # an import's {location, message}
            out.append(f"{w['location']}: {w['message']}")
        else:
            out.append(w if isinstance(w, str) else str(w.get("message") or w))
    out += [str(p) for p in result.get("problems") or []]
    return out


def _result_link(job: dict[str, Any]) -> tuple[str, str] | None:
    result = job.get("result")
    if job["state"] != "done":
        return None
    if isinstance(result, dict) and "file" in result:
        return f"/api/v1/jobs/{job['id']}/file", f"download {result.get('filename', 'the file')}"
    return RESULT_PAGES.get(job["kind"])


@router.get("/jobs/{job_id}")
def job_page(request: Request, session: SessionDep, user: PageUser, job_id: str):
    """One job: its state, progress bar, warnings, result link and cancel button."""
    job = service.get_job(session, job_id)
    if job is None or not may_see(user, job):
        raise HTTPException(404, f"no job {job_id!r}")
    row = dict(service.payload(job), may_cancel=may_cancel(user, job))
    active = row["state"] in ("queued", "running")
    return render(request, "job.html", job=row, errors=_errors(row), warnings=_warnings(row), link=_result_link(row),
                  refresh=REFRESH_SECONDS if active else None)


@router.post("/jobs/{job_id}/cancel", dependencies=[Depends(verify_form_csrf)])
def cancel_page(job_id: str, session: SessionDep, user: PageUser, back: Annotated[str, Form()] = ""):
    """Cancel, then back to the jobs list (or, with ``back=job``, to the job's own page)."""
    cancel_as(session, user, job_id)
    return RedirectResponse(f"/jobs/{job_id}" if back == "job" else "/jobs", status_code=303)
