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


@handler("import", cleanup=_remove_folder, description="Import an uploaded file or zip (POST /api/v1/imports).")
def run_import(ctx: JobContext) -> dict[str, Any]:
    """Import an uploaded file or zip: the summary `{imported, unchanged, replaced, rejected, errors, ...}`."""
    from app.ingest.loader import import_upload

    p = ctx.params
    summary = import_upload(ctx.engine, p["path"], p["filename"], bool(p.get("replace")), bool(p.get("strict")),
                            job=ctx)
    return summary.to_dict()


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
