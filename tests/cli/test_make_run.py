"""`make run` as a user runs it: the Makefile's own commands, twice, on a database that already
holds a user's imported and labelled run; the install targets; the login hint of `serve`."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlmodel import Session, select

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _make_n(target: str, venv: Path, **variables: str) -> list[str]:
    """The commands `make <target>` would run (make -n), with VENV pointing at `venv`."""
    args = ["make", "-s", "-n", "-C", str(REPO), target, f"VENV={venv}",
            *(f"{k}={v}" for k, v in variables.items())]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if line.strip()]


def _fake_venv(tmp_path: Path, *stamps: str) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    later = (REPO / "pyproject.toml").stat().st_mtime + 10
    for s in stamps:
        (venv / s).write_text("")
        os.utime(venv / s, (later, later))
    return venv


def test_make_run_installs_runtime_deps_only_and_make_test_adds_the_test_extras(tmp_path):
    venv = tmp_path / "fresh"
    run = _make_n("run", venv)
    installs = [c for c in run if "pip install" in c and "--upgrade pip" not in c]
    assert installs == [f"{venv}/bin/pip install --quiet -e ."], run
    test = _make_n("test", venv)
    assert any(c.endswith("pip install --quiet -e '.[test]'") for c in test), test

    # stamps: after `make run`'s install, `make test` adds only the extras; after both, nothing
    venv = _fake_venv(tmp_path / "a", ".installed-run")
    assert not [c for c in _make_n("run", venv) if "pip " in c]
    test = [c for c in _make_n("test", venv) if "pip " in c]
    assert test == [f"{venv}/bin/pip install --quiet -e '.[test]'"], test
    venv = _fake_venv(tmp_path / "b", ".installed-run", ".installed")
    assert not [c for c in _make_n("test", venv) + _make_n("install", venv) if "pip " in c]


def _make_run_commands(tmp_path: Path, n_runs: int) -> list[list[str]]:
    """`make run`'s commands before `serve`, with this interpreter's bin folder."""
    venv = _fake_venv(tmp_path / "mk", ".installed-run", ".installed")
    cmds = []
    for line in _make_n("run", venv, DEMO_RUNS=str(n_runs)):
        argv = shlex.split(line)
        assert argv[0] == f"{venv}/bin/a2annotate", line
        if argv[1] == "serve":
            continue
        cmds.append([str(BIN / "a2annotate"), *argv[1:]])
    assert [c[1] for c in cmds] == ["db", "demo"] and "--with-users" in cmds[1]
    return cmds


def _cli(args: list[str], url: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, DATABASE_URL=url)
    return subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, timeout=180)


def _state(engine) -> dict:
    """Every assignment, annotation and label, as plain tuples."""
    from app.annotations.models import Annotation, Assignment, Label
    from app.auth.models import User
    from app.runs.models import Run

    with Session(engine) as s:
        names = {u.id: u.username for u in s.exec(select(User)).all()}
        runs = {r.id: r.run_id for r in s.exec(select(Run)).all()}
        return {
            "assignments": sorted((runs[a.run_pk], names[a.user_id], a.batch) for a in s.exec(select(Assignment))),
            "annotations": sorted((runs[a.run_pk], names[a.user_id], a.status, a.origin, a.no_failure, a.time_ms)
                                  for a in s.exec(select(Annotation))),
            "labels": sorted((a.annotation_id, a.mode, a.agent, tuple(a.evidence), a.note or "")
                             for a in s.exec(select(Label))),
        }


def test_make_run_twice_never_touches_a_users_imported_and_labelled_run(tmp_path):
    from app.annotations.models import Annotation, Assignment
    from app.annotations.service import save_annotation
    from app.auth.security import verify_password
    from app.auth.service import get_user
    from app.core.db import make_engine
    from app.demo.generator import generate_runs
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    url = f"sqlite:///{tmp_path / 'a2annotate.db'}"
    upgrade_cmd, demo_cmd = _make_run_commands(tmp_path, 6)
    assert _cli(upgrade_cmd, url).returncode == 0

    # the user's own work: an annotator named like a demo user, two imported runs sorting before "demo-"
    r = _cli([str(BIN / "a2annotate"), "users", "create", "alice", "--role", "annotator", "--password-stdin"],
             url, stdin="alices-own-password\n")
    assert r.returncode == 0, r.stderr
    mine = []
    for i, d in enumerate(generate_runs(2, seed=31)):
        run = dict(d.run, run_id=f"aaa-user-run-{i}")
        run["metadata"] = {k: v for k, v in (run.get("metadata") or {}).items() if k != "demo_truth"}
        mine.append(run)
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in mine) + "\n")
    r = _cli([str(BIN / "a2annotate"), "import", str(path)], url)
    assert r.returncode == 0 and "imported 2" in r.stdout, r.stdout + r.stderr
    engine = make_engine(url)
    agent = mine[0]["agents"][0]["id"]
    with Session(engine) as s:
        save_annotation(s, get_user(s, "alice"), get_run(s, "aaa-user-run-0"), latest(s, "a2-failures"),
                        [{"mode": "CF1", "agent": agent, "evidence": [1], "note": "alice's own label"}],
                        status="draft")
        s.commit()
    before = _state(engine)

    outs = []
    for _ in range(2):
        r = _cli(demo_cmd, url)
        assert r.returncode == 0, r.stdout + r.stderr
        outs.append(r.stdout)
    assert "simulated annotations 0" not in outs[0]
    assert "assignments added 0; simulated annotations 0" in outs[1], outs[1]
    assert "imported 0, unchanged 6" in outs[1]

    after = _state(engine)
    for key in ("assignments", "annotations"):
        untouched = [row for row in after[key] if row[0].startswith("aaa-")]
        assert untouched == [row for row in before[key] if row[0].startswith("aaa-")], key
    assert set(before["labels"]) <= set(after["labels"])
    with Session(engine) as s:
        for rid in ("aaa-user-run-0", "aaa-user-run-1"):
            pk = get_run(s, rid).id
            assert not s.exec(select(Assignment).where(Assignment.run_pk == pk)).all()
        human = Annotation.origin == "human"  # the runs' audits are judge annotations, made by the import
        anns = s.exec(select(Annotation).where(Annotation.run_pk == get_run(s, "aaa-user-run-1").id, human)).all()
        assert anns == []  # nobody labelled it: the demo must not invent labels there
        (ann,) = s.exec(select(Annotation).where(Annotation.run_pk == get_run(s, "aaa-user-run-0").id, human)).all()
        assert ann.status == "draft" and ann.origin == "human"
        assert verify_password(get_user(s, "alice").password_hash, "alices-own-password")
        # the demo's own runs did get the demo's queue and simulated labels
        assert s.exec(select(Assignment).where(Assignment.batch == "demo")).first() is not None
    # a third run changes nothing at all
    assert _cli(demo_cmd, url).returncode == 0
    assert _state(engine) == after
    engine.dispose()


def _processes_marked(mark: str) -> list[int]:
    """The live processes whose environment holds ``A2A_TEST_MARK=<mark>`` (Linux /proc)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"A2A_TEST_MARK={mark}".encode() in env.split(b"\0") and state != "Z":
            found.append(int(d.name))
    return found


