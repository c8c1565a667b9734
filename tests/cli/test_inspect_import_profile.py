"""`a2annotate inspect` and `import --profile/--strict/--report` as a user runs them."""
from __future__ import annotations

import json

from tests.cli.test_cli import run_cli
from tests.ingest.release_fixtures import build_release


def test_inspect_write_profile_import_report_strict(tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run_cli(["db", "upgrade"], db).returncode == 0
    info = build_release(tmp_path / "release", n_runs=2)
    prof = tmp_path / "profile.yaml"
    r = run_cli(["inspect", str(info["root"]), "--write-profile", str(prof)], db)
    assert r.returncode == 0, r.stderr
    assert "run directories: 2" in r.stdout and "conversation.jsonl: conversation" in r.stdout
    assert prof.read_text().startswith("# Import profile written by")

    strict = run_cli(["import", str(info["root"]), "--profile", str(prof), "--strict"], db)
    assert strict.returncode == 1
    assert strict.stdout.strip().splitlines()[-1] == "imported 0, unchanged 0, rejected 2, warnings 0"
    assert strict.stderr.count("rejected: ") >= 3 and "(strict)" in strict.stderr
    # what was kept verbatim with no text lost is a notice, never a reason to reject
    assert "no text lost" not in strict.stderr.split("notice(s)")[0] and "notice(s): kept verbatim" in strict.stderr

    report = tmp_path / "report.jsonl"
    r = run_cli(["import", str(info["root"]), "--profile", str(prof), "--report", str(report)], db)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("imported 2, unchanged 0, rejected 0, warnings ")
    n_warn = int(last.rsplit(" ", 1)[1])
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    assert sum(1 for x in lines if x["type"] == "warning") == n_warn > 0
    assert [x["path"] for x in lines if x["type"] == "unused_file"] == info["unused"]
    assert {"type": "unknown_mode", "mode": "sycophantic capitulation", "count": 1} in lines
    assert "modes matching nothing in the taxonomy (kept" in r.stderr and "'sycophantic capitulation' (1)" in r.stderr

    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: 1\nname: x\nkeys: {conversation: {sender: from}}\n")
    r = run_cli(["import", str(info["root"]), "--profile", str(bad)], db)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "keys.conversation.sender: unknown key" in r.stderr
    assert run_cli(["inspect", "--help"], db).returncode == 0


def test_inspect_a_zip_and_a_single_file(tmp_path):
    import zipfile

    from click.testing import CliRunner

    from app.cli import cli as main
    from app.ingest.profile import load_profile
    from tests.ingest.release_fixtures import build_episodes

    info = build_episodes(tmp_path / "ep", n_runs=2)
    archive = tmp_path / "ep.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for p in sorted(info["root"].rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(info["root"]).as_posix())
    prof = tmp_path / "p.yaml"
    r = CliRunner().invoke(main, ["inspect", str(archive), "--write-profile", str(prof)])
    assert r.exit_code == 0, r.output
    assert f"inspected {archive}" in r.output and "run directories: 2" in r.output
    assert load_profile(prof).spec["keys"]["conversation"]["actor"] == "who"
    one = info["root"] / "ep-000-renewal" / "header.json"
    r = CliRunner().invoke(main, ["inspect", str(one)])
    # a single file is dry-run: the reader the registry picks, every reader's reason, what import would do
    assert r.exit_code == 0 and f"{one}: read by 'canonical' (JSON records with canonical keys (agents) but no run_id)" in r.output
    assert "import would store: 0 run(s), reject 1" in r.output and "whowhen: 0.00 " in r.output
