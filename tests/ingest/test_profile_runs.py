"""Runs held in files (the profile's `runs` block: several runs per file, one file per run, shared
data joined by a key) and per-family / per-task `blocks`, read through `import --profile`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from app.ingest import ReadSummary, iter_path
from app.ingest.loader import import_paths
from app.ingest.profile import ProfileError, load_profile
from tests.ingest import runs_fixtures as fx
from tests.ingest.readers.loss import assert_no_silent_loss, store_and_reload


def _read(path: Path, profile) -> tuple[list, ReadSummary]:
    s = ReadSummary()
    items = list(iter_path(path, profile=profile, summary=s))
    return [i.run for i in items if i.ok], s


def _profile(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _dir_profile(tmp_path: Path) -> Path:
    spec = yaml.safe_load(fx.TAU2_PROFILE)
    spec["name"] = "tau2-dir"
    spec["runs"] = {"files": "simulations/*.json", "each": "file",
                    "parts": {"conversation": "messages", "metrics": "reward_info"},
                    "join": {"scenario": {"file": "results.json", "from": "tasks", "key": "id", "run_key": "task_id"},
                             "metadata": {"file": "results.json", "from": "info", "as": "info"}}}
    return _profile(tmp_path, yaml.safe_dump(spec, sort_keys=False), "dir.yaml")


# --------------------------------------------------------------------------- several runs per file

def test_tau_bench_file_many_runs_per_file(tmp_path):
    f = fx.write_tau_bench(tmp_path / "historical_trajectories" / "ferry-gpt-x.json")
    runs, s = _read(f, _profile(tmp_path, fx.TAU_BENCH_PROFILE))
    assert (s.runs, s.errors, s.warnings) == (2, [], [])
    first = runs[0]
    assert [r["run_id"] for r in runs] == ["tau-bench/0/0", "tau-bench/1/0"]
    assert first["scenario"]["id"] == "tau-bench/0"
    assert first["scenario"]["description"].startswith("You are mia_li_3668. You want a one-way ferry")
    # the principal's id is the actor's name, its display name and objective come from the task
    assert [(p["id"], p["name"], p["kind"]) for p in first["principals"]] == [("user", "mia_li_3668", "person")]
    assert first["principals"][0]["objective"] == first["scenario"]["description"]
    assert runs[1]["principals"][0]["name"] == "omar_sy_1234"
    assert [(a["id"], a["principal"]) for a in first["agents"]] == [("assistant", "user")]
    ev = first["events"]
    assert [(e["kind"], e["actor"], e["visibility"]) for e in ev[:5]] == [
        ("message", "system", "private"), ("message", "user", "shared"), ("tool_call", "assistant", "private"),
        ("tool_result", "assistant", "private"), ("message", "assistant", "shared")]
    assert ev[1]["recipients"] == ["assistant"] and ev[4]["recipients"] == ["user"]
    # the same call id used twice: each result is linked to the latest call before it
    results = [e for e in ev if e["kind"] == "tool_result"]
    assert [ev[r["parent_seq"]]["data"]["name"] for r in results] == ["get_user", "book_ferry"]
    assert ev[0]["content"] == fx.POLICY
    assert first["principals"][0]["outcome"]["success"] is True and runs[1]["principals"][0]["outcome"]["success"] \
        is False
    assert first["aggregate_score"] == 1.0
    assert first["metadata"]["info"]["source"] == "user"  # what no part takes stays with the run
    assert first["metadata"]["path"] == {"file": "ferry-gpt-x", "index": "0"}


def test_tau_bench_file_imports_under_strict_and_loses_no_text(engine, tmp_path):
    f = fx.write_tau_bench(tmp_path / "ferry-gpt-x.json")
    prof = _profile(tmp_path, fx.TAU_BENCH_PROFILE)
    summary = import_paths(engine, [str(f)], profile=str(prof), strict=True)
    assert (summary.imported, summary.rejected) == (2, 0), summary.errors
    items = list(iter_path(f, profile=prof))
    engine.dispose()
    runs, warnings, _ = store_and_reload(engine, items)
    assert_no_silent_loss(fx.tau_bench_runs(), runs, warnings,
                          structural=(r"\.role$", r"\.type$", r"\.name$", r"\.id$", r"tool_call_id$", r"user_id$",
                                      r"\.source$", r"gt_data_hash$", r"arguments"),
                          kept=(r"\.info\.task\.actions", r"\.info\.reward_info"),
                          consumed=(r"tool_calls\[\d+\]\.type$",))  # "function": the OpenAI call marker


def test_tau2_results_simulations_joined_to_their_tasks(tmp_path):
    f = fx.write_tau2_results(tmp_path / "results" / "desk-model-9_parcel.json")
    data = json.loads(f.read_text())
    data["simulations"][2]["task_id"] = "99"  # a task the file does not hold
    f.write_text(json.dumps(data))
    runs, s = _read(f, _profile(tmp_path, fx.TAU2_PROFILE))
    assert s.runs == 3 and not s.errors
    a, b, c = runs
    assert [r["run_id"] for r in runs] == ["sim-a", "sim-b", "sim-c"]
    assert a["scenario"]["id"] == "12" and a["scenario"]["description"] == \
        "The agent must verify the sender before a redirect."
    assert b["scenario"]["description"] == "The agent must refuse to waive storage fees."
    assert a["scenario"]["metadata"]["user_scenario"]["persona"] == "A hurried shop owner."
    assert a["metadata"]["info"]["agent_info"]["llm"] == "desk-model-9"  # the file's info, given to every run
    assert a["started_at"].startswith("2026-03-02T09:00:00")
    ev = a["events"]
    # the user's own tool call and result are private to the user; the agent's to the agent
    assert [(e["kind"], e["actor"], e.get("parent_seq")) for e in ev if e["kind"].startswith("tool")] == [
        ("tool_call", "user", None), ("tool_result", "user", 2), ("tool_call", "assistant", None),
        ("tool_result", "assistant", 4)]
    assert a["principals"][0]["outcome"] == {"success": True, "score": 1.0, "metrics": {
        "reward_breakdown": {"DB": 1.0}, "reward": 1.0}}
    # the join that finds nothing is a warning naming the run and the key, the run still imports
    (w,) = s.warnings
    assert "runs.join.scenario: no item of 'tasks' has id = '99'" in w["message"]
    assert w["location"].endswith("desk-model-9_parcel.json:simulations[2]") and w["run_id"] == "sim-c"


def test_jsonl_of_runs_one_run_a_line_and_a_truncated_line_rejects_that_run_only(tmp_path):
    f = fx.write_runs_jsonl(tmp_path / "runs.jsonl", truncated=True)
    prof = _profile(tmp_path, """\
