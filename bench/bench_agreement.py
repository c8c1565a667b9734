"""Agreement: the report (with bootstrap) and ``GET /api/v1/agreement`` against one plain
``krippendorff.alpha`` call on the same pooled matrix, measured in the same run.

* ``agreement_report`` on synthetic labels, 2,500 runs x 20 modes x 3 annotators, 1,000
  resamples (the pure module).
* ``GET /api/v1/agreement`` on a database with the demo corpus and the same synthetic labels
  stored as submitted annotations of three human annotators: the first request at a data
  version (computed; no bootstrap, ``n_boot=0``) and a repeat (served from the cache); at 2,500
  runs, and at 25,000 runs too when ``BENCH_LARGE`` is set.

    python -m bench.bench_agreement            # full size
    python -m bench.bench_agreement --quick    # a few runs, few resamples
    BENCH_LARGE=1 python -m bench.bench_agreement   # the GET rows at 25,000 runs as well
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.agreement.units import agreement_report, build_matrices  # noqa: E402
from app.core.config import get_settings  # noqa: E402
from bench.common import bench_dir, loaded_sqlite, median_time, row  # noqa: E402

CATEGORIES = ("DD", "GR", "VF", "CF")


def synthetic(n_runs: int, n_modes: int = 20, n_annotators: int = 3, seed: int = 0, modes: list[str] | None = None,
              runs: list[str] | None = None):
    """Synthetic labels: a latent truth per run x mode (prevalence 3-20 %), each annotator
    flips it with probability 8 %, 95 % of (annotator, run) pairs submitted, 2 agents per run."""
    rng = np.random.default_rng(seed)
    modes = modes or [f"{CATEGORIES[i * len(CATEGORIES) // n_modes]}{i % 5 + 1}" for i in range(n_modes)]
    n_modes = len(modes)
    mode_category = {m: m[:2] for m in modes}
    runs = runs or [f"run-{i:05d}" for i in range(n_runs)]
    annotators = [f"ann{a}" for a in range(n_annotators)]
    prevalence = rng.uniform(0.03, 0.2, n_modes)
    truth = rng.random((n_runs, n_modes)) < prevalence
    blame = rng.integers(0, 2, (n_runs, n_modes))
    subs, rows = [], []
    for a, ann in enumerate(annotators):
        submitted = rng.random(n_runs) < 0.95
        flips = rng.random((n_runs, n_modes)) < 0.08
        marked = truth ^ flips
        wrong_agent = rng.random((n_runs, n_modes)) < 0.1
        for r in np.nonzero(submitted)[0]:
            subs.append((ann, runs[r]))
            for j in np.nonzero(marked[r])[0]:
                agent = int(blame[r, j] ^ wrong_agent[r, j])
                rows.append((ann, runs[r], modes[j], mode_category[modes[j]], f"agent-{agent}",
                             [int(j), int(j) + 1 + a % 2]))
    labels = pd.DataFrame(rows, columns=["annotator", "run_id", "mode", "category", "agent", "evidence"])
    submissions = pd.DataFrame(subs, columns=["annotator", "run_id"])
    agents = pd.DataFrame([(r, f"agent-{k}") for r in runs for k in range(2)], columns=["run_id", "agent_id"])
    return labels, submissions, modes, mode_category, agents


def _baseline(labels, submissions, modes, mode_category) -> float:
    def one() -> None:
        mx = build_matrices(labels, submissions, modes, mode_category)
        pooled = mx.presence.reshape(-1, mx.presence.shape[2]).T.astype(float)
        pooled[pooled < 0] = np.nan
        krippendorff.alpha(reliability_data=pooled, level_of_measurement="nominal")

    return median_time(one)


def _labelled_db(n_runs: int) -> tuple[str, tuple]:
    """A copy of the demo database with the synthetic labels as submitted human annotations."""
    from sqlalchemy import insert
    from sqlmodel import Session, select

    from app.annotations.models import Annotation, Label
    from app.auth.service import create_user
    from app.core.db import make_engine
    from app.runs.models import Run, utcnow
    from app.taxonomies.service import latest, mode_codes

    d = bench_dir()
    src = loaded_sqlite(d, n_runs).removeprefix("sqlite:///")
    dst = d / f"agreement-{n_runs}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)
    import sqlite3

    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    engine = make_engine(f"sqlite:///{dst}")
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        runs = dict(s.exec(select(Run.run_id, Run.id).order_by(Run.run_id)).all())
        modes = mode_codes(tax)[:20]
        frames = synthetic(len(runs), modes=modes, runs=list(runs))
        labels, submissions = frames[0], frames[1]
        users = {n: create_user(s, n, "annotator", password=None).id for n in sorted(set(submissions["annotator"]))}
        s.flush()
        anns = {}
        for ann, run_id in submissions.itertuples(index=False):
            a = Annotation(run_pk=runs[run_id], user_id=users[ann], taxonomy_pk=tax.id, status="submitted")
            s.add(a)
            anns[(ann, run_id)] = a
        s.flush()
        marked = set()
        now = utcnow()
        rows = []
        for ann, run_id, mode, _, agent, ev in labels.itertuples(index=False):
            rows.append({"annotation_id": anns[(ann, run_id)].id, "mode": mode, "agent": agent, "evidence": ev,
                         "principals": [], "note": None, "confidence": None, "time_ms": 0, "created_at": now})
            marked.add((ann, run_id))
        s.execute(insert(Label), rows)  # one executemany (25,000 runs: 250,000 labels)
        for key, a in anns.items():
            a.no_failure = key not in marked
        s.commit()
        base_frames = (labels, submissions, modes, frames[3])
    engine.dispose()
    return f"sqlite:///{dst}", base_frames


def _api_rows(n_runs: int) -> list[str]:
    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from app.auth.service import create_token, create_user
    from app.core.db import make_engine
    from app.main import create_app

    url, (labels, submissions, modes, mode_category) = _labelled_db(n_runs)
    base = _baseline(labels, submissions, modes, mode_category)
    engine = make_engine(url)
    with Session(engine) as s:
        tok = create_token(s, create_user(s, "bench-admin", "admin", password=None))
        s.commit()
    os.environ.setdefault("RESULTS_INLINE_ROWS", str(10**9))  # the first request computes inline (timed)
    get_settings.cache_clear()
    app = create_app(engine)
    client = TestClient(app)
    headers = {"Authorization": f"Bearer {tok}"}

    def get() -> dict:
        r = client.get("/api/v1/agreement", params={"n_boot": 0}, headers=headers)
        assert r.status_code == 200, r.text
        return r.json()

    body = get()
    # runs nobody submitted are not units (at 25,000 runs a few: 5 % missing per annotator)
    n_submitted = submissions["run_id"].nunique()
    assert body["annotators"] == ["ann0", "ann1", "ann2"] and body["n_runs"] == n_submitted, body["n_runs"]
    def forget() -> None:  # the stored results (app/results): the next request computes
        with engine.begin() as c:
            c.exec_driver_sql("DELETE FROM stored_result")

    first = median_time(get, setup=forget)
    get()
    cached = median_time(get)
    client.close()
    engine.dispose()
    size = f"{n_runs:,} runs x 20 modes x 3 annotators"
    return [
        row(f"`GET /api/v1/agreement` (n_boot=0), {size}, first request at a data version", f"{first:.2f} s",
            f"one `krippendorff.alpha` on the pooled matrix: {base:.3f} s", first / base, "within 10x"),
        row("`GET /api/v1/agreement`, the same request again (stored per data version)", f"{cached:.3f} s",
            f"one `krippendorff.alpha`: {base:.3f} s", cached / base, "cached", "yes (no recompute)"),
    ]


def _api_sizes(quick: bool) -> list[int]:
    """Runs in the databases of the ``GET /api/v1/agreement`` rows: 2,500, and 25,000 as well
    with ``BENCH_LARGE=1``."""
    if quick:
        return [20]
    return [2500] + ([25000] if os.environ.get("BENCH_LARGE") else [])


def main(quick: bool = False) -> list[str]:
    """Run the benchmark; return markdown rows (see :func:`bench.common.row`)."""
    n_runs, n_boot = (50, 20) if quick else (2500, 1000)
    labels, submissions, modes, mode_category, agents = synthetic(n_runs)
    base = _baseline(labels, submissions, modes, mode_category)
    elapsed = median_time(lambda: agreement_report(labels, submissions, modes, mode_category, agents,
                                                   n_boot=n_boot, seed=0))
    report = agreement_report(labels, submissions, modes, mode_category, agents, n_boot=0, seed=0)
    assert report["overall"]["krippendorff_alpha"]["value"] is not None
    size = f"{n_runs:,} runs x {len(modes)} modes x 3 annotators"
    rows = [row(f"agreement_report {size}, {n_boot} resamples (every coefficient, mode, category)",
                f"{elapsed:.2f} s", f"one `krippendorff.alpha`, pooled, no bootstrap: {base:.3f} s",
                elapsed / base, "", "bootstrap cost; not a target row")]
    for n in _api_sizes(quick):
        rows += _api_rows(n)
    shutil.rmtree(bench_dir() / "unused", ignore_errors=True)
    return rows


if __name__ == "__main__":
    print("\n".join(main(quick="--quick" in sys.argv)))
