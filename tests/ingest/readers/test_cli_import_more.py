"""The LangSmith / LangGraph, CrewAI and ADK fixtures through `a2annotate import`: the registry
picks the reader by sniffing (no --format), and --format naming it reads the same runs; a faithful
log imports under --strict."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.ingest.registry import registry

DATA = Path(__file__).parent.parent / "data" / "frameworks"
CASES = [  # path, reader, runs, warnings
    ("langsmith/orchard_tree.json", "langsmith", 1, 1),
    ("langsmith/orchard_runs.jsonl", "langsmith", 1, 1),
    ("crewai/tidepool_events.jsonl", "crewai", 1, 1),
    ("crewai/estuary_crew_output.json", "crewai", 1, 1),
    ("crewai/dune_output_log.json", "crewai", 1, 0),
    ("adk/kestrel_session.json", "adk", 1, 1),
    ("adk/quay_events.jsonl", "adk", 1, 0),
]


@pytest.mark.parametrize("rel, reader, runs, warnings", CASES)
def test_import_picks_the_framework_reader(run_cli, rel, reader, runs, warnings):
    path = DATA / rel
    assert registry().pick(path).name == reader
    res = run_cli("import", path)
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == f"imported {runs}, unchanged 0, rejected 0, warnings {warnings}"
    again = run_cli("import", "--format", reader, path)
    assert again.output.strip().splitlines()[-1] == f"imported 0, unchanged {runs}, rejected 0, warnings {warnings}"


def test_strict_takes_a_faithful_adk_log_and_refuses_one_with_unmapped_text(run_cli):
    ok = run_cli("import", "--strict", DATA / "adk" / "quay_events.jsonl")
    assert ok.exit_code == 0 and ok.output.strip().splitlines()[-1].startswith("imported 1, unchanged 0, rejected 0")
    bad = run_cli("import", "--strict", DATA / "adk" / "kestrel_session.json")
    assert bad.exit_code == 1 and "custom_metadata" in bad.output
