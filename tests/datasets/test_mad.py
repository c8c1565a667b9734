"""MAST's MAD files in: the full file (LLM judge marks) and the human-labelled file (three
annotators, taxonomy by round), through the CLI and POST /api/v1/imports; the agreement of the
three humans per mode against a hand computation; MAD out and back in."""
from __future__ import annotations

import json
import re

import pytest

from app.ingest import detect_format, iter_path
from app.ingest.readers.mad import split_trajectory, style_for, taxonomy_for_round

from .conftest import DATA, stored_labels

FULL = DATA / "MAD_full_dataset.json"
HUMAN = DATA / "MAD_human_labelled_dataset.json"
BAD = DATA / "MAD_full_bad.json"


def _runs(path):
    items = list(iter_path(path))
    assert all(i.ok for i in items), [str(i.error) for i in items if not i.ok]
    return {i.run["run_id"]: i.run for i in items}


# ------------------------------------------------------------------------- pure reading

def test_detection_and_run_ids_unique_by_trace_key():
    assert detect_format(FULL) == "mad" and detect_format(HUMAN) == "mad" and detect_format(BAD) == "mad"
    runs = _runs(FULL)
    assert len(runs) == 8  # two records share (mas_name, llm_name, trace_id) and differ by trace.key
    assert {"mad/ChatDev/GPT-4o/1/chatdev_tip_1", "mad/ChatDev/GPT-4o/1/chatdev_tip_1_rerun"} <= set(runs)


def test_trajectory_kept_whole_and_split_per_style():
    records = json.loads(FULL.read_text())
    runs = _runs(FULL)
    expect = {  # style, the agent turns (actor, recipients) in order
        "ChatDev": ("chatdev", [("Chief Product Officer", ["Chief Executive Officer"]),
                                ("Chief Executive Officer", ["Chief Product Officer"]),
                                ("Programmer", ["Chief Technology Officer"])]),
        "MetaGPT": ("metagpt", [("user", ["SimpleCoder"]), ("SimpleCoder", []), ("SimpleTester", [])]),
        # group chats: a turn posted to the chat is shared with every other member
        "AG2": ("ag2", [("mathproxyagent", ["assistant"]), ("assistant", ["mathproxyagent"]),
                        ("mathproxyagent", ["assistant"])]),
        "Magentic": ("magentic-one", [("user", ["MagenticOneOrchestrator", "WebSurfer"]),
                                      ("MagenticOneOrchestrator", ["user", "WebSurfer"]),
                                      ("WebSurfer", ["user", "MagenticOneOrchestrator"]),
                                      ("MagenticOneOrchestrator", ["user", "WebSurfer"])]),
        "AppWorld": ("appworld", [("Supervisor", []), ("Supervisor", ["spotify"]), ("spotify", ["Supervisor"])]),
        "HyperAgent": ("hyperagent", [("Planner", []), ("Navigator", []), ("Navigator", ["Planner"]),
                                      ("Planner", [])]),
        "OpenManus": ("openmanus", [("Manus", []), ("Manus", []), ("Manus", [])]),
    }
    seen = set()
    for rec, run in zip(records, runs.values()):
        text = rec["trace"]["trajectory"]
        assert "".join(e["content"] for e in run["events"]) == text  # raw text kept whole, in order
        assert [e["seq"] for e in run["events"]] == list(range(len(run["events"])))
        if rec["trace"]["key"].endswith("_rerun"):  # no recognisable style: one log event
            assert [(e["actor"], e["kind"]) for e in run["events"]] == [("system", "log")]
            continue
        style, turns = expect[rec["mas_name"]]
        assert run["metadata"]["mad"]["style"] == style
        assert [(e["actor"], e["recipients"]) for e in run["events"] if e["actor"] != "system"] == turns
        assert run["events"][0]["actor"] == "system" and run["events"][0]["kind"] == "log"  # the preamble
        for e in run["events"]:
            assert e["visibility"] == ("shared" if e["recipients"] else "private")
            assert e["data"].get("group_chat", False) == (style in ("ag2", "magentic-one") and e["actor"] != "system")
        seen.add(style)
    assert len(seen) == 7
    openmanus = runs["mad/OpenManus/GPT-4o/7/openmanus_web_7"]
    assert [e["kind"] for e in openmanus["events"]] == ["log", "message", "tool_call", "tool_result", "message"]
    assert openmanus["events"][1]["ts"] == "2025-03-10T12:00:01.200"
    assert openmanus["metadata"]["mad_extra"] == {"run_note": "kept in metadata"}


