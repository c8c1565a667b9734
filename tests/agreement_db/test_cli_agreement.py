"""`a2annotate agreement`: the table and the JSON on the hand-built set (both backends)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import Session

import app.cli.agreement as cli_agreement
from app.cli import cli

from . import _hand


@pytest.fixture
def run_cli(engine, monkeypatch):
    with Session(engine) as s:
        _hand.build(s)
    monkeypatch.setattr(cli_agreement, "checked_engine", lambda: engine)

    def run(*args: str):
        return CliRunner().invoke(cli, ["agreement", *args])

    return run


def test_json_and_table(run_cli):
    r = run_cli("--json", "--n-boot", "30", "--seed", "2")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    cf1 = next(m for m in rep["modes"] if m["mode"] == "CF1")
    assert cf1["fleiss_kappa"]["value"] == pytest.approx(0.625)
    assert cf1["gwet_ac1"]["value"] == pytest.approx(0.7)
    assert len(cf1["krippendorff_alpha"]["ci"]) == 2
    assert rep["annotators"] == ["a", "b", "c"] and rep["gold"]["n_reference_runs"] == 0
    r = run_cli("--json", "--n-boot", "0", "--include-judges", "--level", "agent")
    rep = json.loads(r.output)
    assert rep["level"] == "agent" and "judge:judge-l2" in rep["annotators"]

    r = run_cli("--n-boot", "30")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    head = next(line for line in lines if line.startswith("mode"))
    for col in ("category", "n", "prevalence", "percent", "kappa (Cohen)", "kappa (Fleiss)", "alpha", "AC1", "flag"):
        assert col in head
    cf1_line = next(line for line in lines if line.startswith("CF1"))
    assert "36.4%" in cf1_line and "0.625 [" in cf1_line and "0.700 [" in cf1_line and "0.833 [" in cf1_line
    dd1_line = next(line for line in lines if line.startswith("DD1"))
    assert "n/a" in dd1_line  # nobody marked DD1: kappa undefined
    assert any(line.startswith("ALL") for line in lines)
    assert "Blame agreement: 50.0% of 4" in r.output
    assert "Agreement with gold: no run is adjudicated yet." in r.output


def test_bad_parameters_fail_with_one_line(run_cli):
    r = run_cli("--taxonomy", "nope@4")
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1].startswith("Error: taxonomy: unknown taxonomy")
    r = run_cli("--annotators", "a,zed")
    assert r.exit_code == 1 and "annotators: unknown annotator 'zed'" in r.output
    r = run_cli("--level", "unit")
    assert r.exit_code == 2
