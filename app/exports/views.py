"""REST route of the exports: one table, streamed as CSV, Parquet or JSON Lines."""
from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import StreamingResponse

from app.annotations.http import JsonErrorRoute
from app.api.deps import ApiUser, SessionDep, StudyQuery, study_scope
from app.exports import service
from app.exports.schema import TABLES

router = APIRouter(prefix="/api/v1/exports", tags=["exports"], route_class=JsonErrorRoute)

_TABLE_LIST = ", ".join(f"`{name}` ({'/'.join(spec.formats)})" for name, spec in TABLES.items())


@router.get(
    "/{table}.{fmt}",
    summary="Export one table as CSV, Parquet or JSON Lines (streamed)",
    description=(
        "Streams the table as a file download (`Content-Disposition: attachment; filename=<table>.<fmt>`). "
        "Rows are read in chunks of 5,000 and sent as they are written; Parquet goes out one row group per "
        f"chunk. Tables: {_TABLE_LIST}. Column types and meanings: docs/export-schema.md. Nested fields are "
        "JSON text in CSV, native lists (ids, seqs) or JSON text (objects) in Parquet, native JSON in JSON "
        "Lines. Blind mode: an annotator gets only their own rows of `annotations` / "
        "`annotations_canonical`, 403 for `audits`, `gold_labels` and the label-based reports, and "
        "`runs_canonical` without the runs' audits, and every table's `metadata` without the fields that hold labels, "
        "answers or judgements (`audited_by`, dataset answers, `hidden`, `hidden_keys`), until an admin reveals "
        "labels (as `GET /api/v1/runs/{id}`); "
        "the demo corpus's seeded truth (`metadata.demo_truth`) goes to admins only. `source` and `taxonomy` "
        "apply to the report tables."),
    response_class=StreamingResponse,
    responses={
        200: {"description": "the file, streamed",
              "content": {"text/csv": {}, "application/vnd.apache.parquet": {}, "application/x-ndjson": {}}},
        403: {"description": "blind mode"}, 404: {"description": "unknown table"},
        422: {"description": "format not available for this table, or a bad parameter"},
    },
)
def export_table(
    request: Request, session: SessionDep, user: ApiUser,
    table: Annotated[str, Path(description="Table name, e.g. `runs`, `annotations`, `outcomes_by_model`.")],
    fmt: Annotated[Literal["csv", "parquet", "jsonl"], Path(description="File format.")],
    source: Annotated[str, Query(description="Report tables: `auto`, `gold`, `majority` or `annotator:<name>`.")] = "auto",
    taxonomy: Annotated[str | None, Query(description="Report tables: taxonomy version; default latest a2-failures.")] = None,
    study: StudyQuery = None,
    batch: Annotated[str | None, Query(description="Only the runs assigned in this batch (run-scoped tables; "
                                                    "not `scenarios` or the report tables).")] = None,
) -> StreamingResponse:
    from app.annotations.blind import (
        demo_truth_visible_to,
        labels_visible_to,
        sight_of,
        visible_annotation_filter,
    )

    _, scope = study_scope(session, user, "export", study)
    spec = TABLES.get(table)
    if spec is None:
        raise HTTPException(404, f"unknown table {table!r} (tables: {', '.join(TABLES)})")
    try:
        service.check(table, fmt)
    except service.ExportError as exc:
        raise HTTPException(422, str(exc)) from None
    opts = service.ExportOptions(source=source, taxonomy=taxonomy,
                                 threshold=request.app.state.settings.success_threshold,
                                 strip_demo_truth=not demo_truth_visible_to(user),
                                 withhold_audits=not labels_visible_to(session, user),
                                 sight=sight_of(session, user), run_scope=scope,
                                 run_filter=service.batch_filter(batch) if batch else None)
    if spec.labels:
        if table in ("annotations", "annotations_canonical"):
            opts.annotation_filter = visible_annotation_filter(session, user)
        elif not labels_visible_to(session, user):
            raise HTTPException(403, "blind mode: this table aggregates every annotator's labels; it is open to "
                                     "reviewers and admins, and to annotators once an admin reveals labels")
    if spec.report:
        _check_report_params(session, opts)
    body = service.export_stream(request.app.state.engine, table, fmt, opts)
    name = service.file_name(table, fmt)
    return StreamingResponse(body, media_type=service.MEDIA_TYPES[fmt],
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _check_report_params(session, opts: service.ExportOptions) -> None:
    """Refuse a bad `source` / `taxonomy` before the stream starts (422), not halfway through."""
    from app.reports import service as reports

    try:
        reports.check_source(opts.source)
        reports.resolve_taxonomy(session, opts.taxonomy)
    except reports.ReportError as exc:
        raise HTTPException(422, str(exc)) from None
