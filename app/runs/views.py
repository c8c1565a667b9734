"""REST routes for runs and bulk import."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlmodel import Session

from app.annotations.http import JsonErrorRoute
from app.api.deps import MAX_PAGE, ApiUser, SessionDep
from app.api.uploads import UploadUser, receive_upload, upload_request_body
from app.core.config import get_settings
from app.ingest.profile import builtin_profile_names
from app.jobs.models import FINAL
from app.runs import service

router = APIRouter(prefix="/api/v1", tags=["runs"], route_class=JsonErrorRoute)


@router.get("/runs", summary="List runs with filters and pagination",
            responses={403: {"description": "blind mode: an annotator filtering by another annotator"},
                       422: {"description": "bad parameter; `detail` names it"}})
def list_runs(
    session: SessionDep, user: ApiUser,
    family: str | None = None, scenario: str | None = None, model: str | None = None,
    harness: str | None = None,
    status: Annotated[Literal["completed", "failed", "timeout", "error"] | None, Query()] = None,
    alignment: Annotated[Literal["cooperative", "mixed", "competitive"] | None, Query()] = None,
    annotated_by: Annotated[str | None, Query(description="username with a submitted annotation")] = None,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    page_size: Annotated[int, Query(ge=1, description="at most MAX_PAGE_SIZE (default 500)")] = 50,
) -> dict[str, Any]:
    """Runs ordered by run_id, `{total, page, page_size, items}`; every filter given must match:
    `family`, `scenario` (scenario id), `model` / `harness` (of any agent of the run), `status`,
    `alignment`, `annotated_by` (a user with a submitted annotation of the run). `page` counts
    from 1; `page_size` above MAX_PAGE_SIZE is lowered to it (the answer says the size used).
    `annotated_by` is refused (403) for another user's name while labels are blind, unless the
    caller is a reviewer or admin."""
    page_size = min(page_size, get_settings().max_page_size)
    if annotated_by and annotated_by != user.username and user.role == "annotator":
        from app.annotations.blind import labels_visible_to

        if not labels_visible_to(session, user):
            raise HTTPException(403, "blind mode: annotators cannot filter by another annotator's work")
    f = service.RunFilter(family=family, scenario=scenario, model=model, harness=harness, status=status,
                          alignment=alignment, annotated_by=annotated_by)
    total, rows = service.list_runs(session, f, page, page_size)
    return {"total": total, "page": page, "page_size": page_size,
            "items": service.run_summaries(session, rows)}


@router.get("/runs/{run_id:path}", summary="One run in canonical shape", responses={404: {"description": "no such run"}})
def get_run(run_id: str, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    """The run as stored, in the canonical shape. For annotators, while labels are blind, the
    run's `audits` (machine judges' labels) and `checks` are withheld, and so is every metadata
    field that holds a label, an answer or a judgement (`audited_by`, a dataset's answers such as
    Who&When's `whowhen.mistake_*` / `ground_truth`, a `hidden` section and the paths listed in
    `metadata.hidden_keys`; see docs/importing.md); the demo corpus's seeded truth
    (`metadata.demo_truth`) is shown to admins only."""
    from app.annotations.blind import sight_of, visible_run

    run = service.get_run(session, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return visible_run(service.to_canonical(session, run), sight_of(session, user))


@router.post(
    "/imports",
    summary="Bulk import runs",
    description=(
        "Body: a JSON array of canonical runs (`application/json`), JSON Lines (`application/x-ndjson`), "
        "or a multipart upload with field `file` (a JSON/JSONL file, an A2A wire log, or a zip of files or "
        "per-run directories). The field's datasets are recognised by their records' keys: MAST's MAD files "
        "(full or human-labelled) and Who&When records (one object, or an array); OTLP/JSON trace files by "
        "`resourceSpans`. Each run is stored atomically; a rejected run leaves nothing behind. "
        "Query `replace=true` overwrites runs whose content changed. An import profile reads logs in "
        "other shapes, as `a2annotate import --profile` does: query `profile=NAME` (a built-in profile) or "
        "the multipart field `profile` (a profile's YAML, e.g. the one `a2annotate inspect --write-profile` "
        "writes); a profile with a bad key answers 422 naming the key, before anything is stored. "
        "Directory trees (in a zip) are read "
        "leniently: what does not map is kept and listed in `warnings`; `strict=true` rejects every run "
        "with a warning instead (each problem one entry of `errors`). Answers "
        "`{imported, unchanged, replaced, rejected, errors:[{location, message}], unused_files, "
        "warnings:[{location, message, field?, run_id?}], unknown_modes:{name: count}}`; a malformed "
        "run is one entry of `errors` (and counted in `rejected`), not an HTTP error. The import runs as a "
        "background job: this answer comes when the job ends within IMPORT_WAIT_SECONDS (header "
        "`Content-Location` names the job); otherwise, or with `Prefer: respond-async`, 202 with "
        "`Location: /api/v1/jobs/{id}` and `{job}`, whose `result` has the shape above once it is done. A job "
        "stopped by its CPU or time budget (JOB_CPU_SECONDS, JOB_WALL_SECONDS) within the wait answers 422."),
    openapi_extra={"requestBody": upload_request_body(
        {"application/json": "a JSON array of canonical runs (or one run object)",
         "application/x-ndjson": "JSON Lines: one canonical run a line"},
        "Runs to import: a JSON array, JSON Lines, or a multipart upload (field `file`: JSON, JSON Lines, "
        "an A2A wire log or a zip; optional field `profile`: an import profile).",
        {"profile": "an import profile (the YAML text `a2annotate inspect --write-profile` writes, at most "
                    "64 KiB) to read `file` with, as `a2annotate import --profile FILE` does: a tree or zip in "
                    "another layout, or a file holding several runs (`runs:`). Checked before anything is "
                    "stored: a bad key answers 422 naming it"})},
    responses={202: {"description": "the import job is queued or running: follow `Location` "
                                    "(GET /api/v1/jobs/{id})"},
               400: {"description": "the client disconnected before the body was complete"},
               403: {"description": "requires role admin or reviewer"},
               408: {"description": "the body stalled (UPLOAD_IDLE_TIMEOUT) or took too long (UPLOAD_TOTAL_TIMEOUT)"},
               413: {"description": "upload larger than MAX_UPLOAD_BYTES (refused as soon as it is passed)"},
               422: {"description": "empty body, a multipart upload without the field `file`, a profile that is "
                                    "not valid (`detail` names the bad key), or the import job failed within "
                                    "the wait (`detail` says why, `job` where it is)"}},
)
async def import_runs(request: Request, user: UploadUser, replace: bool = False,
                      strict: bool = False,
                      profile: Annotated[str | None, Query(
                          description="a built-in import profile's name ("
                                      + ", ".join(f"`{n}`" for n in builtin_profile_names())
                                      + "): the upload is read with it, as by `a2annotate import --profile "
                                      "NAME`; your own profile (YAML) goes in the multipart field `profile`")]
                      = None) -> Any:
    # UploadUser's database session is closed before the body is read; the body streams to a
    # temporary file (never held in memory) that is handed to an import job run by a worker.
    if user.role not in ("admin", "reviewer"):
        raise HTTPException(403, "requires role admin or reviewer")
    from app.jobs import service as jobs

    engine = request.app.state.engine
    job = await start_import(request, user.id, lambda fields: ImportOptions(replace, strict, profile))
    location = f"/api/v1/jobs/{job.id}"
    wait = 0.0 if "respond-async" in request.headers.get("prefer", "").lower() else get_settings().import_wait_seconds
    if job.state not in FINAL and wait > 0:
        deadline = time.monotonic() + wait
        delay = 0.05
        while job.state not in FINAL and time.monotonic() < deadline:
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.5)
            if await request.is_disconnected():  # it asked to wait and left: the import is not wanted
                await run_in_threadpool(_cancel_job, engine, job.id)
                return JSONResponse({"detail": "the client disconnected; the import job was cancelled"},
                                    status_code=400)
            job = await run_in_threadpool(_read_job, engine, job.id)
    if job.state == "done":
        return JSONResponse(job.result, headers={"Content-Location": location})
    if job.state == "failed":
        return JSONResponse({"detail": f"the import failed: {job.error}", "job": location}, status_code=422,
                            headers={"Location": location})
    return JSONResponse({"job": jobs.payload(job)}, status_code=202, headers={"Location": location})


@dataclass
class ImportOptions:
    """How an upload is imported: `replace`, `strict`, and `profile` (a built-in profile's name)."""

    replace: bool = False
    strict: bool = False
    profile: str | None = None


async def start_import(request: Request, user_id: int | None,
                       options: Callable[[dict[str, bytes]], ImportOptions]):
    """The one import path of an upload (REST `POST /api/v1/imports` and the web page `/import`):
    stream the body (or its multipart field `file`) to the upload store within MAX_UPLOAD_BYTES
    and the upload timeouts, read the options from `options(fields)` (the other multipart fields;
    it may raise, e.g. the page's CSRF check, and then nothing is kept), check the profile (a bad
    key: 422 naming it, before anything is stored or queued), then hand the file to an `import`
    job and send it. Returns the job as it is after sending (done already with
    JOBS_BROKER=immediate). Raises HTTPException 400/408/413/422 as `receive_upload` does."""
    from app.core.scratch import job_dir
    from app.jobs import service as jobs

    engine = request.app.state.engine
    with await receive_upload(
            request, lambda ct: "request-body.jsonl" if "ndjson" in ct or "jsonl" in ct else "request-body.json",
            "empty body: send a JSON array, JSON Lines or a file") as up:
        opts = options(up.fields)
        # the profile is checked before anything is stored or queued: a bad key is named in a 422
        from app.ingest.profile import ProfileError, upload_profile

        try:
            prof = upload_profile(opts.profile, up.fields.get("profile"))
        except ProfileError as exc:
            raise HTTPException(422, str(exc)) from None
        job_id = jobs.new_id()
        folder = job_dir(job_id)
        path = await run_in_threadpool(up.hand_over, folder)
    params = {"path": str(path), "filename": up.filename, "replace": opts.replace, "strict": opts.strict,
              "folder": str(folder), "size": up.size}
    if prof is not None:
        params["profile"] = prof
    from app.jobs.queue import broker_url

    if broker_url() == "immediate":
        # the job runs here, in this process (JOBS_BROKER=immediate): bounded as an in-process import
        # is, by IMPORT_CPU_SECONDS and the client (stopped when it disconnects)
        return await run_bounded_import(request, _submit_import, engine, job_id, params, user_id)
    return await run_in_threadpool(_submit_import, engine, job_id, params, user_id)


def _submit_import(engine, job_id: str, params: dict[str, Any], user_id: int | None, budget: Any = None):
    """Create the import job and send it; `budget` (the in-process case) bounds it where it runs."""
    from app.ingest import budget as budget_mod
    from app.jobs import queue
    from app.jobs.models import Job

    with Session(engine) as session:
        session.add(Job(id=job_id, kind="import", params=params, user_id=user_id))
        session.commit()
    if budget is None:
        queue.send(job_id, engine=engine)
    else:
        with budget_mod.use(budget):
            queue.send(job_id, engine=engine)
    return _read_job(engine, job_id)


def _cancel_job(engine, job_id: str) -> None:
    from app.jobs.service import JobError, request_cancel

    with Session(engine) as session:
        try:
            request_cancel(session, job_id)
        except JobError:
            pass  # it ended meanwhile


def _read_job(engine, job_id: str):
    from app.jobs.models import Job

    with Session(engine) as session:
        job = session.get(Job, job_id)
        session.expunge(job)
        return job


async def run_bounded_import(request: Request, fn, *args):
    """`fn(*args, budget=...)` in a worker thread within an import budget (app.ingest.budget): the
    records limit, IMPORT_CPU_SECONDS of CPU, and cancelled as soon as the client disconnects (it
    went on for minutes after the client had gone)."""
    import anyio

    from app.ingest.budget import ImportBudget

    budget = ImportBudget(max_cpu_seconds=request.app.state.settings.import_cpu_seconds)

    async def watch() -> None:
        while True:
            if await request.is_disconnected():
                budget.cancel("the client disconnected")
                return
            await anyio.sleep(0.25)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            return await run_in_threadpool(fn, *args, budget=budget)
        finally:
            tg.cancel_scope.cancel()
