"""Benchmark: the judge runner's overhead against a stand-in Chat Completions server (not a test).

A judge over N demo runs (default 500) at concurrency 16, against the tests' stand-in server
(`tests/judges/standin.py`) running in its own process: every answer takes 50 ms, 10% of the
requests are answered 429 (`Retry-After: 0`) and 2% of the runs fail once with a 500 (once for
each model asking: every judge run here asks with a model of its own). The ideal time is
N x 50 ms / 16; the target is within 1.3x of it (the row also gives the ideal of the HTTP attempts
made, retries included). The baselines measured in the same run:

* the workload's floor, before each judge run: the same workload (every run's real first request,
  made before the clock, the same 429s and failures, each retried at once) sent by the bare
  `openai` client on the runner's own path (orjson bytes through ``client.post`` on the aiohttp
  transport) at the same concurrency, with no database, rendering, parsing or storing: what any
  runner with this client pays against this stand-in on this machine;
* once, the same number of requests of one size (the first run's real prompt, always answered)
  with the bare client, once with the SDK's typed ``chat.completions.create`` and once on the
  runner's path: the machine's floor for a request.

The judge run is repeated (``--repeat``, default ``BENCH_REPEAT`` or 3; a new judge each time, so
nothing comes from the cache) and the row gives the median with every run. The CPU seconds of the
runner's process and of the stand-in are given too: on a shared machine the wall times follow the
load, the CPU much less.

    python bench/bench_judges.py                    # 500 runs, the runner in 1 process and in 2
    python bench/bench_judges.py --quick            # 48 runs (3 chunks of 16)
    python bench/bench_judges.py --processes 2      # only in 2 processes (repeatable)

With 2 processes (`limits.processes`, issue 22's runner split) the "runner CPU" is the lead
process's own; the helper's is given beside it (from /proc, while it runs).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LATENCY = 0.05
CONCURRENCY = 16

SERVER = r"""
import json, sys, threading, zlib
from app.demo.generator import generate_runs
from tests.judges.helpers import truth_answer
from tests.judges.standin import Reply, StandIn
runs = {d.run["run_id"]: d.run for d in generate_runs(int(sys.argv[1]), 0)}
import gc
gc.freeze()  # the runs above are kept to the end: no collection goes over them (one did: 61 ms, every answer late)
failed, lock = set(), threading.Lock()
def script(req):
    if req.run_id is None:
        return Reply(text='{"verdict": "no_failure", "labels": []}', delay=%(lat)s)
    if req.n %% 10 == 3:
        return Reply(status=429, headers={"Retry-After": "0"}, delay=%(lat)s)
    with lock:
        once = (req.body["model"], req.run_id)
        if zlib.crc32(req.run_id.encode()) %% 50 == 0 and once not in failed:
            failed.add(once)
            return Reply(status=500, delay=%(lat)s)
    return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=%(lat)s)
with StandIn(script) as srv:
    print(srv.port, flush=True)
    sys.stdin.read()
""".replace("%(lat)s", repr(LATENCY)).replace("%%", "%")


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _bare(base_url: str, n: int, messages: list[dict[str, str]], response_format: dict,
          lean: bool = False) -> tuple[float, float]:
    """n requests at the bench's concurrency with the bare client: wall and CPU seconds. `lean`:
    the runner's own path (orjson body through ``client.post``, the aiohttp transport when
    installed, the answer parsed with orjson); else the SDK's typed ``chat.completions.create``
    on its default transport."""
    import openai
    import orjson

    from app.judges.runner import _JSON_OPTIONS, _http_client

    async def go() -> tuple[float, float]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, **(_http_client() if lean else {}))
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            async with sem:
                if lean:
                    body = orjson.dumps({"model": "m", "messages": messages, "response_format": response_format})
                    orjson.loads(await client.post("/chat/completions", cast_to=bytes, content=body,
                                                   options=_JSON_OPTIONS))
                else:
                    await client.chat.completions.create(model="m", messages=messages,
                                                         response_format=response_format)

        t, c = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one() for _ in range(n)))
        el, cpu = time.perf_counter() - t, time.process_time() - c
        await client.close()
        return el, cpu

    return asyncio.run(go())


def _floor(base_url: str, bodies: list[bytes]) -> tuple[float, float, int]:
    """The workload's floor: every body sent by the bare client on the runner's path at the bench's
    concurrency, each retried at once while the stand-in answers 429 or 500: wall and CPU seconds
    and the HTTP attempts made."""
    import openai
    import orjson

    from app.judges.runner import _JSON_OPTIONS, _http_client

    async def go() -> tuple[float, float, int]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, **_http_client())
        sem = asyncio.Semaphore(CONCURRENCY)
        attempts = [0]

        async def one(body: bytes) -> None:
            while True:
                async with sem:
                    attempts[0] += 1
                    try:
                        orjson.loads(await client.post("/chat/completions", cast_to=bytes, content=body,
                                                       options=_JSON_OPTIONS))
                        return
                    except openai.APIStatusError:
                        continue

        t, c = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(b) for b in bodies))
        el, cpu = time.perf_counter() - t, time.process_time() - c
        await client.close()
        return el, cpu, attempts[0]

    return asyncio.run(go())


def _workload(session, jv, model: str) -> list[bytes]:
    """Every run's first request as the judge sends it (in the order it judges them), asking `model`."""
    from sqlmodel import select

    from app.judges import service
    from app.judges.request import call_messages, prepare_call
    from app.judges.strategies import first_call
    from app.runs.models import Run

    setup = service._setup_vars(session, jv)
    defn = {**jv.definition, "endpoint": {**jv.definition["endpoint"], "model": model}}
    pks = session.exec(select(Run.id).order_by(Run.run_id)).all()
    bodies = []
    for view in service.load_views(session, setup, [{"run_pk": pk} for pk in pks]):
        spec = first_call(defn, view)
        bodies.append(prepare_call(defn, call_messages(defn, view, spec), spec.answer).body)
    return bodies


