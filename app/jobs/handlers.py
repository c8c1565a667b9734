"""What each kind of job does. A handler takes a `JobContext` and returns the job's result
(JSON-ready); `cleanup(params)` runs once the job is final (done, failed or cancelled).

Register a kind with `@handler("kind")`; `create_job` refuses kinds not registered here.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.jobs.service import JobContext


@dataclass
class Handler:
    run: Callable[[JobContext], Any]
    cleanup: Callable[[dict[str, Any]], None] | None = None
    description: str = ""


HANDLERS: dict[str, Handler] = {}


def handler(kind: str, *, cleanup: Callable[[dict[str, Any]], None] | None = None,
            description: str = "") -> Callable[[Callable[[JobContext], Any]], Callable[[JobContext], Any]]:
    def register(fn: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
        HANDLERS[kind] = Handler(fn, cleanup, description or (fn.__doc__ or "").strip().splitlines()[0])
        return fn
    return register


def _remove_folder(params: dict[str, Any]) -> None:
    folder = params.get("folder")
    if folder:
        shutil.rmtree(Path(folder), ignore_errors=True)


def _clear_folder(folder: str) -> None:
    """Empty a job's folder before an attempt writes into it, so that a retry after a worker died
    (kill -9 mid-export) starts from nothing and writes the same file a first attempt would."""
    d = Path(folder)
    if d.is_dir():
        for child in d.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    d.mkdir(parents=True, exist_ok=True)


@handler("import", cleanup=_remove_folder, description="Import an uploaded file or zip (POST /api/v1/imports).")
def run_import(ctx: JobContext) -> dict[str, Any]:
    """Import an uploaded file or zip: the summary `{imported, unchanged, replaced, rejected, errors, ...}`."""
    from app.ingest.loader import import_upload

    p = ctx.params
    summary = import_upload(ctx.engine, p["path"], p["filename"], bool(p.get("replace")), bool(p.get("strict")),
                            job=ctx, profile=p.get("profile"))
    return summary.to_dict()


@handler("import_labels", cleanup=_remove_folder,
         description="Import an uploaded label file (POST /api/v1/annotations/import).")
def run_import_labels(ctx: JobContext) -> dict[str, Any]:
    """Import an uploaded label file (CSV or JSON Lines) in one transaction: the summary
    `{imported, replaced, rejected, errors}`; stopped half way, nothing is stored, and a re-run
    replaces the same annotations (idempotent)."""
    from app.annotations.views import import_labels_file

    p = ctx.params
    ctx.progress(0, 1)
    out = import_labels_file(ctx.engine, p["path"], p["filename"], p.get("content_type") or "")
    ctx.progress(1, 1)
    return out


@handler("judge", description="Run a planned LLM judge run (POST /api/v1/judges/{name}/runs, the judges page).")
def run_judge(ctx: JobContext) -> dict[str, Any]:
    """Run a planned LLM judge run: its progress (runs done, errors, calls, tokens, cost)."""
    import threading

    from app.jobs.service import BudgetExceeded, JobCancelled
    from app.judges.service import execute

    cancel = threading.Event()
    stopped: list[Exception] = []

    def progress(prog: Any) -> None:
        ctx.reported = (prog.done + prog.error, prog.total)
        try:
            ctx.check()
        except (JobCancelled, BudgetExceeded) as exc:  # the runner stops at its next step
            stopped.append(exc)
            cancel.set()

    result = execute(ctx.engine, int(ctx.params["judge_run_id"]), progress=progress, cancel_event=cancel)
    if stopped:
        raise stopped[0]
    return result.to_dict()


@handler("result", description="Compute an agreement or report result and store it for every process.")
def run_result(ctx: JobContext) -> dict[str, Any]:
    """Compute a stored result (agreement, reports; app.results): `{kind, key, data_version, computed_at, ...}`.
    Progress counts the bootstrap replicates drawn (total unknown: one bootstrap per coefficient and
    mode); each chunk of replicates is a cancel point (`app.core.checkpoint`)."""
    from app.results.service import compute_and_store

    ctx.progress(0, None)
    ctx.tick_progress = True
    out = compute_and_store(ctx.engine, ctx.params["kind"], ctx.params["params"])
    ctx.tick_progress = False
    ctx.progress(ctx.ticks or 1, ctx.ticks or 1)
    return out


@handler("export_hf", description="Build the Hugging Face datasets zip (GET /api/v1/exports/hf.zip).")
def run_export_hf(ctx: JobContext) -> dict[str, Any]:
    """Build the Hugging Face datasets zip into the job's folder: `{file, filename, media_type, size}`,
    downloaded from GET /api/v1/jobs/{id}/file."""
    from app.exports.hf import hf_zip
    from app.exports.service import ExportOptions

    p = ctx.params
    _clear_folder(p["folder"])  # a worker killed during an earlier attempt may have left half a folder
    opts = ExportOptions(threshold=p["threshold"], strip_demo_truth=bool(p["strip_demo_truth"]))
    path = hf_zip(ctx.engine, opts, work_dir=p["folder"], progress=ctx.progress)
    ctx.progress(3, 3)
    return {"file": str(path), "filename": "a2annotate-hf.zip", "media_type": "application/zip",
            "size": path.stat().st_size}


@handler("export_mad", description="Write the MAD-shaped JSON of the MAST-labelled runs (GET /api/v1/exports/mad.json).")
def run_export_mad(ctx: JobContext) -> dict[str, Any]:
    """Write the MAD JSON into the job's folder: `{file, filename, media_type, size}`; progress counts records."""
    from app.exports.mad import FILE_NAME, mad_json_stream

    p = ctx.params
    _clear_folder(p["folder"])
    path = Path(p["folder"]) / FILE_NAME
    chunks = 0
    with open(path, "wb") as out:
        for chunk in mad_json_stream(ctx.engine, annotator=p["annotator"], taxonomy=p.get("taxonomy")):
            out.write(chunk.encode() if isinstance(chunk, str) else chunk)
            chunks += 1
            ctx.progress(chunks, None)
    return {"file": str(path), "filename": FILE_NAME, "media_type": "application/json",
            "size": path.stat().st_size}


@handler("detect", description="Run the detectors on stored runs (POST /api/v1/detectors/run).")
def run_detect(ctx: JobContext) -> dict[str, Any]:
    """Run the detectors: the summary `{runs, labels, flagged_runs, errors, problems}`. Committed every
    200 runs; stopped half way, a run's detector labels are either all replaced or untouched, and a
    re-run replaces them again (idempotent)."""
    from sqlalchemy import func, select
    from sqlmodel import Session

    from app.detectors import service as det
    from app.runs.models import Run

    p = ctx.params
    with Session(ctx.engine) as s:
        run_ids = p.get("run_ids")
        scope = None
        if p.get("study") is not None:  # a study's runs only (its lead may run detectors there)
            from app.studies.models import Study
            from app.studies.service import study_run_ids

            scope = study_run_ids(s, s.get(Study, int(p["study"])))
        count = select(func.count()).select_from(Run)
        if scope is not None:
            count = count.where(Run.id.in_(scope))
        total = len(run_ids) if run_ids is not None else s.execute(count).scalar()
        ctx.progress(0, total)
        summary = det.detect_all(s, only=p.get("only"), run_ids=run_ids, scope=scope,
                                 progress=lambda sm: ctx.progress(sm.runs + len({e["run_id"] for e in sm.errors
                                                                                 if e["detector"] == "*"}), total))
    return summary.to_dict()
