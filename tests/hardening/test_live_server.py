"""Hostile requests against a live server (a2annotate serve in a subprocess, free port on
127.0.0.1): every one answered below 500, the server healthy afterwards and its peak memory
(VmHWM from /proc) below 500 MB."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session

from app.core.config import Settings
from tests.annotations.factories import make_user
from tests.hardening import hostile

PEAK_RSS_BOUND_KB = 500 * 1024
# the live-server modules run on one xdist worker (`make test`: --dist loadgroup), one after another
pytestmark = pytest.mark.xdist_group("live-attacks")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


@contextlib.contextmanager
def _server(db_url, tmp_path, **env_extra):
    """`a2annotate serve` on a free port, started and settled; its stderr goes to a log file in
    tmp_path (a pipe nobody reads would stop a long-lived server once it filled)."""
    port = _free_port()
    env = dict(os.environ, DATABASE_URL=db_url, SECRET_KEY="live-server-test-" + "x" * 32,
               MAX_UPLOAD_BYTES=str(20 << 20), MAX_ZIP_BYTES=str(20 << 20), UPLOAD_IDLE_TIMEOUT="2",
               MAX_ZIP_RATIO="5000",  # the bomb below (zeros, ~1,000:1) is to meet MAX_ZIP_BYTES; the ratio: test_live_attacks
               UPLOAD_DIR=str(tmp_path / "uploads"))
    env.update(env_extra)
    log = Path(tmp_path) / f"server-{port}.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        _settle(proc, int(env.get("OTLP_WORKERS", Settings.model_fields["otlp_workers"].default)))
        yield proc, base, port
    finally:
        proc.kill()
        proc.wait(10)


def _children(pid: int) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    return out


def _is_spawned_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"spawn_main" in f.read()
    except OSError:
        return False


def _state_and_cpu(pid: int) -> tuple[str, int]:
    """(state letter, utime + stime in ticks) of a process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return "X", 0  # gone
    return parts[0], int(parts[11]) + int(parts[12])


def _settle(proc: subprocess.Popen, workers: int, seconds: float = 20.0) -> None:
    """Wait until the server is quiet: at start it spawns its OTLP decoding workers in the
    background (app.capture.views._prewarm), which takes the cores for a few seconds; the attacks'
    latency bounds are about the attacks, not about that start-up. Quiet: the server has its
    OTLP_WORKERS worker processes (plus multiprocessing's resource tracker) and every child
    process is asleep and spent no CPU over the last 0.2 s (read from /proc, so this waits as long
    as the spawning takes and no longer), or `seconds` at most (as before: on a crowded machine
    the workers, niced once started, may take longer)."""
    deadline = time.monotonic() + seconds
    before: dict[int, tuple[str, int]] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        now = {c: _state_and_cpu(c) for c in _children(proc.pid)}
        if (sum(map(_is_spawned_worker, now)) >= workers and now.keys() == before.keys()
                and all(st == "S" and before[c][1] == cpu for c, (st, cpu) in now.items())):
            return
        before = now
        time.sleep(0.2)


def _admin_token(engine) -> str:
    from app.auth.service import create_token

    with Session(engine) as s:
        tok = create_token(s, make_user(s, "live-admin", "admin"), "live")
        s.commit()
    return tok


@pytest.fixture
def live(engine, db_url, tmp_path):
    tok = _admin_token(engine)
    with _server(db_url, tmp_path) as (proc, base, port):
        yield proc, base, tok, port, tmp_path / "uploads"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_hostile_inputs_against_a_live_server(live):
    proc, base, tok, port, uploads = live
    auth = {"Authorization": f"Bearer {tok}"}
    c = httpx.Client(base_url=base, headers=auth, timeout=60)

    def post(path, body, ctype, expect=None):
        r = c.post(path, content=body, headers={"Content-Type": ctype})
        assert r.status_code < 500 and proc.poll() is None, (path, ctype, r.status_code, r.text[:300])
        if expect is not None:
            assert r.status_code == expect, (r.status_code, r.text[:300])
        return r

    # the 4.3 KB body that killed the process (exit 139)
    r = post("/api/v1/imports", b'{"a": 1' + b"0" * 4300 + b"}", "application/json", 200)
    assert r.json()["rejected"] == 1 and "MAX_INT_DIGITS" in r.json()["errors"][0]["message"]
    for body in (hostile.long_int_object(5000), hostile.deep_array(100_000), hostile.deep_run_jsonl_line(100_000)):
        r = post("/api/v1/imports", body, "application/json", 200)
        assert r.json()["rejected"] == 1, r.json()
    r = post("/api/v1/imports", hostile.deep_run_jsonl_line(100_000) + b"\n" + json.dumps(hostile.run("live-ok")).encode(),
             "application/x-ndjson", 200)
    assert r.json()["imported"] == 1 and r.json()["rejected"] == 1
    # zips: nested beyond the limit, and a bomb refused while decompressing (100 MB of zeros, 20 MB allowed)
    for body, needle in ((hostile.nested_zip(3), "MAX_ZIP_NESTING"), (hostile.zip_bomb(100), "MAX_ZIP_BYTES")):
        r = post("/api/v1/imports", body, "application/zip", 200)
        assert needle in json.dumps(r.json()), r.json()
    # bigger than MAX_UPLOAD_BYTES: refused while streaming
    post("/api/v1/imports", b" " * (24 << 20), "application/json", 413)
    # labels: a 5,000-digit confidence, a deep note, a 200 KB CSV field
    jl = (b'{"annotator": "x", "run_id": "live-ok", "mode": "none", "confidence": ' + b"9" * 5000 + b"}\n"
          + b'{"annotator": "x", "run_id": "live-ok", "mode": "none", "note": ' + hostile.deep(100_000) + b"}\n")
    post("/api/v1/annotations/import", jl, "application/x-ndjson", 200)
    post("/api/v1/annotations/import", b"annotator,run_id,mode,note\nx,live-ok,none," + b"n" * 200_000 + b"\n",
         "text/csv")
    # superscript digits where a number is expected
    for path in ("/api/v1/taxonomies/%C2%B9", "/api/v1/queue?taxonomy=a2-failures@%C2%B2",
                 "/api/v1/progress?taxonomy=%C2%B3"):
        r = c.get(path)
        assert r.status_code < 500, (path, r.status_code)
    # slow clients: 20 uploads that send half a body and stall do not stop anyone else
    stalled = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"POST /api/v1/imports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n[".encode())
        stalled.append(s)
    t0 = time.monotonic()
    assert c.get("/api/v1/runs").status_code == 200 and c.get("/healthz").status_code == 200
    assert time.monotonic() - t0 < 5
    time.sleep(2.5)  # UPLOAD_IDLE_TIMEOUT=2: the stalled uploads are answered 408
    answers = []
    for s in stalled:
        s.settimeout(5)
        answers.append(s.recv(200).split(b"\r\n", 1)[0])
        s.close()
    assert all(b" 408 " in a for a in answers), answers[:3]
    # still healthy, and never above the memory bound
    assert c.get("/healthz").json() == {"status": "ok"} and proc.poll() is None
    peak = _peak_kb(proc.pid)
    print(f"live server peak RSS: {peak / 1024:.0f} MB")
    assert peak < PEAK_RSS_BOUND_KB, f"peak RSS {peak / 1024:.0f} MB"
    assert [p for p in uploads.rglob("*") if p.is_file()] == []  # every upload's temporary file removed
