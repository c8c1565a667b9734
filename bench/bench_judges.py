"""Benchmark: the judge runner's overhead against a stand-in Chat Completions server (not a test).

A judge over N demo runs (default 500) at concurrency 16, against the tests' stand-in server
(`tests/judges/standin.py`) running in its own process: every answer takes 50 ms, 10% of the
requests are answered 429 (`Retry-After: 0`) and 2% of the runs fail once with a 500. The ideal
time is N x 50 ms / 16; the target is within 1.3x of it. The baseline measured in the same run: the
same number of requests of the same size (the first run's real prompt) made with the bare `openai`
client at the same concurrency, with no database, rendering or parsing (the floor of this machine,
client and server).

    python bench/bench_judges.py            # 500 runs
    python bench/bench_judges.py --quick    # 100 runs
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
failed, lock = set(), threading.Lock()
def script(req):
    if req.run_id is None:
        return Reply(text='{"verdict": "no_failure", "labels": []}', delay=%(lat)s)
    if req.n %% 10 == 3:
        return Reply(status=429, headers={"Retry-After": "0"}, delay=%(lat)s)
    with lock:
        if zlib.crc32(req.run_id.encode()) %% 50 == 0 and req.run_id not in failed:
            failed.add(req.run_id)
            return Reply(status=500, delay=%(lat)s)
    return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=%(lat)s)
with StandIn(script) as srv:
    print(srv.port, flush=True)
    sys.stdin.read()
""".replace("%(lat)s", repr(LATENCY)).replace("%%", "%")


def _bare(base_url: str, n: int, messages: list[dict[str, str]], response_format: dict) -> float:
    import openai

    async def go() -> float:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            async with sem:
                await client.chat.completions.create(model="m", messages=messages, response_format=response_format)

        t = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        el = time.perf_counter() - t
        await client.close()
        return el

    return asyncio.run(go())


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


def main(quick: bool = False, n_runs: int | None = None) -> list[str]:
    from sqlmodel import Session

    from app.core.config import get_settings
    from app.core.db import make_engine
    from app.core.migrate import upgrade
    from app.judges import service
    from app.taxonomies.service import sync_builtin
    from tests.judges.helpers import judge_file, load_demo

    n = n_runs or (100 if quick else 500)
    tmp = Path(tempfile.mkdtemp(prefix="bench-judges-"))
    url = f"sqlite:///{tmp / 'judges.db'}"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        sync_builtin(s, get_settings().taxonomy_dir)
        s.commit()
    load_demo(engine, n)
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(n)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        port = int(proc.stdout.readline())
        base = f"http://127.0.0.1:{port}/v1"
        with Session(engine) as s:
            jv, _ = service.register(s, judge_file(base, extra=f"limits: {{concurrency: {CONCURRENCY}, retries: 4, "
                                                            "backoff_initial_seconds: 0.01}\n"))
            jr_id = service.plan(s, jv).id
            s.commit()
            messages, response_format = _sample_request(s, jv)
        bare = _bare(base, n, messages, response_format)
        t = time.perf_counter()
        prog = service.execute(engine, jr_id)
        elapsed = time.perf_counter() - t
    finally:
        proc.stdin.close()
        proc.wait(10)
    engine.dispose()
    ideal = n * LATENCY / CONCURRENCY
    ratio = elapsed / ideal
    assert prog.done == n and prog.error == 0, prog
    return [f"| judge {n} demo runs, concurrency {CONCURRENCY}, 50 ms answers, 10% 429 and 2% failing once "
            f"(SQLite; {prog.calls} calls) | {elapsed:.2f} s | ideal {n} x 50 ms / {CONCURRENCY} = {ideal:.2f} s "
            f"(bare `openai` client, {n} requests of the same size, no database, rendering or parsing: {bare:.2f} s) | {ratio:.2f} | within 1.3x | "
            f"{'yes' if ratio <= 1.3 else '**no**'} |"]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    a = ap.parse_args()
    from bench.common import HEADER

    print("\n".join([*HEADER, *main(a.quick, a.runs)]))
