"""k distinct annotators per run holds under 20 concurrent fills: threads, each on its own
database connection, fill the same study's queue at the same moment with different annotators
and seeds; no run ends up with more than k annotators, none with the same annotator twice, and
the per-run counters agree with the rows (PostgreSQL: truly concurrent, row locks; SQLite: the
writers take turns)."""
from __future__ import annotations

import random
import threading
from collections import Counter

from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool
from sqlmodel import Session, select

from app.annotations.assignments import create_assignments
from app.annotations.models import Assignment
from app.annotations.service import resolve_taxonomy
from app.core.db import make_engine, write_session
from app.runs.service import RunFilter
from app.studies.models import RunQuota
from app.studies.service import create_study, get_study
from tests.annotations.factories import make_run, make_user

N_THREADS = 20
K = 3
PEOPLE = [f"p{i}" for i in range(1, 9)]


def test_twenty_concurrent_fills_keep_k_per_run(engine, db_url):
    with Session(engine) as s:
        for i in range(30):
            make_run(s, f"run-{i:02d}")
        for name in PEOPLE:
            make_user(s, name, password=None)
        make_user(s, "p0", password=None)
        study = create_study(s, "busy")
        # a first fill (one annotator per run) makes the runs' counters: the concurrent fills below
        # then meet on the counter rows' locks, not on creating them
        create_assignments(s, RunFilter(), None, 0, ["p0"], 1, resolve_taxonomy(s, None), batch="first",
                           policy="all", study=study)
        s.commit()
    # every thread its own connection: PostgreSQL without a pool to share or wait on; SQLite through the
    # app's engine (a connection per thread from its pool of 20 + 30, BEGIN IMMEDIATE for writers)
    eng = make_engine(db_url) if db_url.startswith("sqlite") else create_engine(db_url, poolclass=NullPool)
    barrier = threading.Barrier(N_THREADS)
    errors: list[BaseException] = []
    created: list[int] = []

    def fill(i: int) -> None:
        rng = random.Random(i)
        names = rng.sample(PEOPLE, 3)
        policy, n = ("all", None) if i % 2 else ("random", 20)
        try:
            barrier.wait(timeout=60)
            session = write_session(eng)  # SQLite: BEGIN IMMEDIATE (writers take turns)
            try:
                study = get_study(session, "busy")
                tax = resolve_taxonomy(session, None)
                res = create_assignments(session, RunFilter(), n, i, names, K, tax, batch=f"fill-{i}",
                                         policy=policy, study=study)
                session.commit()
                created.append(res.created)
            finally:
                session.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    eng.dispose()
    assert not errors, errors
    assert len(created) == N_THREADS
    with Session(engine) as s:
        rows = s.exec(select(Assignment.run_pk, Assignment.user_id)).all()
        per_run = Counter(pk for pk, _ in rows)
        assert len(per_run) == 30 and set(per_run.values()) == {K}  # every run filled to k, none beyond
        assert len(set(rows)) == len(rows)  # distinct annotators per run
        assert sum(created) == 30 * (K - 1)
        quotas = {q.run_pk: q.n for q in s.exec(select(RunQuota)).all()}
        assert quotas == dict(per_run)
