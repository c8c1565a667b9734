"""Jobs: create, read, cancel, and run them (`execute`, called by a worker through the queue).

A job's life: ``queued`` (created, on the queue) -> ``running`` (a worker took it) -> ``done``
(result stored), ``failed`` (error stored: the handler raised, a budget was spent, or it ran out
of retries) or ``cancelled``. A transient failure (a database connection lost, the database
busy) puts it back to ``queued`` and on the queue again, up to JOB_RETRIES times. A running job
whose worker stopped reporting for JOB_STALE_SECONDS is put back the same way by `reap_stale`.

What a handler does must be safe to start again: imports are (atomic per run, idempotent).
"""
from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlmodel import Session

from app.core.checkpoint import checkpoints
from app.core.config import get_settings
from app.jobs.models import FINAL, Job
from app.runs.models import utcnow

log = logging.getLogger("a2annotate.jobs")

#: how often a running job's heartbeat is written, in seconds (at most a third of JOB_STALE_SECONDS)
HEARTBEAT_SECONDS = 5.0
#: how often progress is written to the database at most, in seconds
PROGRESS_SECONDS = 0.5


class JobCancelled(Exception):
    """Raised inside a job when its cancel was asked for."""


class BudgetExceeded(Exception):
    """Raised inside a job when it has spent its CPU or wall-clock budget."""


class JobError(ValueError):
    """A job that cannot be created or changed (unknown kind, not found, already finished)."""


def new_id() -> str:
    return uuid.uuid4().hex


def create_job(session: Session, kind: str, params: dict[str, Any], user_id: int | None) -> Job:
    """A queued job of a registered ``kind`` (committed; the caller sends it with `submit`)."""
    from app.jobs.handlers import HANDLERS

    if kind not in HANDLERS:
        raise JobError(f"unknown job kind {kind!r} (known: {', '.join(sorted(HANDLERS))})")
    job = Job(id=new_id(), kind=kind, params=params, user_id=user_id)
    session.add(job)
    session.commit()
    return job


def submit(session: Session, kind: str, params: dict[str, Any], user_id: int | None) -> Job:
    """Create the job and put it on the queue; returns it as it is after sending (with the
    immediate broker it has already run)."""
    from app.jobs.queue import send

    job = create_job(session, kind, params, user_id)
    session.commit()  # ends the read transaction: what the job wrote elsewhere is seen below
    send(job.id, engine=session.get_bind())
    session.commit()
    return session.get(Job, job.id)


def get_job(session: Session, job_id: str) -> Job | None:
    return session.get(Job, job_id)


def list_jobs(session: Session, *, user_id: int | None = None, state: str | None = None,
              kind: str | None = None, limit: int = 100) -> list[Job]:
    """Newest first; ``user_id`` keeps one user's jobs."""
    q = select(Job).order_by(Job.created_at.desc(), Job.id).limit(limit)
    if user_id is not None:
        q = q.where(Job.user_id == user_id)
    if state is not None:
        q = q.where(Job.state == state)
    if kind is not None:
        q = q.where(Job.kind == kind)
    return list(session.execute(q).scalars())


def request_cancel(session: Session, job_id: str) -> Job:
    """A queued job is cancelled at once; a running one is asked to stop (it stops at its next
    check, within about a second of work); a finished one raises JobError."""
    job = session.get(Job, job_id)
    if job is None:
        raise JobError(f"no job {job_id!r}")
    if job.state in FINAL:
        raise JobError(f"job {job_id} is already {job.state}")
    if job.state == "queued":
        n = session.execute(update(Job).where(Job.id == job_id, Job.state == "queued").values(
            state="cancelled", cancel_requested=True, finished_at=utcnow(), error="cancelled before it started")).rowcount
        if n:
            session.commit()
            _cleanup(job.kind, job.params)
            session.refresh(job)
            return job
    session.execute(update(Job).where(Job.id == job_id).values(cancel_requested=True))
    session.commit()
    session.refresh(job)
    return job


def payload(job: Job, *, with_params: bool = False) -> dict[str, Any]:
    """The job as the API shows it: ``{id, kind, state, progress: {done, total}, result, error, ...}``."""
    out = {
        "id": job.id, "kind": job.kind, "state": job.state,
        "progress": {"done": job.progress_done, "total": job.progress_total},
        "result": job.result, "error": job.error, "attempts": job.attempts,
        "cancel_requested": job.cancel_requested,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "user_id": job.user_id,
    }
    if with_params:
        out["params"] = {k: v for k, v in job.params.items() if not k.startswith("_")}
    return out


