"""`a2annotate worker` (runs background jobs) and `a2annotate jobs list|show|cancel`."""
from __future__ import annotations

import json
import logging
import threading
import time

import click
from sqlmodel import Session

from app.cli.common import checked_engine, one_line_errors
from app.jobs.models import STATES


@click.command("worker")
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(1),
              help="Jobs run at once, each in a process of its own (about one per core).")
@one_line_errors
def worker(concurrency: int) -> None:
    """Run background jobs (imports over REST, exports, detector runs, ...) from the queue
    JOBS_BROKER names (default: a SQLite file beside the database). Any number of workers, on
    any machines that reach the database and the broker, share the work; a job whose worker
    died is started again by the next worker that looks (JOB_STALE_SECONDS). Stops on Ctrl-C /
    SIGTERM, letting running jobs finish within their budget."""
    from app.core.config import get_settings
    from app.jobs.queue import broker_url, get_huey
    from app.jobs.service import SWEEP_SECONDS, reap_stale, sweep_job_files, worker_engine

    if broker_url() == "immediate":
        raise click.UsageError("JOBS_BROKER=immediate runs jobs where they are enqueued: no worker is needed")
    checked_engine().dispose()  # the schema check; each job process opens its own engine
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    reaped = reap_stale(worker_engine())
    if reaped:
        click.echo(f"started again {len(reaped)} job(s) whose worker had stopped")
    every = max(1.0, get_settings().job_stale_seconds / 3)
    stop = threading.Event()

    def sweep() -> None:
        try:
            sweep_job_files(worker_engine())
        except Exception:  # noqa: BLE001 - logged; the next round tries again
            logging.getLogger("a2annotate.jobs").warning("sweeping job files failed", exc_info=True)

    # the first sweep here, before the thread starts: the consumer forks its job processes as it
    # starts, and a fork while another thread holds a lock (the engine's pool, logging) would
    # leave that lock held forever in the child
    sweep()

    def reaper() -> None:
        """Every third of JOB_STALE_SECONDS: restart jobs whose worker died; every SWEEP_SECONDS:
        remove job files past JOB_FILE_RETENTION_HOURS."""
        last_sweep = time.monotonic()
        while not stop.wait(every):
            try:
                reap_stale(worker_engine())
            except Exception:  # noqa: BLE001 - logged; the next round tries again
                logging.getLogger("a2annotate.jobs").warning("reaping stale jobs failed", exc_info=True)
            if time.monotonic() - last_sweep >= SWEEP_SECONDS:
                sweep()
                last_sweep = time.monotonic()

    threading.Thread(target=reaper, name="job-reaper", daemon=True).start()
    click.echo(f"a2annotate worker: {concurrency} process(es) on {broker_url()}")
    consumer = get_huey().create_consumer(workers=concurrency, worker_type="process", periodic=False,
                                          check_worker_health=True)
    try:
        consumer.run()
    finally:
        stop.set()


@click.group("jobs")
def jobs() -> None:
    """Background jobs: list, show and cancel them."""


def _line(d: dict) -> str:
    total = d["progress"]["total"]
    prog = f"{d['progress']['done']}" + (f"/{total}" if total else "")
    return f"{d['id']}  {d['kind']:<8} {d['state']:<9} {prog:>9}  {d['created_at'] or ''}  {d['error'] or ''}".rstrip()


@jobs.command("list")
@click.option("--state", type=click.Choice(STATES), default=None, help="Only jobs in this state.")
@click.option("--kind", default=None, help="Only jobs of this kind (import, ...).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10000))
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON (the REST API's shape).")
@one_line_errors
def list_cmd(state: str | None, kind: str | None, limit: int, as_json: bool) -> None:
    """Jobs, newest first: id, kind, state, progress, created, error."""
    from app.jobs.service import list_jobs, payload

    with Session(checked_engine()) as s:
        rows = [payload(j) for j in list_jobs(s, state=state, kind=kind, limit=limit)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo("\n".join(_line(r) for r in rows) if rows else "no jobs")


@jobs.command("show")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@one_line_errors
def show_cmd(job_id: str, as_json: bool) -> None:
    """One job with its parameters, result and error."""
    from app.jobs.service import get_job, payload

    with Session(checked_engine()) as s:
        job = get_job(s, job_id)
        if job is None:
            raise click.ClickException(f"no job {job_id!r}")
        d = payload(job, with_params=True)
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(_line(d))
    click.echo(f"params: {json.dumps(d['params'])}")
    if d["result"] is not None:
        click.echo(f"result: {json.dumps(d['result'])}")


@jobs.command("cancel")
@click.argument("job_id")
@one_line_errors
def cancel_cmd(job_id: str) -> None:
    """Cancel a job: a queued one at once, a running one at its next check."""
    from app.jobs.service import JobError, payload, request_cancel

    with Session(checked_engine()) as s:
        try:
            d = payload(request_cancel(s, job_id))
        except JobError as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"{d['id']}: {'cancelled' if d['state'] == 'cancelled' else 'cancel requested (it stops at its next check)'}")
