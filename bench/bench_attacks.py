"""Issue 23's attacks at full size, briefly (the suite runs them scaled down:
tests/hardening/test_live_attacks.py, test_import_budget.py, test_profile_limits.py,
tests/detectors/test_leak.py). Each line: what was measured and the number.

* slowloris: 99 connections from 127.0.0.2 that never finish their headers, against `a2annotate
  serve` (SQLite); `/healthz` probed from 127.0.0.1 every 50 ms for BENCH_ATTACK_S seconds: status
  codes and p50/p99 (target: all 200, p99 within 100 ms);
* a zip of blank lines (the reported 1.5 MB zip: about 1.4 GiB of blank lines), two uploads at
  once, `/healthz` probed meanwhile: the answer, seconds to answer, server CPU seconds;
* 256 MiB of blank lines and one run, uncompressed (`iter_path` in this process): CPU seconds;
* the leak detector on a 10 MiB message of opening quotes: seconds;
* profiles: billion laughs, 2M keys, 100,000-deep nesting: seconds to the refusal.

Run alone: `python -m bench.bench_attacks` (about a minute; the machine is shared: run briefly).
"""
from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path


def _cpu_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def _summary(samples) -> str:
    codes = [c for c, _ in samples]
    times = sorted(t for _, t in samples)
    p99 = statistics.quantiles(times, n=100)[98] if len(times) > 2 else max(times)
    return (f"{codes.count(200)}/{len(codes)} answered 200, p50 {statistics.median(times) * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms")


def server_attacks(seconds: float) -> list[str]:
    from sqlmodel import Session

    from app.auth.service import create_token
    from app.core.db import make_engine
    from app.core.migrate import upgrade
    from tests.annotations.factories import make_user
    from tests.hardening.slowloris import Slowloris
    from tests.hardening.test_live_attacks import _probe
    from tests.hardening.test_live_server import _server

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/attacks.db"
        upgrade(url)
        engine = make_engine(url)
        with Session(engine) as s:
            tok = create_token(s, make_user(s, "bench-admin", "admin", password=None), "t")
            s.commit()
        env = {"MAX_UPLOAD_BYTES": str(64 << 20), "MAX_ZIP_BYTES": str(2 << 30), "MAX_ZIP_RATIO": "200"}
        with _server(url, Path(tmp), **env) as (proc, base, port):
            out.append(f"healthz, no attack: {_summary(_probe(port, 2.0))}")
            with Slowloris(port, 99) as attack:
                attack.wait_started()
                time.sleep(1.0)
                samples = _probe(port, seconds)
            out.append(f"slowloris, 99 connections: {_summary(samples)}; the attacker's connections closed "
                       f"by the server: {attack.closed_by_server}")
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z, z.open("runs.jsonl", "w") as f:
                for _ in range(1400):
                    f.write(b"\n" * (1 << 20))
                f.write(b'{"run_id": "late"}\n')
            body = buf.getvalue()
            import httpx

            answers = []

            def upload():
                t = time.perf_counter()
                r = httpx.post(base + "/api/v1/imports", content=body, timeout=600,
                               headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/zip"})
                answers.append((time.perf_counter() - t, r.json()["errors"][0]["message"][:90]))

            cpu0 = _cpu_of(proc.pid)
            threads = [threading.Thread(target=upload) for _ in range(2)]
            for th in threads:
                th.start()
            samples = _probe(port, 2.0)
            for th in threads:
                th.join(600)
            out.append(f"zip of 1,400 MiB of blank lines ({len(body) / 1e6:.2f} MB), 2 uploads at once: answered in "
                       f"{', '.join(f'{a:.2f} s' for a, _ in answers)} ({answers[0][1]}...); server CPU "
                       f"{_cpu_of(proc.pid) - cpu0:.2f} s; healthz meanwhile: {_summary(samples)}")
    return out


def import_attacks() -> list[str]:
    from app.ingest import iter_path

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "blank.jsonl"
        with open(p, "wb") as f:
            for _ in range(256):
                f.write(b"\n" * (1 << 20))
            f.write(b'{"run_id": "late"}\n')
        t = time.process_time()
        items = list(iter_path(p))
        out.append(f"256 MiB of blank lines + one line, uncompressed: {time.process_time() - t:.2f} CPU-s "
                   f"({str(items[-1].error)[-120:]})")
    return out


def detector_attack() -> list[str]:
    code = ("import time; from tests.detectors.runs import ev, make_run; from app.detectors.leak import detect; "
            "t = '\\u201cab' * ((10 << 20) // 6); run = make_run([ev('buyer_agent', None, 'x', kind='tool_result'), "
            "ev('buyer_agent', 'seller_agent', t)], buyer_state={'budget_usd': 18500}); s = time.perf_counter(); "
            "detect(run); print(round(time.perf_counter() - s, 2))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       cwd=Path(__file__).resolve().parents[1])
    return [f"leak detector, 10 MiB message of opening quotes: {r.stdout.strip()} s (was about 6.8 h)"]


def profile_attacks() -> list[str]:
    from app.ingest.profile import ProfileError, load_profile

    laughs = "profile: 1\nname: l\na: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(8))
    cases = {"billion laughs": laughs,
             "2M keys": "profile: 1\nname: k\n" + "".join(f"k{i}: 1\n" for i in range(2_000_000)),
             "100,000-deep nesting": "profile: 1\nname: d\nx: " + "[" * 100_000 + "]" * 100_000 + "\n"}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in cases.items():
            p = Path(tmp) / "p.yaml"
            p.write_text(text)
            t = time.perf_counter()
            try:
                load_profile(str(p))
                msg = "accepted"
            except ProfileError as exc:
                msg = str(exc).split(": cannot read it: ")[-1][:80]
            out.append(f"profile, {name}: refused in {time.perf_counter() - t:.3f} s ({msg})")
    return out


def main() -> None:
    seconds = float(os.environ.get("BENCH_ATTACK_S", "8"))
    for line in [*profile_attacks(), *import_attacks(), *detector_attack(), *server_attacks(seconds)]:
        print(line, flush=True)


if __name__ == "__main__":
    main()
