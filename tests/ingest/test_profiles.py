"""Import profiles, `inspect` inference and lenient reading on three layouts unlike our own."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.ingest import iter_path
from app.ingest.canonical import RunFormatError, normalize_run
from app.ingest.inspect import inspect_tree, profile_text, render
from app.ingest.lenient import normalize_lenient
from app.ingest.profile import ProfileError, builtin_profile_names, load_profile
from app.ingest.profiled import parse_path
from tests.ingest.release_fixtures import LAYOUTS


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    return {name: build(root / name) for name, build in LAYOUTS.items()}


def _read(path, **kw):
    items = list(iter_path(path, **kw))
    runs = {i.run["run_id"]: i.run for i in items if i.run}
    return items, runs


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_run_is_kept_with_agents_principals_outcomes_and_checks(trees, layout):
    info = trees[layout]
    items, runs = _read(info["root"])
    assert [str(i.error) for i in items if i.error] == []
    assert sorted(runs) == sorted(r["run_id"] for r in info["runs"])
    for run in runs.values():
        assert normalize_run(run) == run  # a valid canonical run
        # the metadata's agents, plus any actor the log names that the metadata does not list (the
        # episodes' moderator speaks: it becomes an agent, never 'system')
        spoken = {e["actor"] for e in run["events"]} - {"system"} - {p["id"] for p in run["principals"]}
        listed = [a for a in run["agents"] if a["role"] in info["roles"]]
        assert sorted(a["role"] for a in listed) == sorted(info["roles"])
        assert {a["id"] for a in run["agents"]} - {a["id"] for a in listed} == spoken - {a["id"] for a in listed}
        assert all(a["model"] and a["principal"] for a in listed)
        assert ("moderator" in spoken) == (layout == "episodes")
        assert sorted(p["id"] for p in run["principals"]) == sorted(info["principals"])
        for p in run["principals"]:  # per-principal outcomes filled from the metrics
            assert p["outcome"]["score"] is not None and p["outcome"]["metrics"], (layout, p)
        assert all(a["private_state"] for a in listed), layout  # every layout has private state
        assert run["checks"] and {c["passed"] for c in run["checks"]} == {True, False}
        assert {c["level"] for c in run["checks"]} == {"L0", "L1"}
        assert all(a["mode"] == "CF1" for a in run["audits"])  # judge names mapped onto taxonomy codes
        assert run["aggregate_score"] is not None
    for w in (w for i in items for w in i.warnings):
        assert w["location"].startswith(str(info["root"])) and w["message"]


def test_release_layout_manifest_paths_turns_and_verdicts(trees):
    info = trees["release"]
    items, runs = _read(info["root"])
    # the manifest is read as a manifest (original run ids), never as a run
    assert not any(i.error for i in items)
    assert [u for i in items for u in i.unused_files] == info["unused"]
    first = runs[info["runs"][0]["run_id"]]
    assert first["metadata"]["manifest"]["historical_task"] == "contract_negotiation_v1"
    assert first["metadata"]["path"]["condition"] == "same_model"
    assert first["metadata"]["path"]["repetition"] == "rep_1"
    assert first["scenario"]["id"] == "contracting/contracting__two_agent/nda_mutual"
    assert first["scenario"]["family"] == "contracting"
    assert first["status"] == "completed" and runs[info["runs"][3]["run_id"]]["status"] == "error"
    shared = [e for e in first["events"] if e["visibility"] == "shared"]
    assert [e["content"] for e in shared][:2] == ["Here is our draft NDA.", "We need a liability cap."]
    assert [e["hop"] for e in shared] == [1, 1, 2]  # hops.jsonl refers to turns
    # an artifact index refers to turns: the artifact follows the event of its turn, filed by its agent
    (red,) = [e for e in first["events"] if e["kind"] == "artifact" and e["data"]["path"].endswith("redline_v1.txt")]
    turn2 = next(e for e in first["events"] if e["metadata"].get("turn") == 2 and e["visibility"] == "shared")
    assert (red["seq"], red["actor"], red["content"]) == (turn2["seq"] + 1, "reviewer", "- clause 4\n+ clause 4 (capped)\n")
    harness = [e for e in first["events"] if e["actor"] == "system" and e["kind"] == "log"]
    assert {e["metadata"]["original_kind"] for e in harness} == {"turn_start", "episode_end"}
    # "no failure" verdict -> an explicit no-failure annotation by that judge (audited_by)
    assert first["metadata"]["audited_by"] == ["llm-judge-a"] and first["audits"] == []
    second = runs[info["runs"][1]["run_id"]]
    (audit,) = second["audits"]
    turn3 = next(e["seq"] for e in second["events"] if e["metadata"].get("turn") == 3)
    assert (audit["agent"], audit["evidence"], audit["source"], audit["level"]) == ("drafter", [turn3], "llm-judge-a", "L2")
    (failed,) = [c for c in second["checks"] if c["passed"] is False and c["level"] == "L1"]
    assert failed["agent"] == "drafter" and failed["evidence"] == [turn3]
    # a mode in the judge's own words matches nothing: kept, reported by name
    assert second["metadata"]["unmapped_audits"][0]["mode"] == "sycophantic capitulation"
    item = next(i for i in items if i.run and i.run["run_id"] == second["run_id"])
    assert item.unknown_modes == {"sycophantic capitulation": 1}
    drafter = next(a for a in second["agents"] if a["role"] == "drafter")
    assert drafter["private_state"]["floor_usd"] == 10001  # scenario section
    assert "Never go below" in drafter["private_state"]["system_prompt"]  # trajectory's system message
    assert "private" not in second["scenario"]["metadata"]  # private sections are not shown as the scenario
    by_id = {p["id"]: p for p in second["principals"]}
    assert by_id["client_co"]["outcome"]["success"] is True  # violations name the reviewer only
    assert by_id["counterparty_llc"]["outcome"]["success"] is False


def test_chatlog_layout_car_dealer_metrics_and_chat_trajectories(trees):
    info = trees["chatlog"]
    items, runs = _read(info["root"])
    run = runs["cd-0000"]
    econ = run["metadata"]["metrics"]["economics"]
    assert set(econ) == {"status", "sku", "winner", "selling_usd", "out_the_door_usd", "dealer_price_capture",
                         "buyer_surplus_usd", "decision", "true_out_the_door_usd", "mandate_violations"}
    buyer = next(p for p in run["principals"] if p["id"] == "dana")
    assert buyer["outcome"]["score"] == -640.0 and buyer["outcome"]["success"] is False
    assert buyer["outcome"]["metrics"]["economics.buyer_surplus_usd"] == -640.0
    assert runs["cd-0001"]["principals"][0]["outcome"]["success"] is True  # no violation in that run
    dealer = next(p for p in run["principals"] if p["id"] == "dealership")
    assert dealer["outcome"]["score"] == 0.62
    assert runs["cd-0002"]["status"] == "timeout" and run["status"] == "completed"
    agent = next(a for a in run["agents"] if a["id"] == "buyer")
    assert agent["private_state"]["budget_usd"] == 18500 and "Budget 18500" in agent["private_state"]["system_prompt"]
    # chat-style: the file name is the agent, role a chat role, content parts joined
    mine = [e for e in run["events"] if e["actor"] == "buyer" and e["visibility"] == "private"]
    assert [(e["kind"], e["content"], e["metadata"]["chat_role"]) for e in mine] == \
        [("message", "I will anchor low.", "assistant")]
    times = [e["ts"] for e in run["events"] if e["ts"]]
    assert times == sorted(times)  # epoch seconds became ISO timestamps and order the run
    assert runs["cd-0001"]["metadata"]["audited_by"] == ["judge-x"]
    assert sorted(a["source"] for a in run["audits"]) == ["judge-x", "judge-y"]
    assert sorted(u.rsplit("/", 1)[-1] for i in items for u in i.unused_files) == ["notes.md"] * 3


def test_episodes_layout_mixed_audit_file_and_an_undeclared_speaker(trees):
    info = trees["episodes"]
    items, runs = _read(info["root"])
    run = runs["ep-000-renewal"]
    assert run["scenario"] == {"id": "crm/renewal/3", "family": "crm", "alignment": None, "title": None,
                               "description": None, "metadata": {"public": "Annual renewal negotiation"}}
    assert [runs[r["run_id"]]["status"] for r in info["runs"]] == ["completed", "failed", "timeout"]
    note = next(e for e in run["events"] if e["metadata"].get("turn") == 3)
    assert (note["visibility"], note["recipients"]) == ("private", [])
    item = next(i for i in items if i.run and i.run["run_id"] == "ep-000-renewal")
    # the undeclared speaker keeps its turn: it becomes an agent (a notice), never 'system'
    assert not [w for w in item.warnings if w.get("field") == "events[3].actor"]
    assert run["events"][3]["actor"] == "moderator" and "moderator" in {a["id"] for a in run["agents"]}
    assert any("moderator" in n["message"] and n["location"] == f"{info['root']}/ep-000-renewal"
               for n in item.notices)
    assert [c["check_id"] for c in run["checks"]] == ["L0.schema_valid", "L1.no_floor_disclosure"]
    assert run["audits"][0]["agent"] == "acme_rep"
    vendor = next(p for p in run["principals"] if p["id"] == "acme")
    assert vendor["outcome"]["success"] is True and vendor["outcome"]["score"] == 12.5


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_inspect_writes_a_profile_that_unedited_imports_every_run(trees, layout, tmp_path):
    info = trees[layout]
    ins = inspect_tree(info["root"])
    text = render(ins)
    assert f"run directories: {len(info['runs'])}" in text and "files by role" in text
    path = tmp_path / "profile.yaml"
    path.write_text(profile_text(ins), encoding="utf-8")
    prof = load_profile(path)
    _, with_file = _read(info["root"], profile=path)
    _, inferred = _read(info["root"])
    assert with_file == inferred and len(with_file) == len(info["runs"])
    assert prof.name == f"inferred-{layout}"


def test_inspect_reports_path_pattern_values_and_unmapped(trees):
    text = render(inspect_tree(trees["release"]["root"]))
    assert "path pattern: {family}/{task}/{condition}/{models}/{scenario}/{repetition}/{run}" in text
    assert "manifest: export_manifest.json" in text
    assert "'internal' (4)" in text and "'success' (2)" in text
    assert "mode 'sycophantic capitulation' (no taxonomy match" in text


def test_an_edited_alias_table_maps_the_judges_own_mode_names(trees, tmp_path):
    info = trees["release"]
    spec = inspect_tree(info["root"]).profile.spec
    spec["audits"]["modes"]["sycophantic capitulation"] = "CF2"
    items, runs = _read(info["root"], profile=load_profile(spec))
    assert not any(i.unknown_modes for i in items)
    second = runs[info["runs"][1]["run_id"]]
    assert sorted(a["mode"] for a in second["audits"]) == ["CF1", "CF2"]
    assert "unmapped_audits" not in second["metadata"]


def test_profile_schema_names_every_bad_key(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text(yaml.safe_dump({"profile": 1, "name": "x", "filez": {}, "keys": {"conversation": {"sender": "from"}},
                                   "files": {"a.json": "conversaton"}}))
    with pytest.raises(ProfileError) as exc:
        load_profile(bad)
    msg = str(exc.value)
    assert str(bad) in msg and "filez: unknown key" in msg and "keys.conversation.sender: unknown key" in msg
    assert "files.a.json" in msg
    with pytest.raises(ProfileError, match="name: required key is missing"):
        load_profile({"profile": 1})
    with pytest.raises(ProfileError, match="no such file"):
        load_profile(tmp_path / "missing.yaml")
    assert "a2annotate" in builtin_profile_names() and load_profile("a2annotate").builtin_names


def test_path_templates():
    assert parse_path("{family}/{task}/{run}", "a/b/c") == {"family": "a", "task": "b", "run": "c"}
    assert parse_path("{scenario}__r{repetition}", "nda__r3") == {"scenario": "nda", "repetition": "3"}
    assert parse_path("{family}/{run}", "a/b/c") is None
    assert parse_path("runs/{run}", "other/x") is None


def test_lenient_reports_every_problem_and_rejects_only_non_runs():
    raw = {"run_id": "r", "scenario": {"id": "s", "family": "f"}, "status": "success",
           "agents": [{"id": "a"}],
           "events": [{"kind": "say", "actor": "a", "visibility": "internal"}, {"kind": "message", "actor": "zed"}]}
    run, problems = normalize_lenient(raw, "x.json")
    assert sorted(p.field for p in problems) == ["events[0].kind", "events[0].visibility", "events[1].actor",
                                                 "status"]
    assert run["metadata"]["original_status"] == "success"
    assert run["events"][0]["metadata"] == {"original_kind": "say", "original_visibility": "internal"}
    many = {"run_id": "big", "scenario": {"id": "s", "family": "f"},
            "events": [{"kind": "say", "actor": f"x{i}", "recipients": ["y"]} for i in range(3000)]}
    run, problems = normalize_lenient(many)  # one pass, not one normalization per problem
    assert len(problems) == 9000 and {e["actor"] for e in run["events"]} == {"system"}
    with pytest.raises(RunFormatError, match="no run id"):
        normalize_lenient({"events": [{"kind": "log", "actor": "system"}]})
    with pytest.raises(RunFormatError, match="no events"):
        normalize_lenient({"run_id": "r", "events": []})


def test_a_tree_in_our_own_layout_still_uses_the_builtin_profile(tmp_path):
    from app.demo.generator import generate_runs
    from app.ingest import write_tree
    from app.ingest.inspect import infer_profile

    runs = [d.run for d in generate_runs(3, 5)]
    write_tree(runs, tmp_path)
    assert infer_profile(tmp_path).name == "a2annotate"
    items, got = _read(tmp_path)
    assert sorted(got) == sorted(r["run_id"] for r in runs)
    assert all(not i.warnings for i in items)
    text = render(inspect_tree(Path(tmp_path)))
    assert "chose a2annotate (built-in names)" in text and "warnings the import would raise: 0" in text


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_garbage_values_are_warnings_never_crashes(trees, layout, tmp_path):
    import json
    import random
    import shutil

    root = tmp_path / layout
    shutil.copytree(trees[layout]["root"], root)
    profile = inspect_tree(trees[layout]["root"]).profile  # the layout's profile, from the clean tree
    rng = random.Random(7)
    junk = [None, [], {}, [1, {"a": None}], "", "x" * 300, 1e308, -1, True, {"nested": {"deep": [None]}}]
    for path in sorted(root.rglob("*.json*")):
        text = path.read_text()
        if path.suffix == ".jsonl":
            rows = [json.loads(x) for x in text.splitlines() if x.strip()]
            rows = [{k: rng.choice(junk) if rng.random() < 0.5 else v for k, v in r.items()} if isinstance(r, dict)
                    else r for r in rows] + [rng.choice(junk)]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            doc = json.loads(text)
            if isinstance(doc, dict):
                doc = {k: rng.choice(junk) if rng.random() < 0.3 else v for k, v in doc.items()}
            path.write_text(json.dumps(doc))
    items = list(iter_path(root, profile=profile))
    for i in items:
        if i.run is not None:
            assert normalize_run(i.run) == i.run
        if i.error is not None:  # only "cannot be a run at all"
            assert i.error.field in ("run_id", "events"), str(i.error)
    assert any(i.run for i in items)


def test_an_epoch_timestamp_out_of_range_is_a_field_error_not_a_crash():
    raw = {"run_id": "r", "scenario": {"id": "s", "family": "f"}, "events": [{"kind": "log", "actor": "system",
                                                                               "ts": 1e308}]}
    with pytest.raises(RunFormatError, match="out of range") as exc:
        normalize_run(raw)
    assert exc.value.field == "events[0].ts"
    run, problems = normalize_lenient(raw)
    assert run["events"][0]["metadata"]["original_ts"] == 1e308 and problems[0].field == "events[0].ts"


def test_values_the_database_cannot_hold_are_kept_aside_when_they_are_not_ids():
    raw = {"run_id": "r", "scenario": {"id": "s", "family": "f"}, "agents": [{"id": "a", "model": "m" * 500}],
           "events": [{"kind": "log", "actor": "a", "hop": 2**40}]}
    run, problems = normalize_lenient(raw)
    assert run["events"][0]["hop"] is None and run["events"][0]["metadata"]["original_hop"] == 2**40
    assert run["agents"][0]["model"] is None and sorted(p.field for p in problems) == ["agents[0].model",
                                                                                         "events[0].hop"]


@pytest.mark.parametrize("seed", [1, 3, 9])
def test_garbage_values_in_our_own_layout_are_warnings_never_crashes(tmp_path, seed):
    import json
    import random

    from app.demo.generator import generate_runs
    from app.ingest import write_tree

    rng = random.Random(seed)
    junk = [None, [], {}, [1, {"a": None}], "", "x" * 300, 1e308, -1, True, {"nested": [None]}, "2026-13-45", 2**70]
    runs = [d.run for d in generate_runs(2, seed)]
    write_tree(runs, tmp_path)
    for path in sorted(tmp_path.rglob("*.json*")):
        text = path.read_text()
        if path.suffix == ".jsonl":
            rows = [json.loads(x) for x in text.splitlines() if x.strip()]
            rows = [{k: rng.choice(junk) if rng.random() < 0.3 else v for k, v in r.items()} for r in rows]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            doc = json.loads(text)
            if isinstance(doc, dict):
                doc = {k: rng.choice(junk) if rng.random() < 0.3 else v for k, v in doc.items()}
            path.write_text(json.dumps(doc))
    items = list(iter_path(tmp_path))
    assert [str(i.error) for i in items if i.error] == []
    kept = [i for i in items if i.run]
    assert len(kept) == 2 and all(i.warnings for i in kept)
    for i in kept:
        assert normalize_run(i.run) == i.run


def test_a_run_that_cannot_be_one_reports_its_other_problems_too(trees, tmp_path):
    import shutil

    root = tmp_path / "episodes"
    shutil.copytree(trees["episodes"]["root"], root)
    d = root / "ep-000-renewal"
    (d / "transcript.json").write_text('{"turns": []}')
    (d / "audit.json").write_text('{"items": [{"check_id": "L0.x", "status": "MAYBE"}]}')
    profile = inspect_tree(trees["episodes"]["root"]).profile
    items, runs = _read(root, profile=profile)
    (bad,) = [i for i in items if i.error]
    assert bad.error.field == "events" and "no events" in bad.error.message
    assert len(runs) == 2
    (more,) = bad.more_errors
    assert more.where.file == f"{d}/audit.json:items[0]" and "'MAYBE' is neither pass nor fail" in more.message


def test_a_rejected_canonical_run_names_every_problem(tmp_path):
    import json

    from app.ingest import ReadSummary

    bad = {"run_id": "c1", "scenario": {"id": "s", "family": "f"}, "status": "success",
           "agents": [{"id": "a"}], "events": [{"kind": "say", "actor": "a"}, {"kind": "message", "actor": "zed"}]}
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    summary = ReadSummary()
    (item,) = list(iter_path(path, summary=summary))
    assert item.run is None and item.error.field == "status"  # the canonical shape stays strict
    assert sorted(e.field for e in item.more_errors) == ["events[0].kind", "events[1].actor"]
    assert all(e.where.file == str(path) and e.where.line == 1 and e.run_id == "c1" for e in item.more_errors)
    assert len(summary.errors) == 3


@pytest.mark.parametrize(("name", "layout"), [("a2f-release-style", "release"), ("chat-transcripts", "chatlog")])
def test_shipped_profiles_read_their_layouts_by_name(trees, name, layout):
    items, runs = _read(trees[layout]["root"], profile=name)
    assert sorted(runs) == sorted(r["run_id"] for r in trees[layout]["runs"])
    assert not any(i.error for i in items) and not any(i.unknown_modes for i in items)  # alias tables map them
    assert {a["mode"] for r in runs.values() for a in r["audits"]} == {"CF1", "CF2"}


def test_one_tree_with_two_families_whose_names_and_depths_differ(tmp_path):
    from tests.ingest.release_fixtures import build_chatlog, build_release

    rel = build_release(tmp_path, n_runs=2)
    chat = build_chatlog(tmp_path, n_runs=2)
    ins = inspect_tree(tmp_path)
    assert isinstance(ins.profile.spec["path"], list) and isinstance(ins.profile.spec["agents"], list)
    items, runs = _read(tmp_path)
    assert not any(i.error for i in items)
    assert sorted(runs) == sorted(r["run_id"] for r in rel["runs"] + chat["runs"])
    for run in runs.values():
        assert len(run["agents"]) == 2 and all(a["model"] for a in run["agents"])
        assert all(p["outcome"]["score"] is not None for p in run["principals"])
        assert [e for e in run["events"] if e["visibility"] == "shared" and e["actor"] != "system"]
        assert run["aggregate_score"] is not None
    assert runs["cd-0000"]["scenario"]["family"] == "commerce" and runs["cd-0000"]["status"] == "completed"
    assert runs[rel["runs"][0]["run_id"]]["scenario"]["family"] == "contracting"


def test_one_run_directory_given_as_the_path(trees):
    info = trees["chatlog"]
    d = info["root"] / "commerce" / "car_dealer" / "cd-0000"
    assert "itself one run directory" in render(inspect_tree(d))
    items, runs = _read(d)
    assert list(runs) == ["cd-0000"] and not any(i.error for i in items)
    assert runs["cd-0000"]["scenario"]["id"] == "car_dealer_v2" and len(runs["cd-0000"]["agents"]) == 2


def test_a_runs_file_named_like_a_manifest_is_still_read_as_runs(tmp_path):
    import json

    from app.demo.generator import generate_runs

    runs = [d.run for d in generate_runs(2, 4)]
    for r in runs:
        r["run_id"] = "family/" + r["run_id"]  # ids with a slash, as a path would have
    (tmp_path / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    items, got = _read(tmp_path)
    assert sorted(got) == sorted(r["run_id"] for r in runs) and not any(i.error for i in items)


def test_a_line_that_is_not_json_is_kept_as_a_log_event(trees, tmp_path):
    import shutil

    root = tmp_path / "chatlog"
    shutil.copytree(trees["chatlog"]["root"], root)
    path = root / "commerce" / "car_dealer" / "cd-0000" / "transcript.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"idx": 6, "speaker": "buyer", "msg": "trunc\n')
    items, runs = _read(root, profile=inspect_tree(trees["chatlog"]["root"]).profile)
    run = runs["cd-0000"]
    (ev,) = [e for e in run["events"] if e["metadata"].get("unreadable_line")]
    assert ev["kind"] == "log" and ev["content"].startswith('{"idx": 6')
    item = next(i for i in items if i.run and i.run["run_id"] == "cd-0000")
    assert any(w["location"] == f"{path}:6" and "not valid JSON" in w["message"] for w in item.warnings)


def test_a_run_with_checks_round_trips_through_every_shape(tmp_path):
    from app.demo.generator import generate_runs
    from app.ingest import write_files, write_json_array, write_jsonl, write_tree, write_wire

    run = next(iter(generate_runs(1, 3))).run
    run["checks"] = [{"source": "harness", "level": "L0", "check_id": "protocol.ok", "passed": False,
                      "agent": run["agents"][0]["id"], "evidence": [0], "detail": "d", "metadata": {"k": 1}}]
    run = normalize_run(run)
    for name, write, target in (("array", write_json_array, tmp_path / "a.json"),
                                ("jsonl", write_jsonl, tmp_path / "a.jsonl"),
                                ("files", write_files, tmp_path / "files"),
                                ("tree", write_tree, tmp_path / "tree"),
                                ("wire", write_wire, tmp_path / "w.jsonl")):
        write([run], target)
        items = list(iter_path(target))
        assert [i.run for i in items if i.run] == [run], name
        assert not any(i.warnings or i.unused_files or i.error for i in items), name
