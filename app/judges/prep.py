"""The judge runner's prep process: the runs of a judge run read, and their prompt data made, in a
second process.

A judge run in one process spends about a quarter of its process's CPU (measured, 500 demo runs)
reading its runs (`app.judges.service.load_runs`: rows into canonical runs) and making their prompt
data (`app.judges.prompts.run_view`: one line per event, each event placed in its lane). That CPU is
taken from the event loop that sends the requests and reads the answers, and the reader thread
holds the GIL while answers wait. With `Prep`, a process forked from the runner's fork server
(`app.judges.runner.START_METHOD`, warmed by `app.judges.runner.warm_up`) does both, a chunk at a
time, a chunk ahead of the runner, and sends the prompt data back pickled, without the taxonomy
every run shares (the runner puts it back: the same object `run_view` gives every run).

The runner (`app.judges.runner._run`) uses it for a judge run in one process of at least
`MIN_RUNS` runs beyond its first chunk, on a database another process can open (not an in-memory
SQLite one), unless ``A2ANNOTATE_JUDGE_PREP=0``. The first chunk is always read in the runner's
process, while the prep process starts. A chunk the prep process has not made when a worker of the
runner finds no run waiting is read by the runner (the prep process's result, when it comes, is
dropped); `MISSES` such chunks in a row (say, the fork server was cold), or a failure of the prep
process, and the runner reads the rest of the runs itself: the prep process changes where the work
is done, never what is judged. It dies with the runner
(`app.judges.runner._watch_lead`) and is shut down when the judge run ends.

Importing this module configures the ORM's mappers (about 40 ms, which the first query of any
process pays otherwise): the fork server imports it (`app.judges.runner.PRELOAD`), so a prep
process forked from it starts with them configured.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any

from sqlalchemy.engine import Engine

from app.judges.prompts import run_view
from app.judges.request import prepare_first

#: a judge run with this many runs or more beyond its first chunk gets a prep process
MIN_RUNS = 200
#: the runner reads a chunk itself when a worker finds no run waiting before the prep process has
#: made it (its result, when it comes, is dropped); this many such chunks in a row (not counting
#: the second chunk, which may be wanted while the prep process starts) and the runner reads every
#: chunk itself from then on
MISSES = 2
#: ``A2ANNOTATE_JUDGE_PREP=0`` (or false, no, off) turns the prep process off
ENABLED = os.environ.get("A2ANNOTATE_JUDGE_PREP", "1").strip().lower() not in ("0", "false", "no", "off")
#: a run of a chunk that is no longer stored
MISSING = object()
#: what `run_view` is given for the taxonomy in the prep process (the runner puts the real one back)
_NO_TAXONOMY: dict[str, Any] = {"modes": []}


def wanted(engine: Engine, runs_after_first_chunk: int) -> bool:
    """Whether a judge run in one process of this size on this database gets a prep process."""
    from app.core.db import other_processes_can_open

    return ENABLED and runs_after_first_chunk >= MIN_RUNS and other_processes_can_open(engine)


class Prep:
    """One judge run's prep process (a `concurrent.futures.ProcessPoolExecutor` of one process,
    started by the runner's start method): `submit` a chunk of items, then `await result(...)`."""

    def __init__(self, engine: Engine, setup: dict[str, Any]):
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

        from app.judges.runner import _context

        url = engine.url.render_as_string(hide_password=False)
        judge = {k: setup[k] for k in ("definition", "taxonomy_vars", "threshold")}
        self.pool = ProcessPoolExecutor(1, mp_context=_context(), initializer=_init,
                                        initargs=(url, os.getpid(), judge))
        # chunks are handed to the pool from a thread of their own: the pool starts its process on
        # the first, and waits for the fork server to fork it (tens of ms), which must not stop the
        # runner's event loop
        self.submitter = ThreadPoolExecutor(1, thread_name_prefix="judge-prep")

    def submit(self, chunk: list[dict[str, Any]]) -> Any:
        """Hand a chunk to the prep process: a future of the pool's future of its prompt data."""
        return self.submitter.submit(self.pool.submit, _chunk, [item["run_pk"] for item in chunk])

    async def result(self, fut: Any, hungry: asyncio.Event) -> dict[int, Any] | None:
        """A chunk's prompt data by run pk (a run no longer stored is absent); None when `hungry`
        is set first (a worker wants a run now: the runner reads the chunk itself, and the chunk
        is dropped if the prep process has not begun it)."""
        wake = asyncio.ensure_future(hungry.wait())
        try:
            outer = asyncio.wrap_future(fut)
            if not await _first_of(outer, wake):
                return None
            inner = asyncio.wrap_future(outer.result())  # the pool's own future
            if not await _first_of(inner, wake):
                return None
            return inner.result()
        finally:
            wake.cancel()

    def abandon(self) -> None:
        """Stop asking: chunks not begun are dropped; the process ends after the one it is making."""
        self.submitter.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self.submitter.shutdown(wait=True, cancel_futures=True)
        self.pool.shutdown(wait=True, cancel_futures=True)


async def _first_of(fut: asyncio.Future, wake: asyncio.Future) -> bool:
    """Wait for `fut` or `wake`; True when `fut` is done, else it is cancelled and False."""
    if not fut.done():
        await asyncio.wait({fut, wake}, return_when=asyncio.FIRST_COMPLETED)
    if fut.done():
        return True
    fut.cancel()
    return False


_STATE: dict[str, Any] = {}


def _init(url: str, lead: int, judge: dict[str, Any]) -> None:
    """In the prep process, first: end with the runner, collect garbage less often (as the runner
    does, `app.judges.runner._fewer_collections`), open the database, keep what the judge run
    asks (its definition, taxonomy and success threshold)."""
    import gc

    from sqlmodel import Session

    from app.core.db import make_engine
    from app.judges.runner import GC_THRESHOLD, _die_with_parent, _watch_lead

    _die_with_parent()
    _watch_lead(lead)
    gc.set_threshold(max(gc.get_threshold()[0], GC_THRESHOLD), *gc.get_threshold()[1:])
    _STATE["session"] = Session(make_engine(url))
    _STATE["judge"] = judge


def _chunk(run_pks: list[int]) -> dict[int, Any]:
    """In the prep process: each stored run's prompt data with its first call made
    (`app.judges.request.prepare_first`), by run pk, without the taxonomy."""
    from app.judges import service

    judge = _STATE["judge"]
    runs = service.load_runs(_STATE["session"], [{"run_pk": pk} for pk in run_pks])
    views = {}
    for pk, run in runs.items():
        view = views[pk] = run_view(run, judge["taxonomy_vars"], success_threshold=judge["threshold"])
        try:
            prepare_first(judge["definition"], view)
        except Exception:  # noqa: BLE001 - the runner makes this call itself, and meets its error there
            view.memo = None
        view.base["taxonomy"], view.modes = _NO_TAXONOMY, []
    return views


def _configure_mappers() -> None:
    from sqlalchemy.orm import configure_mappers

    import app.judges.service  # noqa: F401 - the models the runner's queries use
    import app.runs.models  # noqa: F401

    configure_mappers()


_configure_mappers()
