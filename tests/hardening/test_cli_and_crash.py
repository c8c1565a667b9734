"""The CLI against hostile files (real processes), and kill -9 in the middle of an import."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import text

from tests.hardening import hostile

EXE = [sys.executable, "-m", "app.cli"]


def _cli(args, db_url, **kw):
    env = dict(os.environ, DATABASE_URL=db_url)
    return subprocess.run([*EXE, *args], capture_output=True, text=True, env=env, timeout=120, **kw)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cli_rejects_hostile_files_in_one_line_each_and_imports_the_rest(engine, db_url, tmp_path):
    files = {
        "long-int.json": hostile.long_int_object(5000),  # segfaulted the process (exit 139)
        "deep.jsonl": hostile.deep_run_jsonl_line(50_000),  # bare RecursionError, rest dropped
        "deep-array.json": hostile.deep_array(20_000),  # ~1 GB in ijson.items
        "good.jsonl": "\n".join(json.dumps(hostile.run(f"good-{i}")) for i in range(2)).encode(),
    }
    paths = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    r = _cli(["import", *paths], db_url)
    assert r.returncode == 1, (r.returncode, r.stderr[-800:])  # 1: some runs rejected; not -11 / 139
    assert "Traceback" not in r.stderr
    assert r.stdout.strip().splitlines()[-1] == "imported 2, unchanged 0, rejected 3, warnings 0"
    rejected = [ln for ln in r.stderr.splitlines() if ln.startswith("rejected: ")]
    assert len(rejected) == 3
    assert any("long-int.json" in ln and "field metadata.n" in ln and "MAX_INT_DIGITS" in ln for ln in rejected)
    assert any("deep.jsonl:1" in ln and "MAX_JSON_DEPTH" in ln for ln in rejected)
    assert any("deep-array.json:1:[0]" in ln and "MAX_JSON_DEPTH" in ln for ln in rejected)
    assert all(len(ln) < 600 for ln in rejected)


N_RUNS = 2000


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_kill_9_mid_import_leaves_whole_runs_and_reimport_is_exact(engine, db_url, tmp_path):
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(json.dumps(hostile.run(f"k-{i:05d}", 2)) for i in range(N_RUNS)) + "\n")
    env = dict(os.environ, DATABASE_URL=db_url)
    proc = subprocess.Popen([*EXE, "import", str(src)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    committed = 0
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            with engine.connect() as c:
                committed = c.execute(text("SELECT count(*) FROM run")).scalar_one()
            if committed >= 200:
                break
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, "the import finished before it could be killed"
    with engine.connect() as c:
        if engine.dialect.name == "sqlite":
            assert c.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
            assert c.execute(text("PRAGMA foreign_key_check")).fetchall() == []
        stored = c.execute(text("SELECT count(*) FROM run")).scalar_one()
        half = c.execute(text("SELECT count(*) FROM run r WHERE r.n_events != "
                              "(SELECT count(*) FROM event e WHERE e.run_pk = r.id)")).scalar_one()
    assert 0 < stored < N_RUNS and half == 0
    r = _cli(["import", str(src)], db_url)
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.strip().splitlines()[-1] == f"imported {N_RUNS - stored}, unchanged {stored}, rejected 0, warnings 0"
    with engine.connect() as c:
        total, distinct = c.execute(text("SELECT count(*), count(DISTINCT run_id) FROM run")).one()
        events = c.execute(text("SELECT count(*) FROM event")).scalar_one()
    assert total == distinct == N_RUNS and events == 2 * N_RUNS


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cli_import_labels_hostile_rows_are_one_line_rejections(engine, db_url, tmp_path):
    (tmp_path / "runs.jsonl").write_text(json.dumps(hostile.run("lab-1")) + "\n")
    assert _cli(["import", str(tmp_path / "runs.jsonl")], db_url).returncode == 0
    jl = tmp_path / "labels.jsonl"
    jl.write_bytes(b'{"annotator": "judge:a", "run_id": "lab-1", "mode": "none", "confidence": ' + b"9" * 5000 + b"}\n"
                   + b'{"annotator": "judge:b", "run_id": "lab-1", "mode": "none", "note": ' + hostile.deep(50_000) + b"}\n"
                   + b'{"annotator": "judge:c", "run_id": "lab-1", "mode": "none"}\n')
    csv = tmp_path / "labels.csv"
    csv.write_bytes(b"annotator,run_id,mode,note\njudge:d,lab-1,none," + b"n" * 200_000 + b"\n")
    r = _cli(["import-labels", str(jl), str(csv)], db_url)
    assert "Traceback" not in r.stderr and r.returncode == 1, r.stderr[-800:]
    assert r.stdout.strip().splitlines()[-1] == "imported 2 annotations, rejected 2"
    rejected = [ln for ln in r.stderr.splitlines() if ln.startswith("rejected: ")]
    assert len(rejected) == 2 and all(len(ln) < 600 for ln in rejected)
    assert any(f"{jl}:1" in ln and "MAX_INT_DIGITS" in ln for ln in rejected)
    assert any(f"{jl}:2" in ln and "MAX_JSON_DEPTH" in ln for ln in rejected)
