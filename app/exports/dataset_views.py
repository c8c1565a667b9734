"""REST routes of the dataset-shaped exports: a Hugging Face datasets folder (zip) and MAD JSON.

Both hold every annotator's labels, so under blind mode an annotator gets 403 (reviewers and
admins always; annotators once an admin reveals labels). Registered before the one-table route
(`/api/v1/exports/{table}.{fmt}`), which would otherwise take these paths.
"""
from __future__ import annotations

import shutil
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse
from sqlmodel import Session
from starlette.background import BackgroundTask

from app.annotations.http import JsonErrorRoute
from app.api.deps import ApiUser, SessionDep
from app.auth.models import User
from app.core.config import get_settings

router = APIRouter(prefix="/api/v1/exports", tags=["exports"], route_class=JsonErrorRoute)

_BLIND = ("blind mode: this export holds every annotator's labels; it is open to reviewers and admins, and to "
          "annotators once an admin reveals labels")


@router.get(
    "/hf.zip", summary="Hugging Face datasets folder (zip): Parquet shards and a dataset card",
    description=(
        "A zip of the folder `a2annotate export --format hf` writes: `data/<table>/train-00000-of-00001.parquet` "
        "for `runs`, `agents`, `principals`, `events`, `annotations`, `gold_labels` (and `checks` where the "
        "database has that table), and `README.md`, a dataset card whose YAML header lists every config and "
        "its features (every column and type), then the schema, the taxonomy versions and the label "
        "provenance (human, judge, adjudicated). Loads offline with `datasets.load_dataset(\"parquet\", "
        "data_dir=...)` or pandas. The demo corpus's seeded truth goes to admins only. 403 for annotators "
        "under blind mode. The zip is built by a background job (kind `export_hf`, with progress): the answer "
        "is the file when the job ends within EXPORT_WAIT_SECONDS; otherwise, or with `Prefer: respond-async`, "
        "202 with `Location` of the job, whose file is then `GET /api/v1/jobs/{id}/file`."),
    response_class=FileResponse,
    responses={200: {"description": "the zip (header `Content-Location` names its job)",
                     "content": {"application/zip": {}}},
               202: {"description": "the export job is queued or running: `{job}`, `Location: /api/v1/jobs/{id}`; "
                                    "download from `GET /api/v1/jobs/{id}/file` once it is done"},
               403: {"description": "blind mode"},
               422: {"description": "the export job failed or was cancelled within the wait"}},
)
def export_hf_zip(request: Request, session: SessionDep, user: ApiUser) -> Any:
    from app.annotations.blind import labels_visible_to

    if not labels_visible_to(session, user):
        raise HTTPException(403, _BLIND)
    return _file_job(request, session, user, "export_hf", {
        "threshold": request.app.state.settings.success_threshold, "strip_demo_truth": user.role != "admin"},
        "a2annotate-hf.zip", "application/zip")


def _file_job(request: Request, session: Session, user: User, kind: str, params: dict[str, Any], filename: str,
              media_type: str) -> Any:
    """Run the export job ``kind`` and answer with its file when it ends within
    EXPORT_WAIT_SECONDS (removed once sent), else 202 with the job (`Prefer: respond-async`: always)."""
    from app.core.scratch import job_dir
    from app.jobs import service as jobs
    from app.jobs.models import Job
    from app.jobs.queue import send

    engine = request.app.state.engine
    job_id = jobs.new_id()
    folder = job_dir(job_id)
    session.add(Job(id=job_id, kind=kind, params={**params, "folder": str(folder)}, user_id=user.id))
    session.commit()
    send(job_id, engine=engine)
    respond_async = "respond-async" in request.headers.get("prefer", "").lower()
    job = jobs.wait_for(engine, job_id, 0.0 if respond_async else get_settings().export_wait_seconds)
    location = f"/api/v1/jobs/{job_id}"
    if respond_async:
        return JSONResponse({"job": jobs.payload(job)}, status_code=202, headers={"Location": location})
    if job.state == "done":  # within the wait: the file itself, as before the job system
        return FileResponse(job.result["file"], media_type=media_type, filename=filename,
                            headers={"Content-Location": location},
                            background=BackgroundTask(shutil.rmtree, folder, True))
    if job.state in ("failed", "cancelled"):
        return JSONResponse({"detail": f"the export {job.state}: {job.error}", "job": location}, status_code=422,
                            headers={"Location": location})
    return JSONResponse({"job": jobs.payload(job)}, status_code=202, headers={"Location": location})