profile: 1
name: episodes-jsonl
runs: {each: record, parts: {conversation: messages}}
keys:
  metadata: {run_id: episode, family: domain, aggregate_score: score}
  conversation: {actor: from, content: text}
agents: {from: actors, principal: customer}
principals: {from: actors, match: [customer]}
visibility:
  - {when: {kind: message}, visibility: shared, recipients: all_others}
""")
    runs, s = _read(f, prof)
    assert [r["run_id"] for r in runs] == ["ep-0", "ep-1", "ep-2"]
    assert [r["scenario"]["family"] for r in runs] == ["retail", "airline", "retail"]
    e = runs[1]["events"][0]
    assert (e["actor"], e["recipients"], e["content"], e["visibility"]) == (
        "customer", ["helper"], "Order 1 has not arrived yet.", "shared")
    (err,) = s.errors
    assert str(err.where) == f"{f}:4" and "not valid JSON" in err.message
    assert not s.warnings


def test_one_file_per_run_folder_with_the_shared_results_file(tmp_path):
    root = fx.write_tau2_dir(tmp_path / "desk_results")
    runs, s = _read(root, _dir_profile(tmp_path))
    assert sorted(r["run_id"] for r in runs) == ["sim-a", "sim-b", "sim-c"] and not s.errors
    by_id = {r["run_id"]: r for r in runs}
    assert by_id["sim-b"]["scenario"]["description"] == "The agent must refuse to waive storage fees."
    assert by_id["sim-a"]["metadata"]["info"]["environment_info"]["domain_name"] == "parcel"
    # the shared file is read with the runs, never as runs; what no reader takes is listed unused
    assert s.unused_files == [f"{root}/README.txt"]
    assert not s.warnings


def test_a_runs_profile_reads_a_zip_of_the_folder_too(tmp_path):
    import zipfile

    root = fx.write_tau2_dir(tmp_path / "d")
    archive = tmp_path / "d.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for p in sorted(root.rglob("*")):
            z.write(p, p.relative_to(root).as_posix())
    runs, s = _read(archive, _dir_profile(tmp_path))
    assert len(runs) == 3 and not s.errors


def test_a_runs_profile_does_not_follow_links_out_of_the_tree_and_names_them(tmp_path):
    """The `runs:` walk is the tree reader's walk: a linked file or directory leading out of the tree
    is never read (though its names match runs.files) and is listed unused, as for any tree."""
    outside = tmp_path / "elsewhere"
    (outside / "old").mkdir(parents=True)
    stray = json.loads((fx.write_tau2_dir(tmp_path / "other") / "simulations" / "sim-a.json").read_text())
    stray["id"] = "sim-secret"
    (outside / "sim-secret.json").write_text(json.dumps(stray))
    (outside / "old" / "sim-old.json").write_text(json.dumps({**stray, "id": "sim-old"}))
    root = fx.write_tau2_dir(tmp_path / "desk_results")
    (root / "simulations" / "sim-z.json").symlink_to(outside / "sim-secret.json")
    (root / "simulations" / "old").symlink_to(outside / "old", target_is_directory=True)
    (root / "simulations" / "sim-a-again.json").symlink_to(root / "simulations" / "sim-a.json")  # inside: read
    runs, s = _read(root, _dir_profile(tmp_path))
    assert sorted(r["run_id"] for r in runs) == ["sim-a", "sim-a", "sim-b", "sim-c"] and not s.errors
    assert sorted(s.unused_files) == [
        f"{root}/README.txt",
        f"{root}/simulations/old (symbolic link out of the tree: not followed)",
        f"{root}/simulations/sim-z.json (symbolic link out of the tree: not followed)"]


def test_records_that_are_not_a_list_and_a_tree_without_matching_files_are_named(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"simulations": {"a": 1}}))
    _, s = _read(f, _profile(tmp_path, fx.TAU2_PROFILE))
    (err,) = s.errors
    assert "runs.records 'simulations' gives dict, not a list of runs" in err.message
    d = tmp_path / "empty"
    d.mkdir()
    (d / "notes.md").write_text("# nothing\n")
    _, s = _read(d, _dir_profile(tmp_path))
    assert any("no file of the tree matches runs.files ['simulations/*.json']" in e.message for e in s.errors)


# --------------------------------------------------------------------------- per-family / per-task blocks

BLOCKS = """\
profile: 1
name: episodes-with-blocks
runs: {each: record, parts: {conversation: messages}}
keys:
  metadata: {run_id: episode, family: domain}
  conversation: {actor: from, content: text}
