"""The LangSmith / LangGraph, CrewAI and ADK fixtures through `a2annotate import` under --strict
(their detection and --format runs are in test_cli_import.py's table)."""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent.parent / "data" / "frameworks"
def test_strict_takes_a_faithful_adk_log_and_refuses_one_with_unmapped_text(run_cli):
    ok = run_cli("import", "--strict", DATA / "adk" / "quay_events.jsonl")
    assert ok.exit_code == 0 and ok.output.strip().splitlines()[-1].startswith("imported 1, unchanged 0, rejected 0")
    bad = run_cli("import", "--strict", DATA / "adk" / "kestrel_session.json")
    assert bad.exit_code == 1 and "custom_metadata" in bad.output