# --------------------------------------------------------------------------------------------
# running a job (in a worker)

_ENGINES: dict[tuple[int, str], Engine] = {}


def worker_engine() -> Engine:
    """This process's engine on DATABASE_URL (one per process: a forked worker makes its own)."""
    from app.core.db import make_engine

    key = (os.getpid(), get_settings().database_url)
    if key not in _ENGINES:
        _ENGINES[key] = make_engine(key[1])
    return _ENGINES[key]


@dataclass
class JobContext:
    """What a handler gets: the job's ``params``, the ``engine``, and `progress` / `check`, which
    raise JobCancelled or BudgetExceeded when the job must stop."""

    job_id: str
    kind: str
    params: dict[str, Any]
    engine: Engine
    cpu_budget: float
    wall_budget: float
    #: the last (done, total) reported, written by the heartbeat thread
    reported: tuple[int, int | None] | None = None
    #: work counted by `tick` (the `app.core.checkpoint` points of the computation)
    ticks: int = 0
    #: when set, `tick` reports ``(ticks, tick_total)`` as the job's progress (``tick_total``
    #: None: the total is not known); a handler that reports its own progress leaves it False
    tick_progress: bool = False
    tick_total: int | None = None
    _cpu0: float = 0.0
    _wall0: float = 0.0
    _last_cancel_check: float = 0.0

    def __post_init__(self) -> None:
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()

    def check(self) -> None:
        """Stop the job (raise) when its budget is spent or its cancel was asked for."""
        cpu = time.process_time() - self._cpu0
        if cpu > self.cpu_budget:
            raise BudgetExceeded(f"stopped: the job used more than its CPU budget of {self.cpu_budget:g} s "
                                 "(JOB_CPU_SECONDS)")
        wall = time.monotonic() - self._wall0
        if wall > self.wall_budget:
            raise BudgetExceeded(f"stopped: the job ran longer than its budget of {self.wall_budget:g} s "
                                 "(JOB_WALL_SECONDS)")
        now = time.monotonic()
        if now - self._last_cancel_check >= PROGRESS_SECONDS:
            self._last_cancel_check = now
            with Session(self.engine) as s:
                if s.execute(select(Job.cancel_requested).where(Job.id == self.job_id)).scalar():
                    raise JobCancelled("cancelled")

    def progress(self, done: int, total: int | None = None) -> None:
        """Report progress, then `check`. The numbers are written by the job's heartbeat thread
        (within PROGRESS_SECONDS), never here: a handler may report from inside its own write
        transaction, where a second writer of the same process would wait for it forever."""
        self.reported = (done, total)
        self.check()

    def tick(self, work: int = 0) -> None:
        """A checkpoint of the computation (`app.core.checkpoint.checkpoint`): count ``work``, report
        it as progress when ``tick_progress`` is set, then `check`."""
        self.ticks += work
        if self.tick_progress and work:
            total = self.tick_total
            self.reported = (self.ticks if total is None else min(self.ticks, total), total)
        self.check()

    def checked(self, items: Iterator[Any]) -> Iterator[Any]:
        """``items``, with `check` before each."""
        for item in items:
            self.check()
            yield item


def _write(engine: Engine, job_id: str, **values: Any) -> None:
    """Update the job row in a short transaction of its own (never inside the handler's)."""
    from app.core.db import session_scope

    with session_scope(engine, write=True) as s:
        s.execute(update(Job).where(Job.id == job_id).values(**values))


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError):
        return True
    return isinstance(exc, DBAPIError) and bool(getattr(exc, "connection_invalidated", False))


@contextmanager
def _heartbeat(ctx: JobContext, every: float) -> Iterator[None]:
    """A thread that writes the job's heartbeat every ``every`` seconds, and its progress within
    PROGRESS_SECONDS of a change."""
    stop = threading.Event()

    def beat() -> None:
        written, last_beat = None, time.monotonic()
        while not stop.wait(PROGRESS_SECONDS):
            now, reported = time.monotonic(), ctx.reported
            if reported == written and now - last_beat < every:
                continue
            values: dict[str, Any] = {"heartbeat_at": utcnow()}
            if reported is not None and reported != written:
                values.update(progress_done=reported[0], progress_total=reported[1])
            try:
                _write(ctx.engine, ctx.job_id, **values)
                written, last_beat = reported, now
            except Exception:  # noqa: BLE001 - a missed beat is retried; a stale job is reaped
                log.warning("job %s: heartbeat not written", ctx.job_id, exc_info=True)

    t = threading.Thread(target=beat, name=f"job-heartbeat-{ctx.job_id[:8]}", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=every + 1)


