"""`a2annotate taxonomy validate` and `a2annotate taxonomy list`."""
from __future__ import annotations

from click.testing import CliRunner

from app.cli import cli
from app.core.config import get_settings


def test_validate_good_and_bad_files(tmp_path):
    runner = CliRunner()
    good = get_settings().taxonomy_dir / "a2-failures.yaml"
    res = runner.invoke(cli, ["taxonomy", "validate", str(good)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"{good}: ok (a2-failures, 20 modes in 4 categories)"
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nkey: Bad Key\n", encoding="utf-8")
    res = runner.invoke(cli, ["taxonomy", "validate", str(good), str(bad)])
    assert res.exit_code == 1
    assert f"{bad}: modes: required field is missing" in res.output
    assert "Error: 1 of 2 file(s) invalid" in res.output


def test_list_shows_every_version(engine, monkeypatch):
    import app.cli.taxonomy as tax_cli

    monkeypatch.setattr(tax_cli, "checked_engine", lambda: engine)
    res = CliRunner().invoke(cli, ["taxonomy", "list"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert any(line.startswith("a2-failures@1 ") and " 20 modes " in line for line in lines)
    assert any(line.startswith("mast@1 ") and " 14 modes " in line for line in lines)