agents: {from: actors, principal: customer}
principals: {from: actors, match: [customer]}
metrics:
  principals:
    customer: {score: score}
blocks:
  - name: retail scoring
    when: {family: retail}
    metrics:
      principals:
        customer: {success: [{key: score, ge: 0.5}]}
  - when: {key: episode, in: [ep-2]}
    metrics:
      principals:
        customer: {success: [{key: score, ge: 2}]}
  - when: {family: /air.*/, task: nothing}
    visibility: [{when: {kind: message}, visibility: private}]
"""


def test_blocks_apply_by_family_and_key_later_ones_win_objects_merge(tmp_path):
    f = fx.write_runs_jsonl(tmp_path / "runs.jsonl")
    for line in f.read_text().splitlines():  # the metrics file of each run is the record itself
        assert "score" in json.loads(line)
    spec = yaml.safe_load(BLOCKS)
    spec["runs"]["parts"]["metrics"] = "{score: score}"
    runs, s = _read(f, _profile(tmp_path, yaml.safe_dump(spec)))
    assert not s.errors
    out = {r["run_id"]: (r["principals"][0]["outcome"], r["metadata"].get("profile_blocks")) for r in runs}
    # ep-0 (retail, score 0): the retail block; ep-1 (airline): none (its task is not 'nothing');
    # ep-2 (retail, score 1): both blocks, the later one's condition wins, the score merged from the base
    assert out["ep-0"] == ({"score": 0.0, "success": False, "metrics": {"score": 0.0}}, ["retail scoring"])
    assert out["ep-1"] == ({"score": 0.5, "success": None, "metrics": {"score": 0.5}}, None)
    assert out["ep-2"] == ({"score": 1.0, "success": False, "metrics": {"score": 1.0}},
                           ["retail scoring", "blocks[1]"])
    assert all(e["visibility"] == "shared" for r in runs for e in r["events"])


def test_blocks_work_on_run_directories_too(tmp_path):
    from tests.ingest.test_profile_language import PROFILE, _tree

    _tree(tmp_path)
    spec = yaml.safe_load(PROFILE)
    spec["blocks"] = [{"when": {"scenario": "shop/7"}, "name": "shop task",
                       "values": {"chat_role": {"tool": {"kind": "tool_result", "actor": "helper"}}}},
                      {"when": {"family": "travel"}, "visibility": []}]
    runs, s = _read(tmp_path / "runs", _profile(tmp_path, yaml.safe_dump(spec), "b.yaml"))
    (run,) = runs
    assert run["metadata"]["profile_blocks"] == ["shop task"]
    assert [e["actor"] for e in run["events"] if e["kind"] == "tool_result"] == ["helper"]
    assert run["events"][0]["recipients"] == ["helper"]  # the base visibility rules still apply


# --------------------------------------------------------------------------- the schema names every bad key

@pytest.mark.parametrize("runs_or_blocks, message", [
    ({"runs": {"each": "record", "parts": {"convo": "messages"}}},
     "runs.parts.convo: unknown key (expected a role (metadata, scenario, scenario_text, conversation"),
    ({"runs": {"parts": {"conversation": "messages"}}}, "runs.each: required key is missing"),
    ({"runs": {"each": "many"}}, "runs.each: 'many' is not one of ['record', 'file']"),
    ({"runs": {"each": "record", "join": {"scenario": {"from": "tasks", "key": "id"}}}},
     "runs.join.scenario: `key` and `run_key` go together"),
    ({"runs": {"each": "record", "join": {"agents": {"from": "x"}}}},
     "runs.join.agents: unknown key (expected metadata, scenario or metrics)"),
    ({"runs": {"each": "record", "join": {"scenario": {"from": "tasks", "on": "task_id"}}}},
     "runs.join.scenario.on: unknown key (expected one of: as, file, from, key, run_key)"),
    ({"runs": {"each": "file", "records": "simulations"}}, "runs.records: only with each: record"),
    ({"runs": {"each": "record", "parts": {"trajectory": "steps"}}}, "runs.parts.trajectory: name the agent"),
    ({"runs": {"each": "record", "parts": {"conversation": "messages[?"}}},
     "runs.parts.conversation: path 'messages[?': not a JMESPath expression"),
    ({"runs": {"each": "record", "files": "../elsewhere/*.json"}}, "runs.files: must be a path inside the tree"),
    ({"blocks": [{"when": {"colour": "red"}}]}, "blocks[0].when.colour: unknown key (expected one of: equals, "
                                                "family, in, key, matches, run, scenario, task)"),
    ({"blocks": [{"when": {"family": "a"}, "runs": {"each": "file"}}]}, "blocks[0].runs: unknown key"),
    ({"blocks": [{"metrics": {}}]}, "blocks[0].when: required key is missing"),
    ({"principals": {"from": "actors", "name_key": "a[?"}}, "principals.name_key: path 'a[?': not a JMESPath"),
    ({"blocks": [{"when": {"equals": 3}}]}, "blocks[0].when: equals needs a `key`"),
    ({"blocks": [{"when": {"key": "a", "equals": 1, "in": [2]}}]}, "give exactly one of equals, in, matches"),
    ({"blocks": [{"when": {"family": "/(/"}}]}, "blocks[0].when: '/(/' is not a regular expression"),
    ({"blocks": [{"when": {"task": "t"}, "keys": {"conversation": {"sender": "from"}}}]},
     "blocks[0].keys.conversation.sender: unknown key"),
])
def test_the_schema_names_every_bad_key_of_runs_and_blocks(runs_or_blocks, message):
    with pytest.raises(ProfileError) as exc:
        load_profile({"profile": 1, "name": "x", **runs_or_blocks})
    assert message in str(exc.value)


def test_old_profiles_keep_working_and_runs_exclude_run_dirs():
    assert load_profile("a2f-release-style").get("runs") is None
    with pytest.raises(ProfileError, match="either run directories .run_dirs. or runs held in files"):
        load_profile({"profile": 1, "name": "x", "run_dirs": {"depth": 1}, "runs": {"each": "file"}})


def test_cli_import_profile_file_and_folder(tmp_path):
    from tests.cli.test_cli import run_cli

    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run_cli(["db", "upgrade"], db).returncode == 0
    f = fx.write_tau2_results(tmp_path / "res.json")
    r = run_cli(["import", "--profile", str(_profile(tmp_path, fx.TAU2_PROFILE)), str(f), "--strict"], db)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "imported 3, unchanged 0, rejected 0, warnings 0"
    root = fx.write_tau2_dir(tmp_path / "dir")
    r = run_cli(["import", "--profile", str(_dir_profile(tmp_path)), str(root), "--strict"], db)
    # the same simulations from the dir layout: their provenance (metadata.path) differs, so they
    # conflict with the stored ones until --replace
    assert r.returncode == 1 and "--replace" in r.stderr
    r = run_cli(["import", "--profile", str(_dir_profile(tmp_path)), str(root), "--replace", "--strict"], db)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "imported 3, unchanged 0, rejected 0, warnings 0"


# --------------------------------------------------------------------------- inspect understands run-holding files

def _accept(text: str) -> str:
    from app.ingest.inspect import MARK

    return "\n".join(line[len(MARK):] if line.startswith(MARK) else line for line in text.splitlines()) + "\n"


CASES = {
    "tau-bench": (lambda d: fx.write_tau_bench(d / "ferry-gpt-x.json"), 2,
                  "several runs per file (the array itself, or one a line)): 2 run(s) in 1 file(s)"),
    "tau2-results": (lambda d: fx.write_tau2_results(d / "res.json"), 3,
                     "several runs per file, the list at 'simulations'): 3 run(s) in 1 file(s)"),
    "jsonl": (lambda d: fx.write_runs_jsonl(d / "runs.jsonl"), 3, "3 run(s) in 1 file(s)"),
    "one-file-per-run": (lambda d: fx.write_tau2_dir(d / "dir"), 3, "(one run per file): 3 run(s) in 3 file(s)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_inspect_reports_the_runs_held_and_its_starter_profile_imports_them_under_strict(engine, tmp_path, case):
    from app.ingest.inspect import inspect_tree, profile_text, render
    from app.ingest.inspect_runs import inspect_runs

    make, n, line = CASES[case]
    path = make(tmp_path)
    ins = inspect_tree(path) if path.is_dir() else inspect_runs(path)
    text = render(ins)
    assert line in text and f"dry run on {n} run(s), every one: {n} would be stored, 0 rejected" in text
    assert ins.profile.spec["runs"]["each"] == ("file" if case == "one-file-per-run" else "record")
    assert ": none\n" not in text + "\n"
    if case == "one-file-per-run":  # and what plain import (no profile) would make of the top files
        assert "files at the top, as plain `import` (no profile) reads them: 2" in text
        assert "  README.txt: no reader takes it: " in text
    starter = profile_text(ins)
    assert "runs:" in starter
    prof = tmp_path / "starter.yaml"
    prof.write_text(_accept(starter))
    runs, s = _read(path, prof)
    assert (s.runs, s.errors, s.warnings) == (n, [], [])
    assert all(r["principals"] and r["agents"] for r in runs)
    assert not any(e["actor"] == "system" and e["visibility"] == "shared" for r in runs for e in r["events"])
    summary = import_paths(engine, [str(path)], profile=str(prof), strict=True)
    assert (summary.imported, summary.rejected) == (n, 0), summary.errors


def test_inspect_joins_the_tasks_and_the_shared_info_of_a_tau2_results_file(tmp_path):
    from app.ingest.inspect_runs import inspect_runs

    ins = inspect_runs(fx.write_tau2_results(tmp_path / "res.json"))
    runs = ins.profile.spec["runs"]
    assert runs["records"] == "simulations" and runs["parts"] == {"conversation": "messages", "metrics": "reward_info"}
    assert runs["join"]["scenario"] == {"from": "tasks", "key": "id", "run_key": "task_id"}
    assert runs["join"]["metadata"] == {"from": "{timestamp: timestamp, info: info}"}
    keys = ins.profile.spec["keys"]
    assert keys["conversation"]["actor"] == "requestor" and keys["conversation"]["call_id"] == "id"
    assert keys["scenario"] == {"id": "id", "description": "description.purpose"}


def test_cli_inspect_a_run_holding_file_writes_a_runs_profile(tmp_path):
    from click.testing import CliRunner

    from app.cli import cli as main

    f = fx.write_tau_bench(tmp_path / "ferry-gpt-x.json")
    prof = tmp_path / "p.yaml"
    r = CliRunner().invoke(main, ["inspect", str(f), "--write-profile", str(prof)])
    assert r.exit_code == 0, r.output
    assert f"{f}: read by 'tau-bench'" in r.output  # the registry's reader, as before
    assert "read with an import profile instead" in r.output and f"{f}: 2 run(s)" in r.output
    assert load_profile(prof).spec["runs"]["parts"]["conversation"] == "traj"
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"a": 1}))
    r = CliRunner().invoke(main, ["inspect", str(other), "--write-profile", str(tmp_path / "q.yaml")])
    assert r.exit_code != 0 and "no runs held in this file" in r.output


def test_principals_from_the_record_with_distinct_id_and_display_name_keys(tmp_path):
    f = tmp_path / "runs.json"
    f.write_text(json.dumps([{"run": "r1", "parties": [{"pid": "acme", "display": "Acme Corp, buyer"}],
                              "bots": [{"name": "haggler", "for": "acme"}],
                              "messages": [{"from": "haggler", "text": "We offer 40 dollars."},
                                           {"from": "acme", "text": "Go to 45 at most."}]}]))
    prof = _profile(tmp_path, """\