def test_style_is_found_without_mas_name_and_by_name_variants():
    text = json.loads(FULL.read_text())[0]["trace"]["trajectory"]
    assert split_trajectory(text, None)[0] == "chatdev"
    assert style_for("Magentic-One") == "magentic-one" and style_for("OpenManus") == "openmanus"
    assert style_for("Unknown-MAS") is None
    assert (taxonomy_for_round("Round 1"), taxonomy_for_round("Round 2"), taxonomy_for_round("Round 3"),
            taxonomy_for_round("Round 4")) == ("mast-draft-r1", "mast-draft-r2", "mast-draft-r2", "mast")


# ------------------------------------------------------------------------- full file, CLI

def test_cli_imports_full_file_judge_labels_null_and_zero(engine, run_cli):
    res = run_cli("import", FULL)
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == "imported 8, unchanged 0, rejected 0, warnings 0"
    labels = stored_labels(engine)
    mast = next(k[2] for k in labels)
    assert mast.startswith("mast@")
    judge = {k[0]: v for k, v in labels.items() if k[1] == "judge:mast-llm"}
    assert judge["mad/ChatDev/GPT-4o/1/chatdev_tip_1"] == ("judge", False, (("1.1", "", (), ""), ("3.2", "", (), "")))
    assert judge["mad/MetaGPT/GPT-4o/2/metagpt_prime_2"] == ("judge", True, ())  # all zeros: no failure found
    assert "mad/AG2/GPT-4/3/ag2_math_3" not in judge  # all null: not annotated
    assert judge["mad/Magentic/GPT-4o/4/magentic_stars_4"][2] == (("2.6", "", (), ""),)
    assert len(judge) == 7
    again = run_cli("import", FULL)
    assert again.output.strip().splitlines()[-1] == "imported 0, unchanged 8, rejected 0, warnings 0"


def test_cli_malformed_full_file_rejects_only_what_cannot_be_a_run(engine, run_cli):
    res = run_cli("import", "--format", "mad", BAD)
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1] == "imported 3, unchanged 0, rejected 2, warnings 3"
    # each rejection names the file, the line the record starts on and its index in the array
    assert re.search(rf"rejected: {re.escape(str(BAD))}:\d+:\[1\]: field trace.trajectory: required", res.output)
    assert re.search(rf"rejected: {re.escape(str(BAD))}:\d+:\[2\]: field trace_id: required", res.output)
    runs = _runs_from_db(engine)
    odd = runs["mad/MetaGPT/GPT-4o/12/odd_12"]
    assert any("mast_annotation.1.1: expected 0, 1 or null, got 2" in w for w in odd["metadata"]["import_warnings"])
    assert odd["metadata"]["mad"]["mast_annotation"] == {"1.1": 2, "9.9": 1, "2.1": 1}  # kept as it came
    labels = stored_labels(engine)
    assert labels[("mad/MetaGPT/GPT-4o/12/odd_12", "judge:mast-llm", next(iter(labels))[2])][2] == (
        ("2.1", "", (), ""),)


def test_forced_mad_format_on_other_json_says_what_is_wrong(tmp_path, run_cli):
    p = tmp_path / "x.json"
    p.write_text(json.dumps([{"run_id": "r1"}]))
    res = run_cli("import", "--format", "mad", p)
    assert res.exit_code == 1 and "not a MAD record" in res.output


def _runs_from_db(engine):
    from sqlmodel import Session, select

    from app.runs.models import Run
    from app.runs.service import to_canonical

    with Session(engine) as s:
        return {r.run_id: to_canonical(s, r) for r in s.exec(select(Run)).all()}


# ------------------------------------------------------------------------- human-labelled, REST

