"""Live capture under attack (issue 23, rows 1, 2, 5, 6, 8-10, 15, 16) at the sizes of the issue:
`a2annotate serve` in a subprocess on a free port (SQLite), each OTLP attack sent while a probe
asks `/healthz` every 25 ms; the server's peak memory (VmHWM) and that of its decoding workers;
the SSE parser and the recording proxy's limits in-process.

Quick mode (`--quick`, the suite's smoke test): sizes and the server's OTLP limits divided by 16
(so each attack meets the same limit), 10 batches. Run alone: `python -m bench.run bench_capture`.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import httpx

HEADER = ["| work | answer, time, /healthz p99 during the attack (without) | peak RSS server / workers | "
          "ratio | target | met |", "|---|---|---|---|---|---|"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kb(pid: int, field: str = "VmHWM:") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class _Probe:
    def __init__(self, base: str):
        self.base, self.lat, self.stop = base, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        with httpx.Client(timeout=30) as c:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                try:
                    c.get(self.base + "/healthz")
                except httpx.HTTPError:
                    pass
                self.lat.append(time.perf_counter() - t0)
                time.sleep(0.025)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)

    def p99(self) -> float:
        lat = sorted(self.lat) or [0.0]
        return lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def _spans(n: int, big: dict | None = None) -> bytes:
    from tests.capture import sdk_spans

    return sdk_spans.protobuf(sdk_spans.long_trace(n, big=big))


def _many(n: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest.FromString(_spans(999))
    spans = list(req.resource_spans[0].scope_spans[0].spans)
    while len(req.resource_spans[0].scope_spans[0].spans) < n:
        req.resource_spans[0].scope_spans[0].spans.extend(spans)
    return req.SerializeToString()


def otlp_rows(quick: bool, directory: Path) -> list[str]:
    from sqlmodel import Session

    from app.auth.service import create_token, create_user
    from tests.e2e.live import make_database

    db = directory / "capture.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    engine = make_database(db)
    with Session(engine) as s:
        token = create_token(s, create_user(s, "bench-collector", "reviewer", "bench-password-123"))
        s.commit()
    port = _free_port()
    scale = 16 if quick else 1
    mib = 1 << 20
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{db}", SECRET_KEY="bench-capture-" + "x" * 32)
    if quick:  # the defaults divided by `scale`, as the attacks below are
        env.update(OTLP_MAX_BODY_BYTES=str(16 * mib // scale), OTLP_MAX_SPANS_PER_REQUEST=str(20_000 // scale),
                   MAX_STRING_BYTES=str(10 * mib // scale))
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    rows: list[str] = []
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        c = httpx.Client(base_url=base, timeout=300, headers={"Authorization": f"Bearer {token}",
                                                               "Content-Type": "application/x-protobuf"})
        c.post("/v1/traces", content=b"")  # the decoding workers start
        with _Probe(base) as quiet:
            time.sleep(2)
        batch = 512
        n_batches = 10 if quick else 40
        trace = _spans(batch * n_batches // scale)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        whole = ExportTraceServiceRequest.FromString(trace)
        all_spans = list(whole.resource_spans[0].scope_spans[0].spans)
        resource = whole.resource_spans[0]

        def part(i: int) -> bytes:
            req = ExportTraceServiceRequest()
            rs = req.resource_spans.add()
            rs.resource.CopyFrom(resource.resource)
            ss = rs.scope_spans.add()
            ss.scope.CopyFrom(resource.scope_spans[0].scope)
            ss.spans.extend(all_spans[i * batch // scale:(i + 1) * batch // scale])
            return req.SerializeToString()

        attacks: list[tuple[str, list[tuple[bytes, dict]], str]] = [
            (f"one span, a {200 / scale:g} MiB string attribute", [(_spans(1, {0: {"x": "x" * (200 * mib // scale)}}), {})],
             "413 (OTLP_MAX_BODY_BYTES), server up"),
            (f"one span, a {12 / scale:g} MiB string attribute (under the body limit)",
             [(_spans(2, {0: {"x": "x" * (12 * mib // scale)}}), {})], "partial success naming it, not stored"),
            (f"{100_000 // scale:,} spans in one request", [(_many(100_000 // scale), {})], "413 before converting"),
            (f"{300_000 // scale:,} spans in one request", [(_many(300_000 // scale), {})], "413 before converting"),
            (f"gzip: {8 // scale or 1} x {1024 // scale} KB bombs ({1024 // scale} MB each unpacked)" if quick
             else "gzip: 8 x 1 MB bombs (1 GB each unpacked)",
             [(_gz_bomb((1 << 30) // scale), {"Content-Encoding": "gzip"})] * (8 // scale or 1),
             "413 while unpacking, RSS flat"),
        ]
        for name, bodies, target in attacks:
            rss0 = [_kb(p) for p in _children(proc.pid)]
            with _Probe(base) as probe:
                t0 = time.perf_counter()
                threads, answers = [], []
                for body, headers in bodies:
                    t = threading.Thread(target=lambda b=body, h=headers, out=answers: out.append(
                        c.post("/v1/traces", content=b, headers=h).status_code))
                    t.start()
                    threads.append(t)
                for t in threads:
                    t.join()
                dt = time.perf_counter() - t0
            workers = max([_kb(p) for p in _children(proc.pid)] + rss0 + [0])
            ok = all(a < 500 for a in answers) and proc.poll() is None
            rows.append(f"| {name} | {sorted(set(answers))} in {dt:.2f} s; /healthz p99 {probe.p99() * 1000:.0f} ms "
                        f"({quiet.p99() * 1000:.0f} ms) | {_kb(proc.pid) / 1024:.0f} / {workers / 1024:.0f} MB | "
                        f"{max(probe.p99(), 1e-3) / max(quiet.p99(), 1e-3):.2f} | {target} | {'yes' if ok else 'no'} |")
        # one trace in 40 batches of 512 spans: the cost per batch stays flat
        times = []
        with _Probe(base) as probe:
            for i in range(n_batches):
                t0 = time.perf_counter()
                c.post("/v1/traces", content=part(i))
                times.append(time.perf_counter() - t0)
        rows.append(f"| one trace, {n_batches} batches of {batch // scale} spans | batch 2 {times[1]:.2f} s, "
                    f"batch {n_batches} {times[-1]:.2f} s, median {sorted(times)[len(times) // 2]:.2f} s, all {sum(times):.1f} s; "
                    f"/healthz p99 {probe.p99() * 1000:.0f} ms | {_kb(proc.pid) / 1024:.0f} MB | "
                    f"{max(times[-1], 1e-3) / max(times[1], 1e-3):.2f} | last batch / batch 2 flat (was 0.14 s -> 2.3 s at 40) | "
                    f"{'yes' if times[-1] < 3 * times[1] else 'no'} |")
    finally:
        proc.kill()
        proc.wait(10)
    return rows


def _gz_bomb(size: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [comp.compress(b"\0" * (16 << 20)) for _ in range(size // (16 << 20))]
    return b"".join(out) + comp.flush()


def sse_rows(quick: bool) -> list[str]:
    from app.capture.proxy import SSEParser

    rows = []
    for mib in ((1, 2) if quick else (8, 32)):
        event = b"data: " + b"x" * (mib << 20) + b"\n\n"
        p = SSEParser()
        t0 = time.process_time()
        for i in range(0, len(event), 16384):
            p.feed(event[i:i + 16384])
        cpu = time.process_time() - t0
        rows.append(f"| SSE: one {mib} MiB event in 16 KiB chunks (the parser, run off the proxy's loop) | "
                    f"{cpu:.2f} CPU-s | - | | linear (was 8 MiB 2.8 s, 32 MiB 43.9 s) | {'yes' if cpu < 2 else 'no'} |")
    n = 20_000 if quick else 1_000_000
    lines = b"data: x\n" * n + b"\n"
    p = SSEParser()
    t0 = time.process_time()
    for i in range(0, len(lines), 65536):
        p.feed(lines[i:i + 65536])
    cpu = time.process_time() - t0
    rows.append(f"| SSE: {n:,} data lines in one event | {cpu:.2f} CPU-s | - | | linear (was 10.5 s for 1M) | "
                f"{'yes' if cpu < 5 else 'no'} |")
    return rows


def main(quick: bool = False) -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-capture-") as d:
        return otlp_rows(quick, Path(d)) + sse_rows(quick)


if __name__ == "__main__":
    print("\n".join(HEADER + main(quick="--quick" in sys.argv)))
