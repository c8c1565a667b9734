"""OTLP attacks against a live server (a2annotate serve in a subprocess, issue 23 rows 1, 2, 5, 6,
scaled down): while they run, /healthz keeps answering within 100 ms (p99), every attack gets a
clear 4xx or a partial success, the process stays up and its peak memory bounded. The bound is
100 ms above the p99 the same probe measures without an attack (this machine is shared: under a
load of 15 on 2 cores /healthz alone has a p99 of 30-80 ms)."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
import time
import zlib

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.capture import sdk_spans
from tests.hardening.test_live_server import _admin_token, _peak_kb, _server

PEAK_RSS_BOUND_KB = 500 * 1024
#: probes a p99 is taken over (the 99th percentile of 200 leaves out the two slowest)
MIN_PROBES = 200


PROBE = r"""
import sys, threading, time
import httpx
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
with httpx.Client(timeout=10) as c:
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            r = c.get(sys.argv[1] + "/healthz")
            err = "" if r.status_code == 200 else f" {r.status_code}"
        except httpx.HTTPError as exc:
            err = f" {type(exc).__name__}"
        print(f"{time.perf_counter() - t0:.6f}{err}", flush=True)
        time.sleep(0.005)
"""


class Probe:
    """GET /healthz every 5 ms from a process of its own; the latencies. Often enough that the
    attacks (about two seconds) give some hundreds of probes, so that their p99 is a percentile and
    not the one slowest probe. A process, not a thread of the test: the attacks' client threads
    (20 MB bodies through httpx) hold this process's GIL, and a probe among them measured their
    waits as the server's."""

    def __init__(self, base: str):
        self.base, self.lat, self.errors = base, [], []

    def _read(self):
        for line in self.proc.stdout:
            took, _, err = line.strip().partition(" ")
            self.lat.append(float(took))
            if err:
                self.errors.append(err)

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, self.base], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 30
        while not self.lat and time.monotonic() < deadline:  # probing has begun
            time.sleep(0.01)
        assert self.lat, "the probe process never answered"
        self.lat.clear()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        self.proc.wait(15)
        self.reader.join(15)

    def p99(self) -> float:
        lat = sorted(self.lat)
        return lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def _many_spans(n: int) -> bytes:
    """A real exporter body of 1,000 spans, its span list repeated to `n` spans (cheap to build)."""
    req = ExportTraceServiceRequest.FromString(sdk_spans.protobuf(sdk_spans.long_trace(999)))
    spans = list(req.resource_spans[0].scope_spans[0].spans)
    while len(req.resource_spans[0].scope_spans[0].spans) < n:
        req.resource_spans[0].scope_spans[0].spans.extend(spans)
    return req.SerializeToString()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_otlp_attacks_keep_the_server_answering(engine, db_url, tmp_path):
    tok = _admin_token(engine)
    env = {"MAX_STRING_BYTES": str(1 << 20), "MAX_EVENTS_PER_RUN": "750"}
    with _server(db_url, tmp_path, **env) as (proc, base, port):
        h = {"Authorization": f"Bearer {tok}", "Content-Type": "application/x-protobuf"}
        c = httpx.Client(base_url=base, headers=h, timeout=120)
        results: list[tuple[str, int, bytes]] = []

        def attack(name, body, **headers):
            r = c.post("/v1/traces", content=body, headers=headers)
            results.append((name, r.status_code, r.content))

        huge_string = sdk_spans.protobuf(sdk_spans.long_trace(3, big={1: {"gen_ai.input.messages": "x" * (3 << 20)}}))
        bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb_body = bomb.compress(b"\0" * (256 << 20)) + bomb.flush()
        too_many = _many_spans(30_000)
        growing = sdk_spans.batches(sdk_spans.long_trace(1000), 125)  # 8 batches, the limit met in the 7th
        assert c.post("/v1/traces", content=b"").status_code == 200  # the decoding workers are started
        with Probe(base) as quiet:  # this (shared) machine's own latency, without an attack
            time.sleep(3)
            while len(quiet.lat) < MIN_PROBES and time.monotonic() - quiet.t0 < 60:
                time.sleep(0.1)  # a loaded machine answers slower: as many probes as the attacks get
        with Probe(base) as probe:
            time.sleep(0.3)
            stateless = (
                (("body over OTLP_MAX_BODY_BYTES", b"\0" * (20 << 20)), {}),
                (("string over MAX_STRING_BYTES", huge_string), {}),
                (("gzip bomb", bomb_body), {"Content-Encoding": "gzip"}),
                (("30k spans", too_many), {}),
                (("30k spans gzip", gzip.compress(too_many)), {"Content-Encoding": "gzip"}),
            )
            threads = [threading.Thread(target=attack, args=a, kwargs=k) for a, k in stateless]
            for t in threads:
                t.start()
            for i, batch in enumerate(growing):  # one trace growing past MAX_EVENTS_PER_RUN, then refused
                attack(f"batch {i}", sdk_spans.protobuf(batch))
            for t in threads:
                t.join(120)
            rounds = 1
            # the attacks again (they change nothing) until the probe has had enough answers
            # during attacks for its p99 to be a percentile: a quick machine is done in ~2 s
            while len(probe.lat) < MIN_PROBES and rounds < 10:
                again = [threading.Thread(target=attack, args=a, kwargs=k) for a, k in stateless]
                for t in again:
                    t.start()
                for t in again:
                    t.join(120)
                rounds += 1
            time.sleep(0.3)
        assert proc.poll() is None and probe.errors == [], probe.errors[:5]
        p99, base_p99 = probe.p99(), quiet.p99()
        assert len(probe.lat) >= MIN_PROBES and len(quiet.lat) >= MIN_PROBES, (len(probe.lat), len(quiet.lat))
        print(f"/healthz during the OTLP attacks ({rounds} rounds): {len(probe.lat)} probes, p99 {p99 * 1000:.0f} ms, "
              f"max {max(probe.lat) * 1000:.0f} ms (without: p99 {base_p99 * 1000:.0f} ms); "
              f"peak RSS {_peak_kb(proc.pid) / 1024:.0f} MB; load {os.getloadavg()[0]:.1f}")
        # within 100 ms of what this machine answers anyway (on an idle machine: 100 ms)
        assert p99 < 0.1 + base_p99, f"/healthz p99 {p99 * 1000:.0f} ms (without an attack {base_p99 * 1000:.0f} ms)"
        assert all(status < 500 for _, status, _ in results), [(n, st) for n, st, _ in results]
        by = {name: (status, content) for name, status, content in results}
        for name, status, content in results:  # every round of the attacks answered the same
            if name in ("body over OTLP_MAX_BODY_BYTES", "gzip bomb", "30k spans", "30k spans gzip"):
                assert status == 413, (name, status, content[:200])
            elif name == "string over MAX_STRING_BYTES":
                ps = ExportTraceServiceResponse.FromString(content).partial_success
                assert ps.rejected_spans == 1 and "MAX_STRING_BYTES" in ps.error_message
        assert sum(name == "gzip bomb" for name, _, _ in results) == rounds
        last = ExportTraceServiceResponse.FromString(by[f"batch {len(growing) - 1}"][1]).partial_success
        assert last.rejected_spans == len(growing[-1]) and "was rejected" in last.error_message
        assert _peak_kb(proc.pid) < PEAK_RSS_BOUND_KB
