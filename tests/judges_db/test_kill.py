"""Killing `a2annotate judge run` half way and running it again judges only the rest."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlmodel import Session, select

from app.judges.models import JudgeResult, JudgeRun
from app.runs.models import Run
from tests.judges.helpers import judge_file, load_demo, truth_answer
from tests.judges.standin import Reply, StandIn

ROOT = Path(__file__).resolve().parents[2]


def _done(engine) -> set[str]:
    with Session(engine) as s:
        return set(s.exec(select(Run.run_id).join(JudgeResult, JudgeResult.run_pk == Run.id)
                          .where(JudgeResult.state == "done")).all())


def _helpers(pid: int) -> list[int]:
    """The processes multiprocessing started for the CLI `pid` (the fork server and the helpers it
    forked, or spawned helpers), its children and grandchildren (Linux /proc)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and b"multiprocessing" in (d / "cmdline").read_bytes() \
                    and b"resource_tracker" not in (d / "cmdline").read_bytes():
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return [p for p, pp in parents.items() if pp == pid or parents.get(pp) == pid]


def _ports(pid: int) -> set[int]:
    """The local TCP ports of the sockets process `pid` holds open (Linux /proc)."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("processes", [1, 2])
def test_kill_cli_half_way_then_resume(engine, db_url, tmp_path, processes):
    """With 2 processes the CLI is killed once its helper process has asked for answers too: the
    helper dies with it (nothing more is asked or stored), and the next run judges only the rest."""
    runs = load_demo(engine, 24 if processes == 1 else 96)

    def script(req):
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=0.15)

    env = {**os.environ, "DATABASE_URL": db_url, "A2A_TEST_JUDGE_KEY": "sk-test"}
    with StandIn(script) as srv:
        f = tmp_path / "judge.yaml"
        f.write_text(judge_file(srv.base_url, extra="limits: {concurrency: 2}\n"))
        cmd = [sys.executable, "-m", "app.cli", "judge", "run", str(f), "--processes", str(processes)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        helpers: list[int] = []

        def helper_asked() -> bool:
            if processes == 1:
                return True
            helpers[:] = sorted(set(helpers) | set(_helpers(proc.pid)))
            ports = set().union(*(_ports(h) for h in helpers)) if helpers else set()
            return any(r.peer in ports for r in list(srv.log))

        try:
            deadline = time.time() + 90
            while (len(_done(engine)) < 6 or not helper_asked()) and time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()
            assert len(helpers) >= processes - 1
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        time.sleep(0.5)  # answers in flight land
        gone_by = time.time() + 15  # the helper notices its lead's death (pidfd) even on a busy machine
        while any(_alive(h) for h in helpers) and time.time() < gone_by:
            time.sleep(0.05)
        assert not [(h, Path(f"/proc/{h}/cmdline").read_bytes()[:300], Path(f"/proc/{h}/stat").read_text()[:80])
                    for h in helpers if _alive(h)]
        before = _done(engine)
        n_log = len(srv.log)
        time.sleep(1.0)
        assert len(srv.log) == n_log and _done(engine) == before  # nothing asked or stored after the kill
        assert 6 <= len(before) < len(runs)
        with Session(engine) as s:
            assert s.exec(select(JudgeRun)).one().state == "running"  # the killed run, heartbeat stopped
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr + done.stdout
        assert "judged" in done.stdout and "skipped" in done.stdout
        second = set(srv.runs_requested()[n_log:])
    assert not (second & before)  # only the rest was judged
    assert _done(engine) == set(runs)
    with Session(engine) as s:
        res = s.exec(select(JudgeResult)).all()
        assert len(res) == len(runs) and {r.state for r in res} == {"done"}
        states = sorted(j.state for j in s.exec(select(JudgeRun)).all())
        assert states == ["done", "error"]  # the killed one is marked interrupted
        killed = next(j for j in s.exec(select(JudgeRun)).all() if j.state == "error")
        assert "interrupted" in killed.error
