"""Killing `a2annotate judge run` half way and running it again judges only the rest."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def test_kill_cli_half_way_then_resume(engine, db_url, tmp_path):
    runs = load_demo(engine, 24)

    def script(req):
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=0.15)

    env = {**os.environ, "DATABASE_URL": db_url, "A2A_TEST_JUDGE_KEY": "sk-test"}
    with StandIn(script) as srv:
        f = tmp_path / "judge.yaml"
        f.write_text(judge_file(srv.base_url, extra="limits: {concurrency: 2}\n"))
        cmd = [sys.executable, "-m", "app.cli", "judge", "run", str(f)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 60
            while len(_done(engine)) < 6 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        before = _done(engine)
        n_log = len(srv.log)
        assert 6 <= len(before) < 24
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
        assert len(res) == 24 and {r.state for r in res} == {"done"}
        states = sorted(j.state for j in s.exec(select(JudgeRun)).all())
        assert states == ["done", "error"]  # the killed one is marked interrupted
        killed = next(j for j in s.exec(select(JudgeRun)).all() if j.state == "error")
        assert "interrupted" in killed.error
