"""QA regressions for the command line (interfaces.md): failures exit non-zero with ONE line,
`import` ends with exactly `imported N, unchanged M, rejected K, warnings W`."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from app.ingest import iter_path
from app.ingest.loader import ImportSummary
from tests.annotations.factories import raw_run

EXE = [sys.executable, "-m", "app.cli"]


def run_cli(args, db_url, stdin=None):
    env = dict(os.environ, DATABASE_URL=db_url)
    return subprocess.run([*EXE, *args], check=False, input=stdin, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('qa-cli') / 'cli.db'}"
    assert run_cli(["db", "upgrade"], url).returncode == 0
    return url


@pytest.mark.parametrize("args", [
    ["report", "--by", "nonsense"],
    ["agreement", "--level", "nonsense"],
    ["agreement", "--seed", "-1"],
    ["import", "/nonexistent/runs.jsonl"],
    ["import"],
    ["export", "--format", "xml", "--out", "x"],
    ["users", "create", "x", "--role", "superuser"],
    ["report", "--blind-spots", "--crossplay", "model"],
    ["no-such-command"],
    ["serve", "--port", "99999"],
])
def test_usage_errors_are_one_line_with_status_2(cli_db, args):
    r = run_cli(args, cli_db)
    assert r.returncode == 2, (args, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "--help" in lines[0], r.stderr
    assert r.stdout == ""


def test_a_bare_group_still_prints_its_help(cli_db):
    r = run_cli(["db"], cli_db)
    assert "Usage:" in r.stdout + r.stderr and "upgrade" in r.stdout + r.stderr


def test_serve_on_a_busy_port_fails_in_one_line(cli_db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        r = run_cli(["serve", "--port", str(port)], cli_db)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"Error: cannot listen on 127.0.0.1:{port}: Address already in use"]


def test_replace_keeps_the_summary_line_exact(cli_db, tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(raw_run("qa-rep")) + "\n")
    assert run_cli(["import", str(path)], cli_db).stdout.strip() == "imported 1, unchanged 0, rejected 0, warnings 0"
    changed = raw_run("qa-rep")
    changed["aggregate_score"] = 0.25
    path.write_text(json.dumps(changed) + "\n")
    r = run_cli(["import", "--replace", str(path)], cli_db)
    assert r.returncode == 0
    assert r.stdout.strip().splitlines()[-1] == "imported 1, unchanged 0, rejected 0, warnings 0"
    assert "1 of the imported runs replaced" in r.stderr
    assert ImportSummary(imported=2, unchanged=1, replaced=2, rejected=3).line() == \
        "imported 2, unchanged 1, rejected 3, warnings 0"


def test_forcing_wire_on_a_non_wire_file_creates_no_phantom_run(cli_db, tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(raw_run("qa-not-wire")) + "\n")
    items = list(iter_path(str(path), format="wire"))
    assert [i.run for i in items if i.run] == []
    assert len(items) == 1 and "not an A2A wire record" in items[0].error.message
    assert items[0].error.where.line == 1
    r = run_cli(["import", "--format", "wire", str(path)], cli_db)
    assert r.returncode == 1
    assert r.stdout.strip() == "imported 0, unchanged 0, rejected 1, warnings 0"
    assert "runs.jsonl:1: not an A2A wire record" in r.stderr


def test_users_create_refuses_a_name_longer_than_the_column(cli_db):
    r = run_cli(["users", "create", "u" * 201, "--role", "annotator", "--password-stdin"], cli_db,
                stdin="longpassword\n")
    assert r.returncode == 1
    assert r.stderr.strip() == "Error: username must have at most 200 characters, got 201"
