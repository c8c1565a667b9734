"""REST routes: annotations (create/list/mine/import), the caller's queue, assignments, progress.

Thin: each route parses input, calls a service in app.annotations, and maps its errors to
HTTP (AnnotationError -> 422, NotFoundError -> 404, LockedError -> 409).
"""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlmodel import Session, select

from app.annotations import service
from app.annotations.assignments import create_assignments, next_in_queue, user_queue
from app.annotations.http import JsonErrorRoute, api_csrf
from app.annotations.schemas import (
    AnnotationIn,
    AnnotationOut,
    AnnotationPage,
    AssignmentsIn,
    AssignmentsOut,
    LabelImportOut,
    Queue,
    StaleAnnotation,
)
from app.api.deps import MAX_PAGE, ApiUser, SessionDep
from app.api.uploads import UploadReviewer, receive_upload, upload_request_body
from app.core.config import get_settings
from app.core.db import begin_write, write_session
from app.runs.service import RunFilter
from app.taxonomies.models import Taxonomy

router = APIRouter(prefix="/api/v1", tags=["annotations"], route_class=JsonErrorRoute,
                   dependencies=[Depends(api_csrf)])

TaxonomyQuery = Annotated[str | None, Query(description="`key@version` or numeric id for one version; "
                                                       "a bare key for all its versions")]


def http_error(exc: Exception) -> HTTPException:
    """Returns the HTTPException for a service error (422 bad input, 404 unknown, 409 locked)."""
    if isinstance(exc, service.NotFoundError):
        return HTTPException(404, str(exc))
    if isinstance(exc, service.LockedError):
        return HTTPException(409, str(exc))
    return HTTPException(422, str(exc))


SERVICE_ERRORS = (service.AnnotationError, service.NotFoundError, service.LockedError)


@router.post(
    "/annotations", summary="Create or update the caller's annotation of a run", response_model=AnnotationOut,
    description=(
        "Saves the caller's annotation of `run_id` under one taxonomy version, replacing its labels. "
        "Each label is checked: the mode exists in that version (aliases resolved), `agent` is an agent "
        "of the run, `principals` are principals of the run, every `evidence` seq is an event of the "
        "run, `confidence` is in [0, 1]. A draft may leave `agent`/`evidence` empty; `status: submitted` "
        "needs them, and needs labels or `no_failure: true` (never both). Sending `draft` for a "
        "submitted annotation withdraws the submission. `time_ms` is added to the stored total. "
        "422 names the bad field (`labels[1].agent: 'x' is not an agent of run r1`), 404 for an unknown "
        "run, 409 once the run is adjudicated under that taxonomy version. "
        "Optimistic concurrency: send the `version` you last read (0 when you read none); if the stored "
        "annotation has changed since, the answer is 409 `{detail, current}` with the stored annotation and "
        "nothing is written (reload, or resend with `current.version` to overwrite). The change is committed "
        "before the answer is sent."),
    responses={404: {"description": "unknown run"},
               409: {"description": "run adjudicated (`detail` only), or changed elsewhere: `current` holds "
                                    "the stored annotation", "model": StaleAnnotation},
               422: {"description": "bad input; `detail` names the field"}},
)
def save(body: AnnotationIn, session: SessionDep, user: ApiUser) -> Any:
    begin_write(session)
    try:
        tax = service.resolve_taxonomy(session, body.taxonomy)
        run = service.get_run_or_error(session, body.run_id, ids_only=True)
        out = service.save_annotation_to_api(session, user, run, tax, body.labels, no_failure=body.no_failure,
                                             status=body.status, time_ms=body.time_ms, note=body.note,
                                             version=body.version)
        # committed here, in this thread: SQLite's write lock is not held while the request
        # goes back to the event loop and on to the session dependency's exit (a commit that
        # fails still answers 503 there)
        session.commit()
        return out
    except service.StaleVersionError as exc:
        current = service.annotations_to_api(session, [exc.current])[0] if exc.current is not None else None
        session.rollback()
        return JSONResponse({"detail": str(exc), "current": current}, status_code=409)
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None


