"""What one import may spend, checked inside the readers' loops: records, CPU time, and whether
anyone still wants the result.

* **Records** (`MAX_IMPORT_RECORDS`): every line of a line-based file counts, blank lines and
  comment lines included (content-free input costs time to skip too: a zip of 1.5 MB of blank
  lines cost about 125 CPU-s), and so does every element of a JSON array and every file of a
  directory or zip.
* **CPU seconds** (`IMPORT_CPU_SECONDS` for work that is not a background job, e.g. a REST
  upload): the CPU time of the thread reading and storing the import.
* **Cancellation**: `cancel(reason)` (the client disconnected, the server is shutting down) stops
  the import at the next check.

A breach raises `BudgetExceeded` from inside the reader; `app.ingest.detect.iter_path` turns it
into one last error item ("import stopped: ...") and reads nothing more, so the whole import
stops; runs stored before stay stored (each run is atomic).

The budget in force is found through a context variable (`current()`), so readers need no extra
parameter: `iter_path` makes one (from the settings) when its caller has not (`use(budget)`).
A job system can make a budget with a `cancelled` hook and a progress callback of its own.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Iterator

#: records between two checks of the CPU clock (cancellation is checked at every record)
CHECK_EVERY = 256

_current: contextvars.ContextVar[ImportBudget | None] = contextvars.ContextVar("a2annotate_import_budget",
                                                                               default=None)
_active: weakref.WeakSet[ImportBudget] = weakref.WeakSet()
_active_lock = threading.Lock()


class BudgetExceeded(Exception):
    """The import passed a budget or was cancelled; `message` says which (and the setting)."""

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where


class ImportBudget:
    """Records, CPU seconds and cancellation of one import (see the module docstring)."""

    def __init__(self, max_records: int | None = None, max_cpu_seconds: float | None = None):
        if max_records is None:
            from app.core.config import get_settings

            max_records = get_settings().max_import_records
        self.max_records = max_records
        self.max_cpu_seconds = max_cpu_seconds
        self.records_seen = 0
        self._next_check = CHECK_EVERY
        self._cpu_start: float | None = None
        self._cancelled: str | None = None
        with _active_lock:
            _active.add(self)

    # -- counting
    def records(self, n: int = 1, where: str | None = None) -> None:
        """Count `n` records (lines, elements, files); raises BudgetExceeded past the limit."""
        self.records_seen += n
        if self._cancelled is not None:
            raise BudgetExceeded(self._cancelled, where)
        if self.records_seen > self.max_records:
            raise BudgetExceeded(f"more than {self.max_records} records (lines, blank ones included, array "
                                 "elements and files) in one import (limit MAX_IMPORT_RECORDS)", where)
        if self.records_seen >= self._next_check:
            self._next_check = self.records_seen + CHECK_EVERY
            self.check(where)

    def check(self, where: str | None = None) -> None:
        """Raise BudgetExceeded when the import was cancelled or spent its CPU time."""
        if self._cancelled is not None:
            raise BudgetExceeded(self._cancelled, where)
        if self.max_cpu_seconds is not None:
            now = time.thread_time()
            if self._cpu_start is None:
                self._cpu_start = now
            elif now - self._cpu_start > self.max_cpu_seconds:
                raise BudgetExceeded(f"more than {self.max_cpu_seconds:g} CPU seconds (limit IMPORT_CPU_SECONDS; "
                                     "larger imports: the command line)", where)

    def start_clock(self) -> None:
        """Start counting CPU time in the calling thread (the one that reads and stores)."""
        self._cpu_start = time.thread_time()

    # -- cancellation
    def cancel(self, reason: str) -> None:
        """Stop the import at its next check (thread-safe: a flag)."""
        if self._cancelled is None:
            self._cancelled = reason

    @property
    def cancelled(self) -> str | None:
        return self._cancelled


def current() -> ImportBudget | None:
    """The budget of the import running in this context, or None."""
    return _current.get()


@contextlib.contextmanager
def use(budget: ImportBudget) -> Iterator[ImportBudget]:
    """Make `budget` the one in force for the code run inside (the readers find it with `current()`)."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def within(items: Iterator, budget: ImportBudget) -> Iterator:
    """Iterate `items` (a generator of readers) with `budget` in force during each step (a
    generator runs in its caller's context, so the budget is set around every `next`)."""
    while True:
        token = _current.set(budget)
        try:
            item = next(items)
        except StopIteration:
            return
        finally:
            _current.reset(token)
        yield item


def charge(n: int = 1, where: str | None = None) -> None:
    """Count `n` records against the budget in force (none: nothing to do)."""
    b = _current.get()
    if b is not None:
        b.records(n, where)


def cancel_all(reason: str) -> int:
    """Cancel every import in progress in this process (e.g. on SIGTERM); returns how many."""
    with _active_lock:
        budgets = list(_active)
    for b in budgets:
        b.cancel(reason)
    return len(budgets)