@router.get(
    "/mad.json", summary="MAD-compatible JSON of the MAST-labelled runs (MAD full-file shape)",
    description=(
        "A JSON array in the shape of MAST's `MAD_full_dataset.json`: `{mas_name, llm_name, benchmark_name, "
        "trace_id, trace: {key, index, trajectory}, mast_annotation}` per run labelled under MAST by "
        "`annotator` (default `judge:mast-llm`) or imported from a MAD full file; `mast_annotation` is 1 for "
        "each marked mode, 0 for the others, null where the annotator made no annotation. Runs imported "
        "from MAD keep their fields and trajectory text, so the file imports back to the same runs and "
        "labels (`POST /api/v1/imports`). 403 for annotators under blind mode. Written by a background job (kind "
        "`export_mad`): the answer is the file when the job ends within EXPORT_WAIT_SECONDS; otherwise, or with "
        "`Prefer: respond-async`, 202 with `Location` of the job, whose file is then `GET /api/v1/jobs/{id}/file`."),
    response_class=FileResponse,
    responses={200: {"description": "the JSON array (header `Content-Location` names its job)",
                     "content": {"application/json": {}}},
               202: {"description": "the export job is queued or running: `{job}`, `Location: /api/v1/jobs/{id}`; "
                                    "download from `GET /api/v1/jobs/{id}/file` once it is done"},
               403: {"description": "blind mode"},
               422: {"description": "unknown taxonomy, or the export job failed or was cancelled within the wait"}},
)
def export_mad_json(
    request: Request, session: SessionDep, user: ApiUser,
    annotator: Annotated[str, Query(description="Whose labels fill `mast_annotation`.")] = "judge:mast-llm",
    taxonomy: Annotated[str | None, Query(description="MAST taxonomy version (`mast`, `mast@1`); default latest mast.")] = None,
) -> Any:
    from app.annotations.blind import labels_visible_to
    from app.exports.mad import FILE_NAME
    from app.taxonomies.service import resolve

    if not labels_visible_to(session, user):
        raise HTTPException(403, _BLIND)
    if resolve(session, taxonomy or "mast") is None:
        raise HTTPException(422, f"taxonomy: unknown taxonomy {taxonomy!r}")
    return _file_job(request, session, user, "export_mad", {"annotator": annotator, "taxonomy": taxonomy},
                     FILE_NAME, "application/json")


@router.get(
    "/labels_wide.{fmt}", summary="Labels, wide: one row per run, a column per annotator and mode",
    description=(
        "One row per run with a submitted annotation under `taxonomy` (default latest a2-failures): `run_id`, "
        "`family`, `title`, `n_annotators`, then `<annotator>.<mode>` for every annotator (sorted; judges and "
        "dataset sources included by their names) and every mode of the taxonomy: 1 labelled, 0 submitted without "
        "that mode, empty where the annotator submitted no annotation of the run. `batch` keeps the runs "
        "assigned in that batch. CSV (formula-leading text neutralised) or Parquet. 403 for annotators under "
        "blind mode."),
    responses={200: {"description": "the file", "content": {"text/csv": {}, "application/vnd.apache.parquet": {}}},
               403: {"description": "blind mode"}, 422: {"description": "unknown taxonomy or format"}},
)
def export_labels_wide(
    request: Request, session: SessionDep, user: ApiUser, fmt: str,
    taxonomy: Annotated[str | None, Query(description="Taxonomy version; default latest a2-failures.")] = None,
    batch: Annotated[str | None, Query(description="Only the runs assigned in this batch.")] = None,
):
    import csv
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from fastapi.responses import Response

    from app.annotations.blind import labels_visible_to
    from app.exports.arrow import neutralise_formula
    from app.exports.service import batch_filter
    from app.exports.wide import labels_wide
    from app.taxonomies.service import resolve

    if fmt not in ("csv", "parquet"):
        raise HTTPException(422, f"fmt: labels_wide comes as csv or parquet, not {fmt!r}")
    if not labels_visible_to(session, user):
        raise HTTPException(403, _BLIND)
    tax = resolve(session, taxonomy or None)
    if tax is None:
        raise HTTPException(422, f"taxonomy: unknown taxonomy {taxonomy!r}")
    cols, rows = labels_wide(session, tax, run_filter=batch_filter(batch) if batch else None)
    name = f"labels_wide.{fmt}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r[c] is None else (neutralise_formula(r[c]) if isinstance(r[c], str) else r[c])
                        for c in cols])
        return Response(buf.getvalue(), media_type="text/csv", headers=headers)
    types = {"run_id": pa.string(), "family": pa.string(), "title": pa.string(), "n_annotators": pa.int32()}
    schema = pa.schema([(c, types.get(c, pa.int8())) for c in cols])
    table = pa.Table.from_pylist(rows, schema=schema)
    out = pa.BufferOutputStream()
    pq.write_table(table, out)
    return Response(out.getvalue().to_pybytes(), media_type="application/vnd.apache.parquet", headers=headers)