@contextmanager
def _budget_signals(cpu_budget: float, wall_budget: float) -> Iterator[None]:
    """In a worker's main thread: SIGXCPU (RLIMIT_CPU) and SIGALRM (an interval timer) raise
    BudgetExceeded wherever the job is, even between two of its checks. Elsewhere (the
    immediate broker, threads) the job's own checks enforce the budgets."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def over(kind: str, limit: float) -> Callable[[int, Any], None]:
        def handler(signum: int, frame: Any) -> None:
            raise BudgetExceeded(f"stopped: the job used more than its {kind} budget of {limit:g} s "
                                 f"({'JOB_CPU_SECONDS' if kind == 'CPU' else 'JOB_WALL_SECONDS'})")
        return handler

    old_xcpu = signal.signal(signal.SIGXCPU, over("CPU", cpu_budget))
    old_alrm = signal.signal(signal.SIGALRM, over("wall-clock", wall_budget))
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    limit = int(spent + cpu_budget) + 1
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    signal.setitimer(signal.ITIMER_REAL, wall_budget)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        signal.signal(signal.SIGXCPU, old_xcpu)
        signal.signal(signal.SIGALRM, old_alrm)


def _cleanup(kind: str, params: dict[str, Any]) -> None:
    from app.jobs.handlers import HANDLERS

    handler = HANDLERS.get(kind)
    if handler is not None and handler.cleanup is not None:
        try:
            handler.cleanup(params)
        except Exception:  # noqa: BLE001
            log.warning("job cleanup of %s failed", kind, exc_info=True)


def _finish(engine: Engine, job: Job, state: str, *, result: Any = None, error: str | None = None,
            reported: tuple[int, int | None] | None = None) -> None:
    values: dict[str, Any] = {"state": state, "result": result, "error": error, "finished_at": utcnow(),
                              "heartbeat_at": utcnow()}
    if reported is not None:
        values.update(progress_done=reported[0], progress_total=reported[1])
    _write(engine, job.id, **values)
    _cleanup(job.kind, job.params)


def _claim(engine: Engine, job_id: str) -> Job | None:
    """Mark the job running for this worker, unless it is final, cancelled or running elsewhere."""
    from app.core.db import session_scope

    with session_scope(engine, write=True) as s:
        job = s.execute(select(Job).where(Job.id == job_id).with_for_update()).scalar()
        if job is None or job.state in FINAL or job.state == "running":
            return None
        if job.cancel_requested:
            job.state, job.finished_at, job.error = "cancelled", utcnow(), "cancelled before it started"
            s.flush()
            _cleanup(job.kind, job.params)
            return None
        job.state = "running"
        job.attempts += 1
        job.started_at = job.heartbeat_at = utcnow()
        job.worker = _worker_name()
        s.flush()
        s.expunge(job)
        return job


def execute(job_id: str, engine: Engine | None = None) -> None:
    """Run one job (the queue's task) on ``engine`` (default: this process's engine on
    DATABASE_URL). Never raises: the outcome is in the job row."""
    from app.jobs.handlers import HANDLERS

    settings = get_settings()
    engine = engine or worker_engine()
    job = _claim(engine, job_id)
    if job is None:
        return
    handler = HANDLERS[job.kind]
    ctx = JobContext(job.id, job.kind, dict(job.params), engine, settings.job_cpu_seconds, settings.job_wall_seconds)
    beat = min(HEARTBEAT_SECONDS, settings.job_stale_seconds / 3)
    try:
        with _heartbeat(ctx, beat), _budget_signals(ctx.cpu_budget, ctx.wall_budget), checkpoints(ctx.tick):
            result = handler.run(ctx)
    except JobCancelled:
        _finish(engine, job, "cancelled", error="cancelled while it ran", reported=ctx.reported)
    except BudgetExceeded as exc:
        _finish(engine, job, "failed", error=str(exc), reported=ctx.reported)
    except Exception as exc:  # noqa: BLE001
        if _is_transient(exc) and job.attempts <= settings.job_retries:
            log.warning("job %s (%s): transient failure, retried: %s", job.id, job.kind, exc)
            _write(engine, job.id, state="queued", error=f"retrying after: {str(exc).splitlines()[0]}")
            from app.jobs.queue import send

            send(job.id, delay=min(2.0 ** job.attempts, 30.0), engine=engine)
        else:
            log.exception("job %s (%s) failed", job.id, job.kind)
            _finish(engine, job, "failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                    reported=ctx.reported)
    else:
        _finish(engine, job, "done", result=result, reported=ctx.reported)


def reap_stale(engine: Engine) -> list[str]:
    """Running jobs whose heartbeat is older than JOB_STALE_SECONDS lost their worker: each is
    queued and sent again while it has retries left, else failed. Returns their ids."""
    from app.core.db import session_scope
    from app.jobs.queue import send

    settings = get_settings()
    cutoff = utcnow() - timedelta(seconds=settings.job_stale_seconds)
    again: list[str] = []
    with session_scope(engine, write=True) as s:
        stale = s.execute(select(Job).where(Job.state == "running", or_(Job.heartbeat_at.is_(None),
                                                                         Job.heartbeat_at < cutoff))
                          .with_for_update(skip_locked=True)).scalars().all()
        for job in stale:
            if job.cancel_requested:
                job.state, job.finished_at, job.error = "cancelled", utcnow(), "cancelled; its worker stopped"
                _cleanup(job.kind, job.params)
            elif job.attempts <= settings.job_retries:
                job.state, job.error = "queued", f"its worker {job.worker} stopped; started again"
                again.append(job.id)
            else:
                job.state, job.finished_at = "failed", utcnow()
                job.error = f"its worker {job.worker} stopped, {job.attempts} times: out of retries (JOB_RETRIES)"
                _cleanup(job.kind, job.params)
    for job_id in again:
        send(job_id, engine=engine)
    return again


def file_expired(job: Job, now: Any = None) -> bool:
    """Whether a finished job's file is past JOB_FILE_RETENTION_HOURS (counted from its end)."""
    if job.state not in FINAL or job.finished_at is None:
        return False
    now = now or utcnow()
    end = job.finished_at if job.finished_at.tzinfo else job.finished_at.replace(tzinfo=now.tzinfo)
    return now - end > timedelta(hours=get_settings().job_file_retention_hours)


