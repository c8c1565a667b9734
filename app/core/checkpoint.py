"""Cancel and progress points inside long computations (bootstrap loops, export streams).

Pure computation knows nothing of jobs: a long loop calls `checkpoint(work)` once per step (a chunk
of bootstrap replicates, a chunk of an export). Outside a job that is a no-op costing one context
variable read. Inside a job (`app.jobs.service.execute` installs the job's `JobContext.tick` with
`checkpoints`) it counts the work done as the job's progress and stops the job, by raising
JobCancelled or BudgetExceeded, once its cancel was asked for or a budget is spent.

A context variable, not a global: jobs run by the immediate broker in a web request thread, and
computations served inline by that request outside any job, must not see each other's hook.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_HOOK: ContextVar[Callable[[int], None] | None] = ContextVar("a2annotate_checkpoint", default=None)


def checkpoint(work: int = 0) -> None:
    """A point where the running job (if any) may stop; ``work``: units done since the last point."""
    hook = _HOOK.get()
    if hook is not None:
        hook(work)


@contextmanager
def checkpoints(hook: Callable[[int], None]) -> Iterator[None]:
    """Within the block, `checkpoint(work)` calls ``hook(work)``."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)