@router.get(
    "/annotations", summary="List annotations (blind mode respected)", response_model=AnnotationPage,
    description=(
        "Annotations of humans and `judge:*` annotators, ordered by run. Blind mode: an annotator sees "
        "only their own until an admin reveals labels (asking for another annotator is then 403); "
        "reviewers and admins see all."),
)
def list_annotations(
    session: SessionDep, user: ApiUser, run_id: str | None = None,
    annotator: Annotated[str | None, Query(description="user name, e.g. `alice` or `judge:judge-l2`")] = None,
    taxonomy: TaxonomyQuery = None,
    status: Annotated[str | None, Query(pattern="^(draft|submitted)$")] = None,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    page_size: Annotated[int, Query(ge=1, description="at most MAX_PAGE_SIZE (default 500)")] = 100,
) -> dict[str, Any]:
    from app.annotations.blind import labels_visible_to

    if annotator and annotator != user.username and not labels_visible_to(session, user):
        raise HTTPException(403, "blind mode: annotators see only their own annotations")
    page_size = min(page_size, get_settings().max_page_size)
    try:
        total, rows = service.list_annotations(session, user, run_id=run_id, annotator=annotator,
                                               taxonomy=taxonomy, status=status, page=page, page_size=page_size)
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    return {"total": total, "page": page, "page_size": page_size,
            "items": service.annotations_to_api(session, rows)}


@router.get(
    "/annotations/mine", summary="The caller's own annotation of a run", response_model=AnnotationOut,
    description="The caller's annotation (draft or submitted) of `run_id` under `taxonomy` (default latest "
                "a2-failures); 404 when the run is unknown or the caller has none.",
    responses={404: {"description": "no such run, or no annotation yet"}},
)
def mine(session: SessionDep, user: ApiUser, run_id: str,
         taxonomy: Annotated[str | None, Query(description="`key`, `key@version` or id; default a2-failures")] = None
         ) -> dict[str, Any]:
    try:
        tax = service.resolve_taxonomy(session, taxonomy)
        run = service.get_run_or_error(session, run_id)
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    ann = service.find_annotation(session, user, run, tax)
    if ann is None:
        raise HTTPException(404, f"no annotation of run {run_id} by {user.username} under {service.tax_ref(tax)}")
    return service.annotations_to_api(session, [ann])[0]


def import_labels_file(engine, path, filename: str, content_type: str) -> dict[str, Any]:
    """Import the label file at ``path`` in one write transaction (the `import_labels` job)."""
    from pathlib import Path

    from app.annotations.labels_import import import_labels

    data = Path(path).read_bytes()
    with write_session(engine) as session:  # SQLite: BEGIN IMMEDIATE (waits its turn, no stale-snapshot failure)
        summary = import_labels(session, data, filename, content_type)
        session.commit()
    return summary.to_dict()


def _submit_label_import(engine, job_id: str, params: dict[str, Any], user_id: int | None):
    from app.jobs import queue
    from app.jobs.models import Job

    with Session(engine) as session:
        session.add(Job(id=job_id, kind="import_labels", params=params, user_id=user_id))
        session.commit()
    queue.send(job_id, engine=engine)
    with Session(engine) as session:
        job = session.get(Job, job_id)
        session.expunge(job)
        return job


@router.post(
    "/annotations/import", summary="Bulk import labels (CSV or JSON Lines)", response_model=LabelImportOut,
    description=(
        "Reviewer or admin. Body: CSV (`text/csv`), JSON Lines (`application/x-ndjson`), or a multipart "
        "upload with field `file`. Columns: annotator, run_id, mode, agent, evidence (`3;5` or `[3,5]`), "
        "taxonomy (key or key@version; default a2-failures latest), optional note, confidence, principals. "
        "Rows group into one submitted annotation per (annotator, run, taxonomy version), origin `import`; "
        "an empty or `none` mode marks 'no failure found'; names that are not human users become "
        "`judge:*` annotators. Each group is stored whole or rejected with errors naming file, line and "
        "field; re-importing replaces the annotator's imported annotation (idempotent). Answers "
        "`{imported, replaced, rejected, errors:[{location, message}]}`. The body is stored and imported by "
        "a background job (kind `import_labels`): the answer is the summary when the job ends within "
        "IMPORT_WAIT_SECONDS (header `Content-Location` names the job); otherwise, or with "
        "`Prefer: respond-async`, 202 with `Location` of the job, whose `result` is then the summary."),
    openapi_extra={"requestBody": upload_request_body(
        {"text/csv": "CSV with a header row naming the columns",
         "application/x-ndjson": "JSON Lines: one label a line"},
        "Labels to import: CSV, JSON Lines, or a multipart upload (field `file`).")},
    responses={202: {"description": "the import job is queued or running: `{job}`, `Location: /api/v1/jobs/{id}`"},
               400: {"description": "the client disconnected before the body was complete"},
               403: {"description": "requires role admin or reviewer"},
               408: {"description": "the body stalled (UPLOAD_IDLE_TIMEOUT) or took too long (UPLOAD_TOTAL_TIMEOUT)"},
               413: {"description": "upload larger than MAX_UPLOAD_BYTES (refused as soon as it is passed)"},
               422: {"description": "empty body, or a multipart upload without the field `file`"}},
)
async def import_labels(request: Request, user: UploadReviewer) -> Any:
    # no database connection is held while the body streams to a temporary file, handed to a job
    import asyncio
    import time

    from app.core.scratch import job_dir
    from app.jobs import service as jobs
    from app.jobs.models import FINAL

    engine = request.app.state.engine
    with await receive_upload(
            request, lambda ct: "request-body.csv" if "csv" in ct else ("request-body.jsonl" if "json" in ct else "request-body"),
            "body: empty; send CSV, JSON Lines or a file") as up:
        job_id = jobs.new_id()
        folder = job_dir(job_id)
        path = await run_in_threadpool(up.hand_over, folder)
    params = {"path": str(path), "filename": up.filename, "content_type": up.content_type, "folder": str(folder)}
    job = await run_in_threadpool(_submit_label_import, engine, job_id, params, user.id)
    location = f"/api/v1/jobs/{job_id}"
    respond_async = "respond-async" in request.headers.get("prefer", "").lower()
    deadline, delay = time.monotonic() + (0.0 if respond_async else get_settings().import_wait_seconds), 0.05
    while job.state not in FINAL and time.monotonic() < deadline:
        await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 0.5)
        job = await run_in_threadpool(jobs.wait_for, engine, job_id, 0.0)
    if respond_async:
        return JSONResponse({"job": jobs.payload(job)}, status_code=202, headers={"Location": location})
    if job.state == "done":
        return JSONResponse(job.result, headers={"Content-Location": location})
    if job.state in ("failed", "cancelled"):
        return JSONResponse({"detail": f"the label import {job.state}: {job.error}", "job": location},
                            status_code=422, headers={"Location": location})
    return JSONResponse({"job": jobs.payload(job)}, status_code=202, headers={"Location": location})


