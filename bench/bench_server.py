"""The real server under load: `a2annotate serve` in a subprocess on a free port, on a SQLite
database (and PostgreSQL when reachable, served with `--workers 2`) holding a few hundred demo
runs, 20 annotators with API tokens and assignments, a reviewer, and one 2,000-event run.

Measured in the same run, per database (medians of BENCH_REPEAT phases of PHASE_S seconds):

* baseline: `GET /healthz` with 20 concurrent clients (requests/s);
* 20 annotators saving labels through `POST /api/v1/annotations` with their tokens and the
  version they last read (labels/s, p50/p95 latency, errors = any answer but 200, lost updates:
  afterwards every (annotator, run) in the database must hold the note and version of the last
  save that was answered 200);
* the same while a reviewer repeatedly asks `GET /api/v1/agreement` with a new `seed` each time
  (a new cache key, so every request computes), and how long those computations take;
* the 2,000-event run: `GET /runs/{id}` (the page, logged in with a session cookie) against
  `GET /api/v1/runs/{id}` (token), gzip on: time to the last byte and bytes on the wire.

BENCH_SERVER_S sets the phase length (default 5 s), BENCH_SERVER_DBS=sqlite skips PostgreSQL,
BENCH_PG_WORKERS the PostgreSQL server's workers (default 2).
Quick mode (the suite's smoke test): SQLite only, 20 runs, 4 annotators, 0.3 s phases, a 100-event run.
Run alone: `python -m bench.run bench_server` (or `python -m bench.bench_server [--quick]`).
"""
from __future__ import annotations

import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlmodel import Session, select

PASSWORD = "bench-password-123"


@dataclass
class Setup:
    url: str
    annotators: list[tuple[str, str]]  # (name, token)
    reviewer_token: str
    work: dict[str, list[tuple[str, str, int]]]  # name -> [(run_id, agent, seq)]
    versions: dict[tuple[str, str], int]  # (name, run_id) -> version of the seeded annotation
    long_runs: int = 1  # bench-long-0 ... : the same events, each its own content (trace cache key)


@dataclass
class Phase:
    ok: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    acked: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)  # (user, run) -> (version, note)
    status: dict[int, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))]


# --------------------------------------------------------------------------- the database

