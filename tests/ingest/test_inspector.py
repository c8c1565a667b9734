"""The inspector tells the truth: it dry-runs the import, reports what it sampled (never "none" for
what it did not look at), picks among profiles by fewest warnings, names the readers a loose file
defeats, and writes suggestions that, accepted, import every run faithfully."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.ingest import ReadSummary, iter_path
from app.ingest.inspect import MARK, inspect_tree, profile_text, render
from app.ingest.loader import import_paths
from tests.ingest.release_fixtures import build_episodes, build_release
from tests.ingest.test_profile_language import _tree as chat_tree


def _accept(text: str) -> str:
    return "\n".join(line[len(MARK):] if line.startswith(MARK) else line for line in text.splitlines()) + "\n"


def _read(root: Path, profile) -> ReadSummary:
    s = ReadSummary()
    list(iter_path(root, profile=profile, summary=s))
    return s


@pytest.fixture(scope="module")
def familiar_names(tmp_path_factory):
    """A release-style tree whose metadata file is named like ours (run.json) but whose keys are not."""
    root = tmp_path_factory.mktemp("familiar") / "release"
    info = build_release(root, n_runs=3)
    for meta in root.rglob("run_meta.json"):
        meta.rename(meta.with_name("run.json"))
    return info


def test_familiar_file_name_unfamiliar_keys_picks_the_profile_with_fewest_warnings(familiar_names):
    root = familiar_names["root"]
    ins = inspect_tree(root)
    text = render(ins)
    builtin, inferred = ins.candidates
    assert builtin[0].startswith("a2annotate") and inferred[3] < builtin[3]  # built-in: many more warnings
    assert "chose inferred-" in text and not ins.builtin
    # every file role was sampled: its keys are listed with counts; unmapped ones with an example
    assert "run.json: metadata" in text and "unmapped harness: e.g. 'contract-arena 2.1'" in text
    assert "keys: status (" in text
    assert "none of the" in text and ": none\n" not in text + "\n"
    # the trajectory files keep their own agents (no single `trajectory:<last file>`)
    assert "trajectories/*.jsonl: trajectory," in text
    assert "warnings the import would raise" in text


def test_builtin_names_are_sampled_too_and_trajectories_keep_their_agents(tmp_path):
    from app.demo.generator import generate_runs
    from app.ingest import write_tree

    write_tree([d.run for d in generate_runs(2, 7)], tmp_path)
    ins = inspect_tree(tmp_path)
    assert ins.builtin and ins.choice.startswith("chose a2annotate")
    assert all(g.keys for g in ins.groups.values() if g.pattern.endswith((".json", ".jsonl")))
    traj = [g for g in ins.groups.values() if g.role == "trajectory"]
    assert traj and all(g.param is None for g in traj if g.files > 1)


def test_suggestions_accepted_import_every_run_without_text_warnings(familiar_names, tmp_path):
    root = familiar_names["root"]
    ins = inspect_tree(root)
    starter = profile_text(ins)
    assert f"{MARK}keep:" in starter  # the harness text: kept on purpose once accepted
    plain, accepted = tmp_path / "starter.yaml", tmp_path / "accepted.yaml"
    plain.write_text(starter)
    accepted.write_text(_accept(starter))
    before, after = _read(root, plain), _read(root, accepted)
    assert before.runs == after.runs == len(familiar_names["runs"]) and not after.errors
    assert any("carry text" in w["message"] for w in before.warnings)
    # what is left is the fixture's deliberately unknown judge mode, nothing else
    assert after.warnings and all("matches nothing in the taxonomy" in w["message"] for w in after.warnings)


def test_a_chat_log_with_tool_calls_imports_faithfully_under_strict_once_suggestions_are_accepted(engine, tmp_path):
    chat_tree(tmp_path)
    (tmp_path / "profile.yaml").unlink()  # start from nothing but the logs
    ins = inspect_tree(tmp_path / "runs")
    text = render(ins)
    assert "suggest call_id: 'tool_call_id'" in text and "suggest agents: {from: actors}" in text
    prof = tmp_path / "starter.yaml"
    prof.write_text(_accept(profile_text(ins)))
    s = _read(tmp_path / "runs", prof)
    assert (s.runs, s.errors, s.warnings) == (1, [], [])
    summary = import_paths(engine, [str(tmp_path / "runs")], profile=str(prof), strict=True)
    assert (summary.imported, summary.rejected) == (1, 0), summary.errors
    (item,) = list(iter_path(tmp_path / "runs", profile=prof))
    ev = item.run["events"]
    assert [e["kind"] for e in ev] == ["message", "message", "tool_call", "tool_result", "message"]
    assert ev[3]["parent_seq"] == 2 and item.run["scenario"]["id"] == "shop/7"
    assert "system" not in {e["actor"] for e in ev}


def test_a_folder_with_no_run_directories_names_the_readers_tried(tmp_path):
    (tmp_path / "trace.json").write_text(json.dumps({"spans": [{"name": "x"}]}))
    (tmp_path / "notes.md").write_text("# notes\n")
    text = render(inspect_tree(tmp_path))
    assert "no run directories found: no file was sampled for keys" in text
    line = next(ln for ln in text.splitlines() if "trace.json: no reader takes it: " in ln)
    assert "canonical: JSON, but its records have no canonical key" in line
    assert "otlp: JSON without resourceSpans" in text
    assert "files no role takes" not in text  # nothing was looked at, so nothing is claimed


def test_the_episodes_layout_starter_profile_accepted_imports_under_strict(engine, tmp_path):
    info = build_episodes(tmp_path / "ep", n_runs=3)
    ins = inspect_tree(info["root"])
    prof = tmp_path / "p.yaml"
    prof.write_text(_accept(profile_text(ins)))
    summary = import_paths(engine, [str(info["root"])], profile=str(prof), strict=True)
    assert (summary.imported, summary.rejected) == (3, 0), summary.errors[:3]
    shutil.rmtree(tmp_path / "ep")


# --------------------------------------------------------------------------- families that differ in shape

def _family_tree(root: Path, n_first: int = 2) -> Path:
    """Two families whose chat files name the speaker and the text differently: `aaa` (n_first runs,
    `sender` / `text`) and `zzz` (one run, `speaker` / `body`), each run with a marker file."""
    shapes = {"aaa": ("sender", "text", n_first), "zzz": ("speaker", "body", 1)}
    for fam, (who_key, text_key, n) in shapes.items():
        for i in range(n):
            d = root / fam / "t1" / f"r{i:02d}"
            d.mkdir(parents=True)
            (d / "meta.json").write_text(json.dumps({"episode": f"{fam}-{i}"}))
            (d / "chat.jsonl").write_text("".join(
                json.dumps({who_key: who, text_key: f"{who} says {j}", "n": j}) + "\n"
                for j, who in enumerate(("customer", "agent"))))
    return root


@pytest.mark.parametrize("n_first", [2, 30])  # 30: the second family lies beyond the sampled runs
def test_inspect_proposes_a_block_per_family_whose_files_differ_and_accepted_it_imports(tmp_path, n_first):
    root = _family_tree(tmp_path / "fam", n_first)
    ins = inspect_tree(root)
    assert ins.family_shapes == [("chat.jsonl", "conversation",
                                  {"aaa": ["sender", "text"], "zzz": ["body", "speaker"]})]
    report = render(ins)
    assert "families whose files differ in shape" in report and "zzz: body, speaker" in report
    starter = profile_text(ins)
    assert f"{MARK}blocks:" in starter and f'{MARK}  - when: {{family: "zzz"}}' in starter
    accepted = tmp_path / "p.yaml"
    accepted.write_text(_accept(starter))
    import yaml

    blocks = yaml.safe_load(accepted.read_text())["blocks"]
    assert blocks == [{"when": {"family": "aaa"}, "keys": {"conversation": {"actor": "sender", "content": "text"}}},
                      {"when": {"family": "zzz"}, "keys": {"conversation": {"actor": "speaker", "content": "body"}}}]
    runs = [i.run for i in iter_path(root, profile=accepted) if i.run]
    assert len(runs) == n_first + 1
    for run in runs:
        msgs = [e for e in run["events"] if e["kind"] == "message"]
        assert [e["actor"] for e in msgs] == ["customer", "agent"], run["run_id"]
        assert [e["content"] for e in msgs] == ["customer says 0", "agent says 1"]


def test_no_block_is_proposed_when_the_families_files_have_one_shape(tmp_path):
    root = tmp_path / "same"
    for fam in ("aaa", "zzz"):
        d = root / fam / "t1" / "r1"
        d.mkdir(parents=True)
        (d / "meta.json").write_text(json.dumps({"episode": fam}))
        (d / "chat.jsonl").write_text(json.dumps({"sender": "customer", "text": "hi"}) + "\n")
    ins = inspect_tree(root)
    assert ins.family_shapes == []
    assert "blocks" not in profile_text(ins) and "differ in shape" not in render(ins)