def sweep_job_files(engine: Engine) -> list[str]:
    """Remove the folders under UPLOAD_DIR/jobs of jobs finished more than JOB_FILE_RETENTION_HOURS
    ago, and of jobs the database does not know that are as old (a job row deleted, a database
    restored); a queued or running job's folder is kept. Returns the job ids removed (workers call
    this at start and every SWEEP_SECONDS)."""
    import shutil

    from app.core.scratch import JOBS_FOLDER, upload_root

    root = upload_root() / JOBS_FOLDER
    if not root.is_dir():
        return []
    hours = get_settings().job_file_retention_hours
    now = utcnow()
    removed: list[str] = []
    folders = [d for d in root.iterdir() if d.is_dir()]
    if not folders:
        return []
    with Session(engine) as s:
        jobs = {j.id: j for j in s.execute(select(Job).where(Job.id.in_([d.name for d in folders]))).scalars()}
    for d in folders:
        job = jobs.get(d.name)
        if job is not None:
            old = file_expired(job, now)
        else:
            try:
                old = time.time() - d.stat().st_mtime > hours * 3600
            except FileNotFoundError:
                continue
        if old:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    if removed:
        log.info("removed the files of %d job(s) older than JOB_FILE_RETENTION_HOURS=%g", len(removed), hours)
    return removed


#: how often a worker sweeps expired job files, in seconds
SWEEP_SECONDS = 600.0


def wait_for(engine: Engine, job_id: str, seconds: float) -> Job | None:
    """Poll the job until it is final or ``seconds`` pass; returns it as last read. The polls start
    20 ms apart and grow to at most 100 ms (one primary-key read each), so a job that ends is seen
    within 100 ms (the polls grew to 500 ms apart before: a 0.3 s job was answered after 0.4 s)."""
    deadline = time.monotonic() + seconds
    delay = 0.02
    while True:
        with Session(engine) as s:
            job = s.get(Job, job_id)
            if job is None or job.state in FINAL or time.monotonic() >= deadline:
                return job
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.3, 0.1)