profile: 1
name: parties
runs: {each: record, parts: {conversation: messages}}
keys:
  metadata: {run_id: run}
  conversation: {actor: from, content: text}
principals: {from: parties, id: "{pid}", name: display}
agents: {from: bots, id: "{name}", principal: for}
""")
    (run,), s = _read(f, prof)
    assert [(p["id"], p["name"]) for p in run["principals"]] == [("acme", "Acme Corp, buyer")]
    assert [(a["id"], a["principal"]) for a in run["agents"]] == [("haggler", "acme")]
    assert [e["actor"] for e in run["events"]] == ["haggler", "acme"] and not s.warnings


def test_inspect_gives_every_run_the_file_keys_even_with_dashes(tmp_path):
    from app.ingest.inspect_runs import inspect_runs

    data = fx.tau2_results()
    data["run-info"] = {"harness": "tau2 1.0, patched"}
    f = tmp_path / "res.json"
    f.write_text(json.dumps(data))
    ins = inspect_runs(f)
    assert ins.profile.spec["runs"]["join"]["metadata"]["from"] == \
        '{timestamp: timestamp, info: info, "run-info": "run-info"}'
    runs, s = _read(f, ins.profile)
    assert runs[0]["metadata"]["run-info"] == {"harness": "tau2 1.0, patched"} and not s.errors


def test_a_profiled_tree_of_run_directories_names_links_out_of_the_tree_too(tmp_path):
    """The same walk for a tree read with a (non built-in) profile of run directories: a linked
    file or directory leading out of the tree is reported unused, never read."""
    from app.ingest.inspect import inspect_tree, profile_text
    from tests.ingest.release_fixtures import build_chatlog

    info = build_chatlog(tmp_path / "chat")
    root = info["root"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(json.dumps({"run_id": "secret", "events": []}) + "\n")
    (root / "commerce" / "secret.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "commerce" / "more").symlink_to(outside, target_is_directory=True)
    prof = _profile(tmp_path, profile_text(inspect_tree(root)), "chat.yaml")
    assert not load_profile(prof).builtin_names  # read by the profiled walk, not the built-in one
    runs, s = _read(root, prof)
    assert len(runs) == len(info["runs"]) and "secret" not in {r["run_id"] for r in runs}
    assert [u for u in s.unused_files if "symbolic link" in u] == [
        f"{root}/commerce/more (symbolic link out of the tree: not followed)",
        f"{root}/commerce/secret.jsonl (symbolic link out of the tree: not followed)"]
