"""REST routes for runs and bulk import."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool

from app.annotations.http import JsonErrorRoute
from app.api.deps import MAX_PAGE, ApiUser, SessionDep
from app.api.uploads import UploadUser, receive_upload, upload_request_body
from app.core.config import get_settings
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
    run's `audits` (machine judges' labels) are withheld, and the demo corpus's seeded truth
    (`metadata.demo_truth`) is shown to admins only."""
    from app.annotations.blind import demo_truth_visible_to, labels_visible_to

    run = service.get_run(session, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id!r}")
    canon = service.to_canonical(session, run)
    if not demo_truth_visible_to(user):
        canon["metadata"].pop("demo_truth", None)
    if not labels_visible_to(session, user):
        canon["audits"] = []
        canon.pop("checks", None)
    return canon


@router.post(
    "/imports",
    summary="Bulk import runs",
    description=(
        "Body: a JSON array of canonical runs (`application/json`), JSON Lines (`application/x-ndjson`), "
        "or a multipart upload with field `file` (a JSON/JSONL file, an A2A wire log, or a zip of files or "
        "per-run directories). The field's datasets are recognised by their records' keys: MAST's MAD files "
        "(full or human-labelled) and Who&When records (one object, or an array); OTLP/JSON trace files by "
        "`resourceSpans`. Each run is stored atomically; a rejected run leaves nothing behind. "
        "Query `replace=true` overwrites runs whose content changed. Directory trees (in a zip) are read "
        "leniently: what does not map is kept and listed in `warnings`; `strict=true` rejects every run "
        "with a warning instead (each problem one entry of `errors`). Answers "
        "`{imported, unchanged, replaced, rejected, errors:[{location, message}], unused_files, "
        "warnings:[{location, message, field?, run_id?}], unknown_modes:{name: count}}`; a malformed "
        "run is one entry of `errors` (and counted in `rejected`), not an HTTP error."),
    openapi_extra={"requestBody": upload_request_body(
        {"application/json": "a JSON array of canonical runs (or one run object)",
         "application/x-ndjson": "JSON Lines: one canonical run a line"},
        "Runs to import: a JSON array, JSON Lines, or a multipart upload (field `file`: JSON, JSON Lines, "
        "an A2A wire log or a zip).")},
    responses={400: {"description": "the client disconnected before the body was complete"},
               403: {"description": "requires role admin or reviewer"},
               408: {"description": "the body stalled (UPLOAD_IDLE_TIMEOUT) or took too long (UPLOAD_TOTAL_TIMEOUT)"},
               413: {"description": "upload larger than MAX_UPLOAD_BYTES (refused as soon as it is passed)"},
               422: {"description": "empty body, or a multipart upload without the field `file`"}},
)
async def import_runs(request: Request, user: UploadUser, replace: bool = False,
                      strict: bool = False) -> dict[str, Any]:
    # UploadUser's database session is closed before the body is read; the body streams to a
    # temporary file (never held in memory) and the import runs in a worker thread.
    if user.role not in ("admin", "reviewer"):
        raise HTTPException(403, "requires role admin or reviewer")
    from app.ingest.loader import import_upload

    with await receive_upload(
            request, lambda ct: "request-body.jsonl" if "ndjson" in ct or "jsonl" in ct else "request-body.json",
            "empty body: send a JSON array, JSON Lines or a file") as up:
        summary = await run_bounded_import(request, import_upload, request.app.state.engine, str(up.path),
                                           up.filename, replace, strict)
    return summary.to_dict()


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