def test_rest_human_file_three_annotators_agreement_matches_hand_computation(client, engine):
    with open(HUMAN, "rb") as f:
        r = client.post("/api/v1/imports", files={"file": ("MAD_human_labelled_dataset.json", f, "application/json")},
                        headers=client.hdr["admin"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["imported"], body["rejected"]) == (6, 0), body
    labels = stored_labels(engine)
    annotators = {k[1] for k in labels}
    assert annotators == {"mad:annotator_1", "mad:annotator_2", "mad:annotator_3"}
    assert {v[0] for v in labels.values()} == {"source"}  # a dataset's annotators: not people of this app
    # taxonomy by round: Round 1 the 18-mode draft (4.2 exists only there), Round 4 the published 14
    r1 = {k[1]: v for k, v in labels.items() if k[0].startswith("mad-human/Round_1/")}
    assert {k: v[2] for k, v in r1.items()} == {"mad:annotator_1": (("4.2", "", (), ""),), "mad:annotator_2": (),
                                                "mad:annotator_3": (("4.2", "", (), ""),)}
    assert {k[2].split("@")[0] for k in labels if k[0].startswith("mad-human/Round_1/")} == {"mast-draft-r1"}
    assert {k[2].split("@")[0] for k in labels if k[0].startswith("mad-human/Round_4/")} == {"mast"}
    h5 = client.get("/api/v1/runs/mad-human/Round_1/ChatDev/ProgramDev/h5", headers=client.hdr["admin"]).json()
    assert h5["metadata"]["mad"]["unmapped_codes"] == ["5.1"]  # reported, not mapped by guess
    assert h5["metadata"]["mad"]["modes"]["4.2"]["name"] == "Draft-only mode"

    rep = client.get("/api/v1/agreement?taxonomy=mast-draft-r2&n_boot=0", headers=client.hdr["admin"]).json()
    assert rep["annotators"] == ["mad:annotator_1", "mad:annotator_2", "mad:annotator_3"]
    assert rep["n_units"] == 4  # rounds 2 and 3 share the 17-mode draft
    rows = {m["mode"]: m for m in rep["modes"]}
    # by hand, mode 1.1 marks per run (3 annotators): (1,1,1) (1,1,0) (0,0,0) (1,0,0)
    #   per-run share of agreeing pairs 1, 1/3, 1, 1/3 -> percent 2/3
    #   Fleiss: P_bar = 2/3, p(1) = 6/12 -> P_e = 1/2 -> kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3
    assert rows["1.1"]["percent"]["value"] == pytest.approx(2 / 3)
    assert rows["1.1"]["fleiss_kappa"]["value"] == pytest.approx(1 / 3)
    assert rows["1.1"]["prevalence"] == pytest.approx(0.5)
    #   Cohen, pairwise over the 4 runs: a1 (1,1,0,1), a2 (1,1,0,0), a3 (1,0,0,0)
    #   a1-a2: po 3/4, pe 3/4*1/2 + 1/4*1/2 = 1/2 -> 1/2; a1-a3: po 1/2, pe 3/8 -> 1/5; a2-a3: po 3/4, pe 1/2 -> 1/2
    assert rows["1.1"]["cohen_kappa"]["value"] == pytest.approx((0.5 + 0.2 + 0.5) / 3)
    # mode 2.1: only run h3, by all three -> P_bar = 1, p(1) = 3/12 -> P_e = 0.625 -> kappa 1
    assert rows["2.1"]["fleiss_kappa"]["value"] == pytest.approx(1.0)
    assert rows["2.1"]["percent"]["value"] == pytest.approx(1.0)
    # mode 3.3: nobody marked it: no variation, kappa undefined
    assert rows["3.3"]["fleiss_kappa"]["value"] is None and rows["3.3"]["percent"]["value"] == 1.0
    assert rep["labels_without_agent"] == 9 and rep["blame_agreement"]["n_pairs"] == 0  # trace-level labels


# ------------------------------------------------------------------------- round trip

def test_mad_round_trip_import_export_import_gives_the_same_labels(engine, run_cli, tmp_path):
    from tests.conftest import _truncate

    assert run_cli("import", FULL).exit_code == 0
    before = stored_labels(engine)
    runs_before = _runs_from_db(engine)
    res = run_cli("export", "--format", "mad", "--out", tmp_path / "mad")
    assert res.exit_code == 0, res.output
    assert "mad: 8 runs" in res.output
    exported = json.loads((tmp_path / "mad" / "MAD_full_dataset.json").read_text())
    original = json.loads(FULL.read_text())
    key = lambda r: r["trace"]["key"]  # noqa: E731
    assert sorted(exported, key=key) == sorted(original, key=key)  # the very records, fields and nulls kept
    again = run_cli("import", tmp_path / "mad" / "MAD_full_dataset.json")
    assert again.output.strip().splitlines()[-1] == "imported 0, unchanged 8, rejected 0, warnings 0"
    _truncate(engine)
    fresh = run_cli("import", tmp_path / "mad" / "MAD_full_dataset.json")
    assert fresh.output.strip().splitlines()[-1] == "imported 8, unchanged 0, rejected 0, warnings 0"
    assert stored_labels(engine) == before
    assert _runs_from_db(engine) == runs_before


def test_rest_mad_json_matches_cli_export_and_blind_mode_refuses_annotators(client, engine, run_cli, tmp_path):
    assert run_cli("import", FULL).exit_code == 0
    res = client.get("/api/v1/exports/mad.json", headers=client.hdr["admin"])
    assert res.status_code == 200, res.text
    run_cli("export", "--format", "mad", "--out", tmp_path)
    assert res.json() == json.loads((tmp_path / "MAD_full_dataset.json").read_text())
    assert client.get("/api/v1/exports/mad.json", headers=client.hdr["annotator"]).status_code == 403
    assert res.headers["Content-Location"].startswith("/api/v1/jobs/")  # written by an export_mad job
    # asked for asynchronously: 202, then the same file from the job
    late = client.get("/api/v1/exports/mad.json", headers={**client.hdr["admin"], "Prefer": "respond-async"})
    assert late.status_code == 202, late.text
    job = client.get(late.headers["Location"], headers=client.hdr["admin"]).json()
    assert job["kind"] == "export_mad" and job["state"] == "done" and job["progress"]["done"] >= 2
    got = client.get(late.headers["Location"] + "/file", headers=client.hdr["admin"])
    assert got.status_code == 200 and got.json() == res.json()


def test_other_log_variants_magentic_one_lines_and_ag2_console():
    lines = ("[2024-10-01 10:00:00], Orchestrator (thought): The request is clear.\n"
             "[2024-10-01 10:00:01], Orchestrator (-> WebSurfer): Search for the page.\n"
             "[2024-10-01 10:00:09], WebSurfer: I searched for the page.\n"
             "[2024-10-01 10:00:12], Orchestrator (-> FileSurfer): Open the file.\n")
    style, segs = split_trajectory(lines, "Magentic-One")
    assert style == "magentic-one"
    assert [(s.actor, s.recipients, s.kind) for s in segs] == [
        ("Orchestrator", [], "log"), ("Orchestrator", ["WebSurfer"], "message"), ("WebSurfer", [], "message"),
        ("Orchestrator", ["FileSurfer"], "message")]
    assert "".join(lines[s.start:s.end] for s in segs) == lines
    console = ("user_proxy (to assistant):\n\nWhat is 2+2?\n\n" + "-" * 80 + "\nassistant (to user_proxy):\n\n4\n")
    style, segs = split_trajectory(console, "AG2")
    assert style == "ag2"
    assert [(s.actor, s.recipients) for s in segs] == [("user_proxy", ["assistant"]), ("assistant", ["user_proxy"])]


def test_nul_characters_in_a_trajectory_are_kept_through_the_round_trip(engine, run_cli, tmp_path):
    record = json.loads(FULL.read_text())[1]
    record["trace"]["trajectory"] = record["trace"]["trajectory"].replace("is_prime(7)", "is_prime(\x007)\x00")
    src = tmp_path / "nul.json"
    src.write_text(json.dumps([record]))
    res = run_cli("import", src)
    assert res.output.strip().splitlines()[-1] == "imported 1, unchanged 0, rejected 0, warnings 1", res.output
    (run,) = _runs_from_db(engine).values()
    assert "\x00" not in "".join(e["content"] for e in run["events"])
    assert len(run["metadata"]["mad"]["nul_offsets"]) == 2
    assert any("NUL" in w for w in run["metadata"]["import_warnings"])
    run_cli("export", "--format", "mad", "--out", tmp_path / "out")
    (back,) = json.loads((tmp_path / "out" / "MAD_full_dataset.json").read_text())
    assert back == record