@router.get(
    "/queue", summary="The caller's annotation queue", response_model=Queue, tags=["queue"],
    description="Runs assigned to the caller in queue order, each with its state (new, draft, submitted, "
                "skipped, flagged: see /api/v1/flags), and the counts assigned / drafts / submitted / remaining "
                "(assigned, not yet submitted) / set_aside (skipped or flagged, not submitted).",
)
def queue(session: SessionDep, user: ApiUser,
          taxonomy: Annotated[str | None, Query(description="one version (`key@version`); default all")] = None
          ) -> dict[str, Any]:
    try:
        tax = service.resolve_taxonomy(session, taxonomy) if taxonomy else None
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    return user_queue(session, user, tax)


@router.get(
    "/queue/next", summary="The next run to annotate", tags=["queue"],
    description="`{\"run_id\", \"taxonomy\": {id, key, version}, \"position\", \"status\"}` of the first "
                "assigned run (by queue position) the caller has not submitted, skipped or flagged; 404 "
                "`{\"detail\": \"queue empty\"}` when there is none.",
    responses={404: {"description": "queue empty"}},
)
def queue_next(session: SessionDep, user: ApiUser,
               taxonomy: Annotated[str | None, Query(description="one version; default all")] = None
               ) -> dict[str, Any]:
    try:
        tax = service.resolve_taxonomy(session, taxonomy) if taxonomy else None
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    item = next_in_queue(session, user, tax)
    if item is None:
        raise HTTPException(404, "queue empty")
    return {"run_id": item["run_id"], "taxonomy": item["taxonomy"], "position": item["position"],
            "status": item["status"]}


