"""REST routes of the dataset-shaped exports: a Hugging Face datasets folder (zip) and MAD JSON.

Both hold every annotator's labels, so under blind mode an annotator gets 403 (reviewers and
admins always; annotators once an admin reveals labels). Registered before the one-table route
(`/api/v1/exports/{table}.{fmt}`), which would otherwise take these paths.
"""
from __future__ import annotations

import shutil
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from app.annotations.http import JsonErrorRoute
from app.api.deps import ApiUser, SessionDep

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
        "under blind mode."),
    response_class=FileResponse,
    responses={200: {"description": "the zip", "content": {"application/zip": {}}},
               403: {"description": "blind mode"}},
)
async def export_hf_zip(request: Request, session: SessionDep, user: ApiUser) -> FileResponse:
    from app.annotations.blind import labels_visible_to
    from app.exports.hf import hf_zip
    from app.exports.service import ExportOptions

    if not labels_visible_to(session, user):
        raise HTTPException(403, _BLIND)
    opts = ExportOptions(threshold=request.app.state.settings.success_threshold,
                         strip_demo_truth=user.role != "admin")
    path = await run_in_threadpool(hf_zip, request.app.state.engine, opts)
    return FileResponse(path, media_type="application/zip", filename="a2annotate-hf.zip",
                        background=BackgroundTask(shutil.rmtree, path.parent, True))


@router.get(
    "/mad.json", summary="MAD-compatible JSON of the MAST-labelled runs (MAD full-file shape)",
    description=(
        "A JSON array in the shape of MAST's `MAD_full_dataset.json`: `{mas_name, llm_name, benchmark_name, "
        "trace_id, trace: {key, index, trajectory}, mast_annotation}` per run labelled under MAST by "
        "`annotator` (default `judge:mast-llm`) or imported from a MAD full file; `mast_annotation` is 1 for "
        "each marked mode, 0 for the others, null where the annotator made no annotation. Runs imported "
        "from MAD keep their fields and trajectory text, so the file imports back to the same runs and "
        "labels (`POST /api/v1/imports`). 403 for annotators under blind mode."),
    response_class=StreamingResponse,
    responses={200: {"description": "the JSON array, streamed", "content": {"application/json": {}}},
               403: {"description": "blind mode"}, 422: {"description": "unknown taxonomy"}},
)
def export_mad_json(
    request: Request, session: SessionDep, user: ApiUser,
    annotator: Annotated[str, Query(description="Whose labels fill `mast_annotation`.")] = "judge:mast-llm",
    taxonomy: Annotated[str | None, Query(description="MAST taxonomy version (`mast`, `mast@1`); default latest mast.")] = None,
) -> StreamingResponse:
    from app.annotations.blind import labels_visible_to
    from app.exports.mad import FILE_NAME, mad_json_stream
    from app.taxonomies.service import resolve

    if not labels_visible_to(session, user):
        raise HTTPException(403, _BLIND)
    if resolve(session, taxonomy or "mast") is None:
        raise HTTPException(422, f"taxonomy: unknown taxonomy {taxonomy!r}")
    return StreamingResponse(mad_json_stream(request.app.state.engine, annotator=annotator, taxonomy=taxonomy),
                             media_type="application/json",
                             headers={"Content-Disposition": f'attachment; filename="{FILE_NAME}"'})
