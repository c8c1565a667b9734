"""Each framework fixture imports through `a2annotate import` with the reader the registry picks
by sniffing (no --format), and again, unchanged, with --format naming that reader."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.ingest.registry import registry

DATA = Path(__file__).parent / "data"
CASES = [  # path, reader, runs, warnings
    ("tau_bench/ferry-gpt-x.json", "tau-bench", 3, 2),
    ("tau2_bench/json/parcel_desk-model-9_2trials.json", "tau2-bench", 2, 1),
    ("tau2_bench/dir_storage", "tau2-bench", 1, 0),
    ("openai_agents/library-desk-export.json", "openai-agents", 2, 1),
    ("autogen/greenhouse-swarm.json", "autogen", 1, 2),
    ("autogen/notice-stream.jsonl", "autogen", 1, 0),
    ("ag2/bridge-archive-chat.json", "ag2", 1, 1),
    ("smolagents/pier7-tide-run.json", "smolagents", 1, 1),
    # the LangSmith / LangGraph, CrewAI and ADK fixtures (tests/ingest/data/frameworks)
    ("../../data/frameworks/langsmith/orchard_tree.json", "langsmith", 1, 1),
    ("../../data/frameworks/langsmith/orchard_runs.jsonl", "langsmith", 1, 1),
    ("../../data/frameworks/crewai/tidepool_events.jsonl", "crewai", 1, 1),
    ("../../data/frameworks/crewai/estuary_crew_output.json", "crewai", 1, 1),
    ("../../data/frameworks/crewai/dune_output_log.json", "crewai", 1, 0),
    ("../../data/frameworks/adk/kestrel_session.json", "adk", 1, 1),
    ("../../data/frameworks/adk/quay_events.jsonl", "adk", 1, 0),
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