def test_serve_prints_the_login_address_with_the_port_it_bound(tmp_path):
    """... and, stopped (SIGTERM) right after it answers, while its OTLP decoding workers are still
    being spawned, leaves no process behind: a worker that starts after the server has gone ends
    at once (it once took init for its server and lived on, orphaned)."""
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    assert _cli([str(BIN / "a2annotate"), "db", "upgrade"], url).returncode == 0
    mark = f"serve-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, DATABASE_URL=url, PYTHONUNBUFFERED="1", A2A_TEST_MARK=mark)
    proc = subprocess.Popen([str(BIN / "a2annotate"), "serve", "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        hint = None
        deadline = time.monotonic() + 30
        while hint is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.match(r"log in at (http://127\.0\.0\.1:(\d+)/login)$", line.strip())
            if m:
                hint = m
        assert hint is not None, "serve printed no login address"
        port = int(hint.group(2))
        assert port not in (0, 8000)
        import httpx

        for _ in range(100):
            try:
                r = httpx.get(hint.group(1), timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            pytest.fail("the printed login address does not answer")
        assert r.status_code == 200 and 'name="password"' in r.text
        assert len(_processes_marked(mark)) >= 2  # the server and what it started, the OTLP workers among them
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 15  # a worker notices its server gone within a second of its start
    while (left := _processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the stopped server still alive: {left}"
