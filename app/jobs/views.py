"""REST routes of background jobs: list, read, cancel.

Who sees a job: its owner (who started it), and reviewers and admins; who cancels it: its owner
and admins.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from app.annotations.http import JsonErrorRoute
from app.api.deps import ApiUser, SessionDep
from app.auth.models import User
from app.core.config import get_settings
from app.jobs import service
from app.jobs.models import Job

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"], route_class=JsonErrorRoute)


class Progress(BaseModel):
    done: int
    total: int | None = Field(None, description="null while the total is not known")


class JobOut(BaseModel):
    id: str
    kind: str = Field(description="`import`, ...")
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    progress: Progress
    result: Any = Field(None, description="The job's result once done (an import: the import summary).")
    error: str | None = Field(None, description="Why it failed or was cancelled; while queued again, why it was retried.")
    attempts: int
    cancel_requested: bool
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    user_id: int | None


def may_see(user: User, job: Job) -> bool:
    return job.user_id == user.id or user.role in ("admin", "reviewer")


def may_cancel(user: User, job: Job) -> bool:
    return job.user_id == user.id or user.role == "admin"


@router.get("", response_model=list[JobOut], summary="Background jobs, newest first",
            description="Your jobs; reviewers and admins see everybody's. Filters: `state`, `kind`.")
def list_jobs(session: SessionDep, user: ApiUser,
              state: Annotated[Literal["queued", "running", "done", "failed", "cancelled"] | None, Query()] = None,
              kind: Annotated[str | None, Query(max_length=40)] = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
    owner = None if user.role in ("admin", "reviewer") else user.id
    return [service.payload(j) for j in service.list_jobs(session, user_id=owner, state=state, kind=kind, limit=limit)]


@router.get("/{job_id}", response_model=JobOut, summary="One background job: state, progress, result, error",
            responses={404: {"description": "no such job, or not yours"}})
def get_job(job_id: str, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    job = service.get_job(session, job_id)
    if job is None or not may_see(user, job):
        raise HTTPException(404, f"no job {job_id!r}")
    return service.payload(job)


@router.post("/{job_id}/cancel", response_model=JobOut,
             summary="Cancel a job: a queued one at once, a running one at its next check (about a second)",
             responses={403: {"description": "neither your job nor an admin"}, 404: {"description": "no such job"},
                        409: {"description": "the job has already finished"}})
def cancel_job(job_id: str, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    return service.payload(cancel_as(session, user, job_id))


def cancel_as(session, user: User, job_id: str) -> Job:
    """Cancel `job_id` for `user` (the API and the jobs page): 404 when it is not theirs to see,
    403 when not theirs to cancel, 409 when it has already finished."""
    job = service.get_job(session, job_id)
    if job is None or not may_see(user, job):
        raise HTTPException(404, f"no job {job_id!r}")
    if not may_cancel(user, job):
        raise HTTPException(403, "only the job's owner or an admin may cancel it")
    try:
        return service.request_cancel(session, job_id)
    except service.JobError as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/{job_id}/file", summary="The file a finished job made (an export), as a download",
            response_class=FileResponse,
            responses={200: {"description": "the file", "content": {"application/zip": {}}},
                       404: {"description": "no such job, or neither yours nor are you an admin"},
                       409: {"description": "the job is not done, or makes no file"},
                       410: {"description": "the file has expired (kept JOB_FILE_RETENTION_HOURS after the job "
                                             "ends), was already sent within the request's wait, or was removed"}})
def get_job_file(job_id: str, session: SessionDep, user: ApiUser) -> FileResponse:
    """Who may download it: the job's owner and admins (an export made for an admin holds what only
    admins see, the demo corpus's seeded truth)."""
    job = service.get_job(session, job_id)
    if job is None or not may_cancel(user, job):
        raise HTTPException(404, f"no job {job_id!r}")
    result = job.result if isinstance(job.result, dict) else {}
    if job.state != "done" or "file" not in result:
        raise HTTPException(409, f"job {job_id} is {job.state}" + ("" if job.state != "done" else " and made no file"))
    path = Path(result["file"])
    if service.file_expired(job):
        if job.params.get("folder"):  # the sweep would remove it soon anyway
            shutil.rmtree(job.params["folder"], ignore_errors=True)
        hours = get_settings().job_file_retention_hours
        raise HTTPException(410, f"the file of job {job_id} has expired: job files are kept "
                                 f"{hours:g} hours after the job ends (JOB_FILE_RETENTION_HOURS); run the export again")
    if not path.is_file():
        raise HTTPException(410, f"the file of job {job_id} is gone: it was sent when the export ended within the "
                                 "request's wait (EXPORT_WAIT_SECONDS), or removed; run the export again")
    return FileResponse(path, media_type=result.get("media_type", "application/octet-stream"),
                        filename=result.get("filename", path.name))