def _sample_request(session, jv) -> tuple[list[dict[str, str]], dict]:
    """The first run's real prompt and response format (the baseline sends this one n times; its
    answer is the stand-in's answer for a request naming no run)."""
    from sqlmodel import select

    from app.judges import service
    from app.judges.parse import SCHEMAS
    from app.judges.prompts import call_variables, render_messages, split_windows
    from app.runs.models import Run

    setup = service._setup_vars(session, jv)
    pk = session.exec(select(Run.id).order_by(Run.run_id)).first()
    view = service.load_views(session, setup, [{"run_pk": pk}])[0]
    msgs = render_messages(jv.definition["prompts"], call_variables(view, split_windows(view.lines, 10 ** 6, 0)[0],
                                                                    kind="labels", answer="labels"))
    msgs[1]["content"] = msgs[1]["content"].replace("# Run ", "# Sample ", 1)
    return msgs, {"type": "json_schema", "json_schema": {"name": "judge_answer", "schema": SCHEMAS["labels"],
                                                         "strict": True}}


def _children_cpu(pid: int) -> float:
    """CPU seconds of the processes whose parent is `pid`, now (Linux /proc)."""
    total = 0.0
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                total += _cpu_of(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return total


def _database(n: int):
    from sqlmodel import Session

    from app.core.config import get_settings
    from app.core.db import make_engine
    from app.core.migrate import upgrade
    from app.taxonomies.service import sync_builtin
    from tests.judges.helpers import load_demo

    tmp = Path(tempfile.mkdtemp(prefix="bench-judges-"))
    url = f"sqlite:///{tmp / 'judges.db'}"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        sync_builtin(s, get_settings().taxonomy_dir)
        s.commit()
    load_demo(engine, n)
    return engine


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main(quick: bool = False, n_runs: int | None = None, processes: list[int] | None = None,
         repeat: int | None = None) -> list[str]:
    from sqlmodel import Session

    from app.judges import service
    from tests.judges.helpers import judge_file

    n = n_runs or (48 if quick else 500)
    repeat = repeat or int(os.environ.get("BENCH_REPEAT", "1" if quick else "3"))
    engines = {p: _database(n) for p in processes or [1, 2]}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(n)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        port = int(proc.stdout.readline())
        base = f"http://127.0.0.1:{port}/v1"
        from app.judges import runner

        runner.warm_up()  # as `judge run` does before it plans (the fork server's imports)
        plans: dict[int, list[int]] = {}
        for p, eng in engines.items():
            with Session(eng) as s:
                for r in range(repeat):  # a judge (and model) of its own each time: no answer from the cache
                    jv, _ = service.register(s, judge_file(
                        base, name=f"tj{r}", extra=f"limits: {{concurrency: {CONCURRENCY}, retries: 4, "
                                                   f"backoff_initial_seconds: 0.01}}\n").replace(
                        "model: stand-in", f"model: stand-in-{r}"))
                    plans.setdefault(p, []).append(service.plan(s, jv).id)
                    s.commit()
                if p == next(iter(engines)):
                    messages, response_format = _sample_request(s, jv)
                    workload = {f"floor-{r}": _workload(s, jv, f"floor-{r}") for r in range(repeat)}
        bare, bare_cpu = _bare(base, n, messages, response_format)
        lean, lean_cpu = _bare(base, n, messages, response_format, lean=True)
        measured = []
        floors = 0
        for p, eng in engines.items():
            for plan in plans[p]:
                floor = _floor(base, workload[f"floor-{floors % repeat}"]) if floors < repeat else None
                floors += 1
                load = os.getloadavg()[0]
                t, c, sc = time.perf_counter(), time.process_time(), _cpu_of(proc.pid)
                helper_cpu = [0.0]

                def watch(_prog, _seen=helper_cpu) -> None:  # the helpers' CPU, read while they live
                    _seen[0] = max(_seen[0], _children_cpu(os.getpid()) - _cpu_of(proc.pid))

                prog = service.execute(eng, plan, processes=p, progress=watch if p > 1 else None)
                elapsed, cpu = time.perf_counter() - t, time.process_time() - c
                measured.append((p, plan, load, prog, elapsed, cpu, _cpu_of(proc.pid) - sc, helper_cpu[0], floor))
    finally:
        proc.stdin.close()
        proc.wait(10)
    rows = []
    ideal = n * LATENCY / CONCURRENCY
    floor_runs = [m[8] for m in measured if m[8] is not None]
    floor_wall = _median([f[0] for f in floor_runs])
    for p, eng in engines.items():
        mine = [m for m in measured if m[0] == p]
        for _, _, _, prog, *_ in mine:
            assert prog.done == n and prog.error == 0, prog
        with Session(eng) as s:
            attempts = [int(s.execute(text("SELECT COALESCE(SUM(c.attempts), 0) FROM judge_call c JOIN judge_result r "
                                           "ON r.id = c.result_id WHERE r.judge_run_id = :j"), {"j": m[1]}).scalar())
                        for m in mine]
        eng.dispose()
        walls = [m[4] for m in mine]
        elapsed = _median(walls)
        at = mine[[m[4] for m in mine].index(min(walls, key=lambda w: abs(w - elapsed)))]  # the median run
        _, _, load, prog, _, cpu, server_cpu, hcpu, _ = at
        n_att = attempts[mine.index(at)]
        ideal_attempts = n_att * LATENCY / CONCURRENCY
        ratio = elapsed / ideal
        split = (f"; {p} processes, runs judged {'/'.join(map(str, prog.processes))}" if p > 1 else "; 1 process")
        cpu_text = (f"runner {cpu:.2f} s = {1000 * cpu / n:.1f} ms a run" if p == 1 else
                    f"lead {cpu:.2f} s, helper at least {hcpu:.2f} s (its start-up included)")
        runs = ", ".join(f"{w:.2f}" for w in walls)
        rows.append(f"| judge {n} demo runs, concurrency {CONCURRENCY}, 50 ms answers, 10% 429 and 2% failing once "
                    f"(SQLite; {prog.calls} calls, {n_att} HTTP attempts{split}; load average {load:.1f}) "
                    f"| {elapsed:.2f} s, median of {len(walls)} ({runs} s; the median run's CPU: {cpu_text}, "
                    f"stand-in {server_cpu:.2f} s) "
                    f"| ideal {n} x 50 ms / {CONCURRENCY} = {ideal:.2f} s ({n_att} attempts x 50 ms / "
                    f"{CONCURRENCY} = {ideal_attempts:.2f} s); the workload's floor (the bare `openai` client on the "
                    f"runner's path, every run's real request made before the clock, the same 429s and failures "
                    f"retried at once, no database, parsing or storing): {floor_wall:.2f} s, median of "
                    f"{len(floor_runs)} ({', '.join(f'{f[0]:.2f}' for f in floor_runs)} s; {floor_runs[0][2]} "
                    f"attempts), {floor_wall / ideal:.2f}x the ideal; one request's size {n} times, no retries: "
                    f"typed `chat.completions.create` {bare:.2f} s (CPU {bare_cpu:.2f} s), the runner's path "
                    f"{lean:.2f} s (CPU {lean_cpu:.2f} s); the runner is {elapsed / floor_wall:.2f}x the workload's "
                    f"floor and {elapsed / ideal_attempts:.2f}x the attempts' ideal | {ratio:.2f} | within 1.3x | "
                    f"{'yes' if ratio <= 1.3 else '**no**'} |")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--processes", type=int, action="append", default=None,
                    help="Judge in this many processes (repeatable; default: 1 and 2).")
    ap.add_argument("--repeat", type=int, default=None,
                    help="Judge runs per number of processes (default: BENCH_REPEAT, or 3).")
    a = ap.parse_args()
    from bench.common import HEADER

    print("\n".join([*HEADER, *main(a.quick, a.runs, a.processes, a.repeat)]))
