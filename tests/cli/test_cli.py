"""The CLI as a user runs it: real processes against a real database file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.demo.generator import generate_runs

EXE = [sys.executable, "-m", "app.cli"]


def run_cli(args, db_url, stdin=None):
    env = dict(os.environ, DATABASE_URL=db_url)
    return subprocess.run([*EXE, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def fresh_db(tmp_path):
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_every_command_has_help(fresh_db):
    """`a2annotate --help` as a process; each command's help through the same `cli` in this one
    (Click's runner: the same parsing and output, without an interpreter start of ~1 CPU-s each)."""
    from click.testing import CliRunner

    from app.cli import cli

    r = run_cli(["--help"], fresh_db)
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout
    for cmd in (["db", "upgrade", "--help"], ["import", "--help"], ["import-labels", "--help"],
                ["export", "--help"], ["report", "--help"], ["agreement", "--help"], ["users", "create", "--help"],
                ["tokens", "create", "--help"], ["demo", "--help"], ["serve", "--help"],
                ["taxonomy", "validate", "--help"]):
        assert cmd[0] in r.stdout, cmd  # listed by the top-level help
        res = CliRunner().invoke(cli, cmd, env={"DATABASE_URL": fresh_db})
        assert res.exit_code == 0, (cmd, res.output)
        assert "Usage:" in res.output and f"{cmd[-2]} [OPTIONS]" in res.output, (cmd, res.output)


def test_refuses_out_of_date_schema_with_the_command_to_run(fresh_db):
    r = run_cli(["users", "create", "x", "--role", "admin", "--password-stdin"], fresh_db, stdin="password123\n")
    assert r.returncode == 1
    assert "a2annotate db upgrade" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_upgrade_import_users_tokens(fresh_db, tmp_path):
    assert run_cli(["db", "upgrade"], fresh_db).returncode == 0
    assert run_cli(["db", "upgrade"], fresh_db).returncode == 0  # idempotent
    runs = [d.run for d in generate_runs(5, 1)]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in runs) + "\n{broken\n")
    r = run_cli(["import", str(path)], fresh_db)
    assert r.stdout.strip().splitlines()[-1] == "imported 5, unchanged 0, rejected 1, warnings 0"
    assert r.returncode == 1 and "runs.jsonl:6" in r.stderr
    r = run_cli(["import", str(path)], fresh_db)
    assert r.stdout.strip().splitlines()[-1] == "imported 0, unchanged 5, rejected 1, warnings 0"

    r = run_cli(["users", "create", "dana", "--role", "reviewer", "--password-stdin"], fresh_db, stdin="long-passphrase-7\n")
    assert r.returncode == 0, r.stderr
    r = run_cli(["users", "create", "dana", "--role", "reviewer", "--password-stdin"], fresh_db, stdin="long-passphrase-7\n")
    assert r.returncode == 1 and "already exists" in r.stderr
    r = run_cli(["tokens", "create", "dana"], fresh_db)
    assert r.returncode == 0 and r.stdout.startswith("a2a_")
    r = run_cli(["tokens", "create", "nobody"], fresh_db)
    assert r.returncode == 1 and "no user" in r.stderr


def test_demo_is_idempotent_and_writes_shapes(fresh_db, tmp_path):
    assert run_cli(["db", "upgrade"], fresh_db).returncode == 0
    r = run_cli(["demo", "--runs", "20", "--seed", "4", "--with-users"], fresh_db)
    assert r.returncode == 0, r.stderr
    assert "imported 20" in r.stdout and "alice" in r.stdout
    r = run_cli(["demo", "--runs", "20", "--seed", "4", "--with-users"], fresh_db)
    assert "imported 0, unchanged 20" in r.stdout and "assignments added 0" in r.stdout
    out = tmp_path / "corpus"
    r = run_cli(["demo", "--runs", "3", "--no-db", "--write", str(out)], fresh_db)
    assert r.returncode == 0, r.stderr
    assert (out / "runs.json").exists() and (out / "runs.jsonl").exists() and (out / "tree").is_dir()
    assert Path(out / "wire-1.0.jsonl").exists() and Path(out / "wire-0.3.jsonl").exists()


def test_progress_total_is_counted_up_front(tmp_path):
    from app.cli.imports import estimate_runs
    from app.ingest import writers

    runs = [d.run for d in generate_runs(4, 2)]
    writers.write_jsonl(runs, tmp_path / "a.jsonl")
    writers.write_tree(runs[:3], tmp_path / "tree")
    writers.write_json_array(runs, tmp_path / "b.json")
    assert estimate_runs([str(tmp_path / "a.jsonl"), str(tmp_path / "tree")]) == 7
    assert estimate_runs([str(tmp_path / "b.json")]) is None  # an array is not counted before streaming it


def test_judges_cannot_hold_tokens(fresh_db, tmp_path):
    assert run_cli(["db", "upgrade"], fresh_db).returncode == 0
    runs = [d.run for d in generate_runs(30, 1) if d.run["audits"]][:1]
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(runs[0]) + "\n")
    assert run_cli(["import", str(path)], fresh_db).returncode == 0
    judge = f"judge:{runs[0]['audits'][0]['source']}"
    r = run_cli(["tokens", "create", judge], fresh_db)
    assert r.returncode == 1 and "automated judge" in r.stderr and len(r.stderr.strip().splitlines()) == 1