@router.post(
    "/assignments", summary="Assign a batch of runs to annotators, drawn by a sampling policy (admin or study lead)",
    response_model=AssignmentsOut, response_model_exclude_none=True, tags=["assignments"],
    description=(
        "An admin, or with `study` a lead of that study. Draws runs matching `filters` (within the study) by "
        "`policy` with a seeded RNG (`random`: a simple random sample of `sample_size`, all when null) and "
        "assigns each to up to `k` distinct annotators, balanced (loads differ by at most one); every "
        "annotator's new runs are appended to their queue in a random, reproducible order. Pairs already "
        "assigned are skipped; a run never gets more than k annotators in a study (held by the database); "
        "a run removed from an annotator by hand is not given back. Every assignment records the policy, "
        "the seed and the run's inclusion probability. `preview: true` answers what would be made and "
        "writes nothing. The same inputs on the same runs give the same assignment. 422 when k exceeds the "
        "number of annotators, a user is unknown or a policy parameter is bad."),
)
def assign(body: AssignmentsIn, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    from app.admin.study import default_batch_name, preview_assignments
    from app.annotations.policies import PolicyError
    from app.api.deps import study_scope

    st, _ = study_scope(session, user, "assign", body.study)
    begin_write(session)
    try:
        tax = service.resolve_taxonomy(session, body.taxonomy) if body.taxonomy or st is None else \
            session.get(Taxonomy, st.taxonomy_pk)
        options = {"policy": body.policy, "params": body.params, "study": st, "created_by": user}
        f = RunFilter(**body.filters.model_dump())
        if body.preview:
            return preview_assignments(session, f, body.sample_size, body.seed, body.annotators, body.k, tax,
                                       body.batch, **options)
        batch = body.batch or (default_batch_name() if st is not None else None)
        result = create_assignments(session, f, body.sample_size, body.seed, body.annotators, body.k, tax,
                                    batch=batch, **options)
    except (*SERVICE_ERRORS, PolicyError) as exc:
        raise http_error(exc) from None
    return result.to_dict()


@router.delete(
    "/assignments/batches/{batch}", summary="Undo a batch (admin or study lead)", tags=["assignments"],
    description=(
        "Removes the batch's assignments that nobody has started (started ones stay, so no work is lost) "
        "and answers `{removed, kept}`. With `study`: that study's batch, for its leads. Undoing is not a "
        "removal by hand: a later fill may draw those runs again."),
)
def undo_batch_api(batch: str, session: SessionDep, user: ApiUser, taxonomy: str | None = None,
                   study: str | None = None) -> dict[str, Any]:
    from app.admin.study import undo_batch
    from app.api.deps import study_scope

    st, _ = study_scope(session, user, "assign", study)
    begin_write(session)
    try:
        tax = service.resolve_taxonomy(session, taxonomy) if taxonomy or st is None else \
            session.get(Taxonomy, st.taxonomy_pk)
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    removed, kept = undo_batch(session, batch, tax.id, st)
    if not removed and not kept:
        raise HTTPException(404, f"no assignments in batch {batch!r}" + (f" of study {st.name!r}" if st else ""))
    return {"batch": batch, "removed": removed, "kept": kept}


@router.post(
    "/assignments/remove", summary="Take a run out of an annotator's queue for good (admin or study lead)",
    tags=["assignments"],
    description=(
        "Body `{run_id, annotator, study?, taxonomy?}`. Removes the assignment unless the annotator has started "
        "the run (422), and remembers the removal: no later fill (batch or queue rule) in that study gives "
        "the run back to that annotator. Answers `{removed}` (false when there was no assignment; the "
        "removal is remembered all the same)."),
)
def remove_api(body: dict[str, Any], session: SessionDep, user: ApiUser) -> dict[str, Any]:
    from app.annotations.assignments import remove_assignment
    from app.api.deps import study_scope
    from app.auth.models import User

    st, _ = study_scope(session, user, "assign", body.get("study"))
    begin_write(session)
    try:
        tax = service.resolve_taxonomy(session, body.get("taxonomy")) if body.get("taxonomy") or st is None else \
            session.get(Taxonomy, st.taxonomy_pk)
        run = service.get_run_or_error(session, str(body.get("run_id")), ids_only=True)
        target = session.exec(select(User).where(User.username == str(body.get("annotator")))).first()
        if target is None:
            raise service.AnnotationError("annotator", f"no user {body.get('annotator')!r}")
        removed = remove_assignment(session, run.id, target, tax, st, user)
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    return {"removed": removed}


@router.get(
    "/progress", summary="Annotation progress per annotator and per run (reviewer)", tags=["assignments"],
    description=(
        "Reviewer or admin. For one taxonomy version (default latest a2-failures): per annotator "
        "(humans and `judge:*`) assigned, drafts, submitted, remaining; per run its state "
        "(unassigned, in_progress, submitted = all assigned annotators submitted, adjudicated) with "
        "n_assigned / n_submitted; `runs.counts` covers every run, `runs.items` lists (one page of) the "
        "runs with any assignment, annotation or gold label."),
)
def get_progress(
    session: SessionDep, user: ApiUser, taxonomy: str | None = None,
    study: Annotated[str | None, Query(description="A study (name or id): its runs only; for its leads.")] = None,
    state: Annotated[str | None, Query(pattern="^(unassigned|in_progress|submitted|adjudicated)$")] = None,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1, page_size: Annotated[int, Query(ge=1)] = 100,
) -> dict[str, Any]:
    from app.annotations.progress import progress
    from app.api.deps import study_scope

    st, _ = study_scope(session, user, "progress", study)
    try:
        tax = service.resolve_taxonomy(session, taxonomy) if taxonomy or st is None else \
            session.get(Taxonomy, st.taxonomy_pk)
    except SERVICE_ERRORS as exc:
        raise http_error(exc) from None
    return progress(session, tax, page, min(page_size, get_settings().max_page_size), state, st)