def _copy_sqlite(src_url: str, dst: Path) -> str:
    for suffix in ("", "-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)
    src = sqlite3.connect(src_url.removeprefix("sqlite:///"))
    out = sqlite3.connect(dst)
    src.backup(out)
    out.close()
    src.close()
    return f"sqlite:///{dst}"


def populate(url: str, n_annotators: int, runs_each: int, long_events: int, seeded_runs: int,
             long_runs: int = 1) -> Setup:
    """Users, tokens, assignments, simulated submitted labels (so the agreement has data) and the
    long run, on a database that already holds the demo runs."""
    from app.annotations.models import Annotation, Assignment
    from app.annotations.service import save_annotation
    from app.auth.models import User
    from app.auth.security import hash_password
    from app.auth.service import create_token, create_user
    from app.core.db import make_engine
    from app.runs.models import Agent, Event, Run
    from app.taxonomies.service import latest, mode_codes
    from tests.web.helpers import page_run, store

    engine = make_engine(url)
    rng = random.Random(7)
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        codes = mode_codes(tax)
        runs = s.exec(select(Run).order_by(Run.run_id)).all()
        agents: dict[int, list[str]] = {}
        for pk, agent_id in s.exec(select(Agent.run_pk, Agent.agent_id)).all():
            agents.setdefault(pk, []).append(agent_id)
        seqs: dict[int, list[int]] = {}
        for pk, seq in s.exec(select(Event.run_pk, Event.seq)).all():
            seqs.setdefault(pk, []).append(seq)
        runs = [r for r in runs if agents.get(r.id) and seqs.get(r.id)]
        pw = hash_password(PASSWORD)
        reviewer = create_user(s, "bench-reviewer", "reviewer")
        reviewer.password_hash = pw
        reviewer_token = create_token(s, reviewer, "bench")
        annotators, work = [], {}
        users = []
        for i in range(n_annotators):
            u = create_user(s, f"bench-ann-{i:02d}", "annotator")
            users.append(u)
            annotators.append((u.username, create_token(s, u, "bench")))
            mine = [runs[(i * runs_each + j) % len(runs)] for j in range(runs_each)]
            work[u.username] = [(r.run_id, agents[r.id][0], seqs[r.id][len(seqs[r.id]) // 2]) for r in mine]
            for pos, r in enumerate(mine):
                s.add(Assignment(run_pk=r.id, user_id=u.id, taxonomy_pk=tax.id, position=pos, batch="bench"))
        s.flush()
        # simulated earlier work: each of the first `seeded_runs` runs submitted by 3 annotators
        for j, r in enumerate(runs[:seeded_runs]):
            for k in range(3):
                u = users[(j + k) % len(users)]
                labels = [{"mode": rng.choice(codes), "agent": rng.choice(agents[r.id]),
                           "evidence": [rng.choice(seqs[r.id])]} for _ in range(rng.randint(0, 2))]
                save_annotation(s, u, r, tax, labels, no_failure=not labels, status="submitted", check_lock=False)
        for i in range(long_runs):  # the run page's first request of each builds its trace
            store(s, page_run(f"bench-long-{i}", n_events=long_events,
                              content_extra="lorem ipsum dolor sit amet " * 4 + str(i)))
        s.commit()
        versions = {(name, run_id): v for name, run_id, v in s.exec(
            select(User.username, Run.run_id, Annotation.version).join(User, User.id == Annotation.user_id)
            .join(Run, Run.id == Annotation.run_pk).where(User.username.like("bench-ann-%"))).all()}
    engine.dispose()
    return Setup(url, annotators, reviewer_token, work, versions, long_runs)


def sqlite_database(directory: Path, n_runs: int, **kw) -> Setup:
    from bench.common import loaded_sqlite

    return populate(_copy_sqlite(loaded_sqlite(directory, n_runs), directory / f"server-{n_runs}.db"), **kw)


def pg_database(directory: Path, n_runs: int, **kw):
    from app.core.db import make_engine
    from app.ingest.loader import import_paths
    from bench.common import PgDatabase, corpus, prepare

    db = PgDatabase()
    if db.url is None:
        return db, None
    prepare(db.url)
    engine = make_engine(db.url)
    import_paths(engine, [str(corpus(directory, n_runs))])
    engine.dispose()
    return db, populate(db.url, **kw)


# --------------------------------------------------------------------------- the server

class Server:
    """`a2annotate serve` on a free port in a subprocess (stdout/stderr to a log file)."""

    def __init__(self, url: str, log: Path, workers: int = 1):
        from app.cli.serve import bind_listen

        sock = bind_listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        sock.close()
        env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "bench-" + "x" * 32}
        args = [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)]
        if workers > 1:
            args += ["--workers", str(workers)]
        self.log = log
        self.proc = subprocess.Popen(args, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                     cwd=Path(__file__).resolve().parents[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.base + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- load

def clients(n: int, seconds: float, work, timeout: float = 60) -> float:
    """Run `work(i, client, stop_at)` in n threads at once; returns the wall time."""
    start = threading.Barrier(n + 1)

    def body(i):
        with httpx.Client(timeout=timeout) as c:
            start.wait()
            work(i, c, time.perf_counter() + seconds)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def save_labels(c: httpx.Client, url: str, name: str, token: str, runs: list, versions: dict, tag: str,
                stop_at: float, ph: Phase, lock: threading.Lock) -> None:
    """One annotator saves a CF1 label on its runs in turn until `stop_at` (draft and submitted by
    turns, each save at the version last acked); the counts, latencies, acked versions and status
    codes are added to `ph` under `lock`."""
    headers = {"Authorization": f"Bearer {token}"}
    k = ok = err = 0
    lat, acked, status = [], {}, {}
    while (t := time.perf_counter()) < stop_at:
        run_id, agent, seq = runs[k % len(runs)]
        note = f"{tag}-{name}-{k}"
        k += 1
        body = {"run_id": run_id, "status": "submitted" if k % 2 else "draft", "note": note,
                "version": versions.get((name, run_id), 0), "time_ms": 1000,
                "labels": [{"mode": "CF1", "agent": agent, "evidence": [seq], "confidence": 0.8}]}
        try:
            r = c.post(url, json=body, headers=headers)
            code = r.status_code
        except httpx.HTTPError:
            code = -1
        lat.append(time.perf_counter() - t)
        status[code] = status.get(code, 0) + 1
        if code == 200:
            ok += 1
            versions[(name, run_id)] = r.json()["version"]
            acked[(name, run_id)] = (versions[(name, run_id)], note)
        else:
            err += 1
    with lock:
        ph.ok += ok
        ph.errors += err
        ph.latencies += lat
        ph.acked.update(acked)
        for key, v in status.items():
            ph.status[key] = ph.status.get(key, 0) + v


def healthz_phase(base: str, n: int, seconds: float) -> Phase:
    ph = Phase()
    lock = threading.Lock()

    def work(_i, c, stop_at):
        ok = err = 0
        lat = []
        while (t := time.perf_counter()) < stop_at:
            try:
                r = c.get(base + "/healthz")
                good = r.status_code == 200
            except httpx.HTTPError:
                good = False
            lat.append(time.perf_counter() - t)
            ok, err = ok + good, err + (not good)
        with lock:
            ph.ok += ok
            ph.errors += err
            ph.latencies += lat

    ph.seconds = clients(n, seconds, work)
    return ph


def labels_phase(base: str, setup: Setup, seconds: float, versions: dict, tag: str,
                 reviewer: dict | None = None) -> Phase:
    """Every annotator saves labels on its runs in turn for `seconds`; `versions` holds the last
    version each (annotator, run) was acked at (updated). With `reviewer`, one more thread asks
    for an uncached agreement report in a loop and notes how long each took."""
    ph = Phase()
    lock = threading.Lock()
    n = len(setup.annotators)

    def annotate(i, c, stop_at):
        name, token = setup.annotators[i]
        save_labels(c, base + "/api/v1/annotations", name, token, setup.work[name], versions, tag, stop_at,
                    ph, lock)

    if reviewer is None:
        ph.seconds = clients(n, seconds, annotate)
        return ph

    def work(i, c, stop_at):
        if i < n:
            return annotate(i, c, stop_at)
        headers = {"Authorization": f"Bearer {setup.reviewer_token}"}
        while time.perf_counter() < stop_at:
            reviewer["seed"] = reviewer.get("seed", 0) + 1
            t = time.perf_counter()
            r = c.get(base + "/api/v1/agreement", params={"seed": reviewer["seed"]}, headers=headers)
            reviewer.setdefault("times", []).append(time.perf_counter() - t)
            if r.status_code != 200:
                reviewer["errors"] = reviewer.get("errors", 0) + 1

    ph.seconds = clients(n + 1, seconds, work)
    return ph


def lost_updates(url: str, acked: dict[tuple[str, str], tuple[int, str]]) -> int:
    """(annotator, run) pairs whose stored version or note is not the last one answered 200."""
    from app.annotations.models import Annotation
    from app.auth.models import User
    from app.core.db import make_engine
    from app.runs.models import Run

    engine = make_engine(url)
    with Session(engine) as s:
        rows = s.exec(select(User.username, Run.run_id, Annotation.version, Annotation.note)
                      .join(User, User.id == Annotation.user_id).join(Run, Run.id == Annotation.run_pk)
                      .where(User.username.like("bench-ann-%"))).all()
    engine.dispose()
    stored = {(u, r): (v, note) for u, r, v, note in rows}
    return sum(1 for key, want in acked.items() if stored.get(key) != want)


def page_vs_api(base: str, setup: Setup, repeat: int) -> dict[str, float]:
    """The long run's page (session cookie) and its API JSON (token), gzip on."""
    out: dict[str, float] = {}
    with httpx.Client(base_url=base, timeout=120) as page, httpx.Client(base_url=base, timeout=120) as api:
        login = page.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text).group(1)
        r = page.post("/login", data={"username": "bench-reviewer", "password": PASSWORD, "csrf_token": csrf,
                                      "next": "/"})
        assert r.status_code in (200, 303), r.status_code
        api.headers["Authorization"] = f"Bearer {setup.reviewer_token}"
        gz = {"Accept-Encoding": "gzip"}

        def timed(client, path):
            t = time.perf_counter()
            r = client.get(path, headers=gz)
            dt = time.perf_counter() - t
            assert r.status_code == 200, (path, r.status_code, r.text[:200])
            return dt, r.num_bytes_downloaded, len(r.content)

        firsts = [(timed(page, f"/runs/bench-long-{i}")[0], timed(api, f"/api/v1/runs/bench-long-{i}")[0])
                  for i in range(setup.long_runs)]
        pages = [timed(page, "/runs/bench-long-0") for _ in range(repeat)]
        apis = [timed(api, "/api/v1/runs/bench-long-0") for _ in range(repeat)]
    out["page_first_s"] = statistics.median(f[0] for f in firsts)
    out["api_first_s"] = statistics.median(f[1] for f in firsts)
    out["page_s"] = statistics.median(p[0] for p in pages)
    out["api_s"] = statistics.median(a[0] for a in apis)
    out["page_wire"], out["page_raw"] = pages[-1][1], pages[-1][2]
    out["api_wire"], out["api_raw"] = apis[-1][1], apis[-1][2]
    return out


# --------------------------------------------------------------------------- rows

def measure(setup: Setup, workers: int, phase_s: float, repeat: int, log: Path) -> dict:
    versions: dict = dict(setup.versions)
    health, plain, during = [], [], []
    reviewer: dict = {}
    acked: dict = {}
    n = len(setup.annotators)
    with Server(setup.url, log, workers) as srv:
        # warm-up: every worker imported and every client's first request served
        labels_phase(srv.base, setup, min(phase_s, 1.0), versions, "warm")
        healthz_phase(srv.base, n, min(phase_s, 1.0))
        for rep in range(repeat):
            health.append(healthz_phase(srv.base, n, phase_s))
            ph = labels_phase(srv.base, setup, phase_s, versions, f"p{rep}")
            acked.update(ph.acked)
            plain.append(ph)
            ph = labels_phase(srv.base, setup, phase_s, versions, f"a{rep}", reviewer)
            acked.update(ph.acked)
            during.append(ph)
        page = page_vs_api(srv.base, setup, repeat)
    return {"health": health, "plain": plain, "during": during, "reviewer": reviewer,
            "lost": lost_updates(setup.url, acked), "page": page}


def _med(phases: list[Phase], fn) -> float:
    return statistics.median(fn(p) for p in phases)


def rows_for(db: str, m: dict, n: int, long_events: int) -> list[str]:
    from bench.common import row

    health = _med(m["health"], lambda p: p.rate)
    rate = _med(m["plain"], lambda p: p.rate)
    p50 = _med(m["plain"], lambda p: p.pct(0.5))
    p95 = _med(m["plain"], lambda p: p.pct(0.95))
    errors = sum(p.errors for p in m["plain"])
    during = _med(m["during"], lambda p: p.rate)
    d95 = _med(m["during"], lambda p: p.pct(0.95))
    derr = sum(p.errors for p in m["during"])
    codes = {}
    for p in m["plain"] + m["during"]:
        for k, v in p.status.items():
            if k != 200:
                codes[k] = codes.get(k, 0) + v
    times = m["reviewer"].get("times") or [float("nan")]
    ok = p95 < 0.3 and errors == 0 and m["lost"] == 0 and rate / health >= 0.5
    pg = m["page"]
    ev = f"{long_events:,}"
    return [
        row(f"{db}: {n} annotators labelling concurrently (labels/s; p50 / p95; errors; lost updates)",
            f"{rate:.0f} labels/s; {p50 * 1000:.0f} / {p95 * 1000:.0f} ms; {errors} errors; {m['lost']} lost",
            f"`/healthz`, {n} clients: {health:.0f} req/s", rate / health,
            "at least 0.5, p95 under 300 ms, 0 errors, 0 lost",
            "yes" if ok else "**no**" + (f" (non-200: {codes})" if codes else "")),
        row(f"{db}: labels/s while a reviewer recomputes `GET /api/v1/agreement` "
            f"({len(times)} computations, median {statistics.median(times):.2f} s); p95",
            f"{during:.0f} labels/s; p95 {d95 * 1000:.0f} ms; {derr} errors",
            f"outside those windows: {rate:.0f} labels/s", rate / during if during else None,
            "within 1.5x"),
        row(f"{db}: {ev}-event run, `GET /runs/{{id}}` page vs `GET /api/v1/runs/{{id}}`, gzip on "
            "(time to the last byte, repeat request: the page's trace is cached per content hash)",
            f"{pg['page_s']:.3f} s, {pg['page_wire'] / 1024:.0f} KB on the wire ({pg['page_raw'] / 1024:.0f} KB)",
            f"{pg['api_s']:.3f} s, {pg['api_wire'] / 1024:.0f} KB on the wire ({pg['api_raw'] / 1024:.0f} KB)",
            pg["page_s"] / pg["api_s"], "within 2x"),
        row(f"{db}: the same, first request of a run (the page builds its trace)",
            f"{pg['page_first_s']:.3f} s", f"{pg['api_first_s']:.3f} s", pg["page_first_s"] / pg["api_first_s"],
            "within 2x"),
    ]


def main(quick: bool = False) -> list[str]:
    from bench.common import bench_dir, row

    directory = bench_dir()
    repeat = int(os.environ.get("BENCH_REPEAT", "1" if quick else "3"))
    if quick:
        n_runs, n_ann, phase_s, long_events, seeded = 20, 4, 0.3, 100, 10
    else:
        n_runs, n_ann, phase_s, long_events, seeded = 300, 20, float(os.environ.get("BENCH_SERVER_S", 5)), 2000, 300
    kw = {"n_annotators": n_ann, "runs_each": 10, "long_events": long_events, "seeded_runs": seeded,
          "long_runs": repeat}
    rows = rows_for("SQLite", measure(sqlite_database(directory, n_runs, **kw), 1, phase_s, repeat,
                                      directory / "server-sqlite.log"), n_ann, long_events)
    if quick or "postgresql" not in os.environ.get("BENCH_SERVER_DBS", "sqlite,postgresql"):
        return rows
    db, setup = pg_database(directory, n_runs, **kw)
    if setup is None:
        return rows + [row("PostgreSQL: server rows", f"not measured: {db.error}", "", None)]
    try:
        workers = int(os.environ.get("BENCH_PG_WORKERS", 2))
        m = measure(setup, workers, phase_s, repeat, directory / "server-pg.log")
        rows += rows_for(f"PostgreSQL (`serve --workers {workers}`)", m, n_ann, long_events)
    finally:
        db.drop()
    return rows


if __name__ == "__main__":
    print("\n".join(main(quick="--quick" in sys.argv)))
