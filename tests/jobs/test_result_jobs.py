"""Cancel and progress points inside long computations (app.core.checkpoint): the bootstrap's
chunks count as a `result` job's progress and a cancelled bootstrap stops within a couple of
seconds instead of running to its end; outside a job the checkpoints do nothing."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from sqlmodel import Session, select

from app.agreement.bootstrap import bootstrap_values
from app.core.checkpoint import checkpoint, checkpoints
from app.jobs import service
from app.jobs.models import Job
from app.results.models import StoredResult
from tests.jobs.conftest import SLOW_AGREEMENT, load_demo


class Stop(Exception):
    pass


def test_checkpoints_count_bootstrap_replicates_and_can_stop_them():
    counts = np.array([3, 5, 2, 7])
    checkpoint(5)  # outside any hook: nothing happens
    seen: list[int] = []
    with checkpoints(seen.append):
        values = bootstrap_values(lambda w: w[:, 0], counts, 2500, np.random.default_rng(0))
    assert len(values) == 2500 and sum(seen) == 2500 and 0 in seen  # every replicate counted
    free = bootstrap_values(lambda w: w[:, 0], counts, 2500, np.random.default_rng(0))
    assert np.array_equal(values, free)  # the checkpoints change nothing in the result

    def stop_after_first(work: int) -> None:
        if work:
            raise Stop
    calls = []
    with pytest.raises(Stop), checkpoints(stop_after_first):
        bootstrap_values(lambda w: calls.append(len(w)) or w[:, 0], counts, 10_000_000, np.random.default_rng(0))
    assert len(calls) == 1  # stopped after one chunk, not after ten million replicates


def test_cancel_stops_a_running_bootstrap_promptly(engine):
    """A `result` job bootstrapping 10,000 replicates at agent level over 320 runs (127 bootstraps,
    about six seconds here) shows its progress in replicates, and stops within two seconds of its
    cancel, storing nothing. (Over 80 runs the job took two seconds here and less on a faster
    machine, which finished it between the first progress seen and the cancel.)"""
    load_demo(engine, 320)
    params = SLOW_AGREEMENT
    with Session(engine) as s:
        job = service.create_job(s, "result", {"kind": "agreement", "params": params}, None)
        job_id = job.id
    t = threading.Thread(target=service.execute, args=(job_id, engine), daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while True:  # poll until the heartbeat thread has written some replicates as progress
        with Session(engine) as s:
            row = s.get(Job, job_id)
            if row.state == "running" and row.progress_done > 0:
                break
        assert row.state in ("queued", "running") and time.monotonic() < deadline, (row.state, row.error)
        time.sleep(0.05)
    assert row.progress_total is None  # replicates drawn so far; the total is not known in advance
    with Session(engine) as s:
        service.request_cancel(s, job_id)
    asked = time.monotonic()
    t.join(timeout=30)
    stopped = time.monotonic() - asked
    assert not t.is_alive()
    with Session(engine) as s:
        row = s.get(Job, job_id)
        assert row.state == "cancelled" and row.error == "cancelled while it ran", (row.state, row.error)
        assert s.execute(select(StoredResult).where(StoredResult.kind == "agreement")).scalar() is None
        # the cancel is what stopped it: it drew a part of its 127 bootstraps, not all
        assert 0 < row.progress_done < 127 * params["n_boot"], row.progress_done
    assert stopped < 2.0, f"the cancelled bootstrap ran {stopped:.1f} s more"
