"""`a2annotate serve --workers N`: N worker processes on one port, one session key for all of them."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

BIN = Path(sys.executable).parent


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def test_serve_with_two_workers_shares_sessions_across_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    env = dict(os.environ, DATABASE_URL=url, PYTHONUNBUFFERED="1")
    env.pop("SECRET_KEY", None)  # the key made by the parent must reach every worker
    run = {"env": env, "capture_output": True, "text": True, "timeout": 180}
    assert subprocess.run([str(BIN / "a2annotate"), "db", "upgrade"], **run).returncode == 0
    r = subprocess.run([str(BIN / "a2annotate"), "users", "create", "rita", "--role", "reviewer",
                        "--password-stdin"], input="rita-password-1\n", **run)
    assert r.returncode == 0, r.stdout + r.stderr
    proc = subprocess.Popen([str(BIN / "a2annotate"), "serve", "--port", "0", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        base = None
        deadline = time.monotonic() + 60
        while base is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.match(r"log in at (http://127\.0\.0\.1:\d+)/login$", line.strip())
            base = m.group(1) if m else None
        assert base is not None, "serve printed no login address"
        with httpx.Client(base_url=base, timeout=10) as c:
            # the workers import the app after the address is printed: at a load of 10 on 2
            # cores that took longer than 20 s, so wait up to two minutes, not 200 tries
            answer_by = time.monotonic() + 120
            while True:
                try:
                    page = c.get("/login")
                    break
                except httpx.TransportError:
                    if time.monotonic() > answer_by:
                        pytest.fail("the server does not answer within 120 s")
                    time.sleep(0.1)
            deadline = max(deadline, time.monotonic() + 30)
            while len([p for p in _children(proc.pid) if "spawn_main" in _cmdline(p)]) < 2:
                assert time.monotonic() < deadline, "fewer than 2 worker processes"
                time.sleep(0.1)
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
            r = c.post("/login", data={"username": "rita", "password": "rita-password-1", "csrf_token": csrf,
                                       "next": "/"})
            assert r.status_code == 303, r.text
            # new connections land on either worker: every one accepts the cookie the other signed
            for _ in range(12):
                with httpx.Client(base_url=base, timeout=10, cookies=c.cookies) as fresh:
                    assert fresh.get("/", follow_redirects=False).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
