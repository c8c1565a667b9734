"""Per-run directory trees: recognised names, aliases, unused-file report, mapping file."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.ingest import iter_path
from app.ingest.readers.tree import MappingError, builtin_role, load_mapping

DATA = Path(__file__).parent / "data"
RELEASE = DATA / "tree_release"
RUN_DIR = "commerce/car-dealer/017/commerce-car-017-r3"


def _ev(seq, ts, kind, actor, recipients, content, data=None, hop=None, metadata=None):
    return {"seq": seq, "ts": ts, "kind": kind, "actor": actor, "recipients": recipients,
            "visibility": "shared" if recipients else "private", "content": content,
            "data": {} if data is None else data, "parent_seq": None, "hop": hop, "metadata": metadata or {}}


EXPECTED_COMMERCE = {
    "run_id": "commerce-car-017-r3",
    "scenario": {"id": "commerce/car-dealer/017", "family": "commerce", "alignment": None,
                 "title": "Used car purchase",
                 "description": "# Used car purchase\n\nBuy the 2019 hatchback for at most $18,500 out the door.\n",
                 "metadata": {}},
    "status": "failed",
    "aggregate_score": 1.0,
    "started_at": "2026-05-01T10:00:00Z",
    "ended_at": "2026-05-01T10:03:12Z",
    "principals": [
        {"id": "dana", "name": "Dana (buyer)", "kind": "person", "objective": "Buy the car for at most $18,500",
         "constraints": ["Do not reveal the budget"],
         "outcome": {"success": False, "score": 0.2, "metrics": {"buyer_surplus_usd": -640.0}}, "metadata": {}},
        {"id": "dealer", "name": "Dealer Inc.", "kind": "organization", "objective": None, "constraints": [],
         "outcome": {"success": None, "score": None, "metrics": {}}, "metadata": {}},
    ],
    "agents": [
        {"id": "buyer_agent", "principal": "dana", "role": "buyer", "model": "model-a", "harness": None,
         "private_state": {"budget_usd": 18500}, "metadata": {}},
        {"id": "seller_agent", "principal": "dealer", "role": "seller", "model": "model-b", "harness": None,
         "private_state": {}, "metadata": {"temperature": 0.2}},
    ],
    # seqs by timestamp across conversation.jsonl, trajectory_buyer.jsonl, trajectories/seller_agent.jsonl;
    # the unreferenced artifacts/contract.txt is appended last
    "events": [
        _ev(0, "2026-05-01T10:00:01Z", "message", "buyer_agent", ["seller_agent"],
            "Is the hatchback still available?", hop=1),
        _ev(1, "2026-05-01T10:00:03Z", "tool_call", "buyer_agent", [], "search_listings(model='hatchback')",
            data={"tool": "search_listings"}),
        _ev(2, "2026-05-01T10:00:04Z", "tool_result", "seller_agent", [], '{"hatchback": 1}',
            data={"tool": "inventory"}),
        _ev(3, "2026-05-01T10:00:05Z", "message", "seller_agent", ["buyer_agent"], "Yes — $19,900."),
        _ev(4, "2026-05-01T10:00:07Z", "log", "buyer_agent", [], "Budget is 18,500; offer lower.", hop=2,
            metadata={"type": "thought"}),
        _ev(5, "2026-05-01T10:00:09Z", "message", "buyer_agent", ["seller_agent"], "Deal at $18,400?",
            metadata={"tokens": 12}),
        _ev(6, None, "artifact", "system", [], "Contract draft ✓\n",
            data={"path": "artifacts/contract.txt", "size": 19, "media_type": "text/plain"}),
    ],
    "audits": [  # files in name order: judgments_l2.jsonl, l0.json, l1.json
        {"source": "judge-gpt", "level": "L2", "mode": "VF1", "agent": "buyer_agent", "evidence": [5],
         "note": "Offered without approval", "metadata": {}},
        {"source": "l0", "level": "L0", "mode": "DD1", "agent": None, "evidence": [0], "note": None, "metadata": {}},
        {"source": "l1-rules", "level": "L1", "mode": "GR2", "agent": "seller_agent", "evidence": [4], "note": None,
         "metadata": {}},
    ],
    "metadata": {"harness_version": "0.9.1", "metrics": {"turns": 3},
                 "hops": [{"hop": 3, "note": "handoff to finance"}], "harness_logs": ["harness.log"]},
}


def test_release_tree_reads_as_hand_worked():
    items = list(iter_path(RELEASE))
    runs = [i.run for i in items if i.run]
    assert runs[0] == EXPECTED_COMMERCE
    assert [r["run_id"] for r in runs] == ["commerce-car-017-r3", "legal-nda-001"]


def test_release_tree_reports_every_unused_file():
    unused = sorted(u for i in iter_path(RELEASE) for u in i.unused_files)
    assert unused == [f"{RELEASE}/README.md", f"{RELEASE}/{RUN_DIR}/notes.txt",
                      f"{RELEASE}/{RUN_DIR}/screenshot.png"]


def test_a_problem_in_a_run_dir_is_a_warning_naming_file_and_line_and_the_run_is_kept():
    items = list(iter_path(RELEASE))
    assert [i.error for i in items if i.error] == []
    (legal,) = [i for i in items if i.run and i.run["run_id"] == "legal-nda-001"]
    path = f"{RELEASE}/legal/nda/001/legal-nda-001/conversation.jsonl"
    (w,) = legal.warnings
    assert (w["location"], w["field"], w["run_id"]) == (f"{path}:2", "events[1].actor", "legal-nda-001")
    assert w["message"].startswith("'mallory' is not an agent id, a principal id or 'system'")
    ev = legal.run["events"][1]
    assert ev["actor"] == "system" and ev["metadata"]["original_actor"] == "mallory"
    commerce = next(i for i in items if i.run and i.run["run_id"] == "commerce-car-017-r3")
    assert commerce.warnings == []


def test_bad_json_inside_a_run_dir(tmp_path):
    shutil.copytree(RELEASE / RUN_DIR, tmp_path / "r")
    with open(tmp_path / "r" / "conversation.jsonl", "a", encoding="utf-8") as f:
        f.write("{broken\n")
    (item,) = [i for i in iter_path(tmp_path) if i.error or i.run]
    assert item.error.where.file == f"{tmp_path}/r/conversation.jsonl" and item.error.where.line == 5


def test_a_single_run_dir_as_root_and_run_id_from_dir_name(tmp_path):
    d = tmp_path / "fam" / "task" / "run-77"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"status": "timeout"}), encoding="utf-8")
    (d / "agents.json").write_text(json.dumps([{"id": "x"}]), encoding="utf-8")
    (d / "events.jsonl").write_text(json.dumps({"kind": "log", "actor": "x", "content": "hello"}) + "\n",
                                    encoding="utf-8")
    (run,) = [i.run for i in iter_path(tmp_path)]
    assert (run["run_id"], run["status"], run["scenario"]["id"], run["scenario"]["family"]) == \
        ("run-77", "timeout", "fam/task", "fam")
    (alone,) = list(iter_path(d))  # the run dir itself as root: no path is left to supply the scenario
    assert alone.run["scenario"]["id"] == "unknown"
    assert [w["field"] for w in alone.warnings] == ["scenario"]


def test_run_dir_without_events_cannot_be_a_run(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "solo"}), encoding="utf-8")
    (item,) = list(iter_path(tmp_path))
    assert item.error.field == "events" and item.error.run_id == "solo"
    assert "no events" in item.error.message


def test_metadata_files_merge_and_clashes_are_kept(tmp_path):
    d = tmp_path / "f" / "s" / "r"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": "r", "status": "failed", "metadata": {"a": 1}}), "utf-8")
    (d / "metadata.json").write_text(json.dumps({"status": "completed", "seed": 4, "metadata": {"b": 2}}), "utf-8")
    (d / "events.jsonl").write_text(json.dumps({"kind": "log", "actor": "system"}) + "\n", "utf-8")
    (run,) = [i.run for i in iter_path(tmp_path)]
    assert run["status"] == "failed"
    assert run["metadata"] == {"a": 1, "b": 2, "seed": 4,
                               "conflicting_metadata": {"metadata.json": {"status": "completed"}}}


def test_mapping_file_names_other_files():
    root = DATA / "tree_custom"
    items = list(iter_path(root, mapping=root / "mapping.yaml"))
    (run,) = [i.run for i in items if i.run]
    assert run["run_id"] == "exp-42"
    assert run["scenario"] == {"id": "crm/lead/42", "family": "crm", "alignment": "mixed", "title": None,
                               "description": None, "metadata": {}}
    assert [(e["seq"], e["kind"], e["actor"], e["recipients"], e["visibility"], e["content"], e["ts"])
            for e in run["events"]] == [
        (0, "message", "alice", ["bob"], "shared", "Hi Bob", "2026-05-04T08:00:00Z"),
        (1, "tool_call", "alice", [], "private", 'crm.lookup("bob")', "2026-05-04T08:00:01Z"),
        (2, "message", "bob", ["alice"], "shared", "Hi", "2026-05-04T08:00:02Z"),
    ]
    assert run["audits"] == [{"source": "judge", "level": "L2", "mode": "CF2", "agent": None, "evidence": [1],
                              "note": None, "metadata": {}}]
    # tmp/* is ignored on purpose and the mapping file itself is not data: only extra.bin is unused
    assert [u for i in items for u in i.unused_files] == [f"{root}/exp-42/extra.bin"]


def test_without_the_mapping_the_inferred_profile_reads_the_same_run():
    root = DATA / "tree_custom"
    with_mapping = [i.run for i in iter_path(root, mapping=root / "mapping.yaml") if i.run]
    (run,) = [i.run for i in iter_path(root) if i.run]
    assert run["run_id"] == "exp-42" and run["scenario"] == with_mapping[0]["scenario"]
    assert [(e["kind"], e["actor"], e["recipients"], e["content"]) for e in run["events"]] == \
        [(e["kind"], e["actor"], e["recipients"], e["content"]) for e in with_mapping[0]["events"]]
    assert run["audits"] == with_mapping[0]["audits"]


def test_mapping_validation(tmp_path):
    with pytest.raises(MappingError, match="unknown role"):
        load_mapping({"*.txt": "transcript"})
    bad = tmp_path / "m.yaml"
    bad.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(MappingError, match="glob: role"):
        load_mapping(bad)
    m = load_mapping({"files": {"logs/*.out": "log", "x.json": "trajectory:alice", "j.json": "audits:L1"}})
    assert m.role_of("logs/a.out") == ("log", None)
    assert m.role_of("sub/x.json") == ("trajectory", "alice")
    assert m.role_of("j.json") == ("audits", "L1")


@pytest.mark.parametrize("rel, role", [
    ("run.json", ("metadata", None)), ("run_metadata.json", ("metadata", None)),
    ("task.md", ("scenario_text", None)), ("messages.jsonl", ("conversation", None)),
    ("trajectories/seller.jsonl", ("trajectory", "seller")), ("trajectory_buyer.json", ("trajectory", "buyer")),
    ("logs/harness.log", ("log", None)), ("artifacts/a/b.bin", ("artifact", None)),
    ("L0.json", ("audits", "L0")), ("audits/l1.jsonl", ("audits", "L1")), ("l2_judge.jsonl", ("audits", "L2")),
    ("judgments.json", ("audits", "L2")), ("audit_results.json", ("audits", None)),
    ("outcome.json", ("metrics", None)), ("sub/run.json", None), ("notes.txt", None),
])
def test_builtin_names(rel, role):
    assert builtin_role(rel) == role
