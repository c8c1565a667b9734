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
