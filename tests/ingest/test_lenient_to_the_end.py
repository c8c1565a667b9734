"""Lenient to the end: any number of mode-less checks or audits leaves the run in; notices (kept
verbatim in metadata, no text lost) are not warnings; an unknown JSON file names the readers tried."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.ingest import ReadSummary, iter_path
from app.ingest.lenient import normalize_lenient
from app.ingest.loader import import_paths


def _raw(n_checks: int, n_audits: int) -> dict:
    return {"run_id": "r", "scenario": {"id": "s", "family": "f"}, "principals": [{"id": "p"}],
            "agents": [{"id": "a", "principal": "p"}],
            "events": [{"seq": 0, "kind": "message", "actor": "a", "content": "x"}],
            "checks": [{"source": "h", "check_id": None, "passed": True, "detail": f"c{i}"} for i in range(n_checks)],
            "audits": [{"source": "j", "mode": None, "agent": "a", "note": f"a{i}"} for i in range(n_audits)]}


@pytest.mark.parametrize("n", [1, 3, 7, 40])
def test_any_number_of_mode_less_checks_and_audits_leaves_the_run_in(n):
    run, warnings = normalize_lenient(_raw(n, n), "x")
    assert run["run_id"] == "r" and not run.get("checks") and not run.get("audits")
    assert len(warnings) == 2 * n  # each one reported, none lost
    kept = run["metadata"]["unmapped"]
    assert sum(len(v) if isinstance(v, list) else 1 for v in kept.values()) >= 1


def _tree(root: Path) -> Path:
    (root / "runs" / "r1").mkdir(parents=True)
    (root / "runs" / "r1" / "meta.json").write_text(json.dumps({"id": "r1", "task": "t/1", "fam": "demo",
                                                               "latency_ms": 12}))
    (root / "runs" / "r1" / "chat.jsonl").write_text(
        json.dumps({"who": "agent_a", "said": "hello there", "n": 1}) + "\n"
        + json.dumps({"who": "agent_b", "said": "hi, agent a", "n": 2, "style": "a casual reply"}) + "\n")
    prof = root / "prof.yaml"
    prof.write_text("profile: 1\nname: faithful\nrun_dirs: {marker: [meta.json]}\n"
                    "files: {meta.json: metadata, chat.jsonl: conversation}\n"
                    "keys:\n  metadata: {run_id: id, scenario_id: task, family: fam}\n"
                    "  conversation: {actor: who, content: said}\n"
                    "agents: {from: actors, principal: owner}\n")
    return prof


def test_notices_are_not_warnings_and_text_left_unmapped_is(tmp_path):
    prof = _tree(tmp_path)
    s = ReadSummary()
    (item,) = [i for i in iter_path(tmp_path / "runs", profile=prof, summary=s) if i.run]
    msgs = [w["message"] for w in item.warnings]
    assert any("carry text" in m and "style (1)" in m for m in msgs), msgs  # text nowhere mapped: a warning
    notes = [n["message"] for n in item.notices]
    assert any("n (2)" in m for m in notes) and any("latency_ms" in m for m in notes)
    assert not any("latency_ms" in m or "n (2)" in m for m in msgs)
    assert s.notices == item.notices


def test_strict_accepts_a_faithful_profile_import(engine, tmp_path):
    prof = _tree(tmp_path)
    text = prof.read_text() + "keep: {conversation: [style]}\n"  # kept in metadata on purpose
    prof.write_text(text)
    summary = import_paths(engine, [str(tmp_path / "runs")], profile=str(prof), strict=True)
    assert (summary.imported, summary.rejected, summary.warnings) == (1, 0, []), summary.errors
    assert len(summary.notices) >= 2
    again = import_paths(engine, [str(tmp_path / "runs")], profile=str(prof), strict=True)
    assert (again.imported, again.unchanged) == (0, 1)


def test_unknown_json_is_rejected_naming_the_readers_and_inspect(engine, tmp_path):
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"spans": [{"name": "x"}], "trace_id": "t"}))
    summary = import_paths(engine, [str(p)])
    assert summary.rejected == 1
    msg = summary.errors[0]["message"]
    assert "run_id" not in msg.split("(")[0] and "required field is missing" not in msg
    assert "canonical:" in msg and "otlp:" in msg and "a2annotate inspect" in msg
