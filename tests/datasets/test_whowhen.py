"""Who&When records in: runs whose event seqs are the history indexes, hand-crafted roles parsed
into actor and recipient, and attribution labels (who and when, no mode) whose evidence is the
mistake step; attribution agreement between two label sets, through the CLI and REST."""
from __future__ import annotations

import json

from sqlmodel import Session

from app.ingest import detect_format, iter_path
from app.ingest.readers.mad import parse_role

from .conftest import DATA, stored_labels

WW = DATA / "whowhen"
WW_BAD = DATA / "whowhen_bad"
HAND = "whowhen/Hand-Crafted/q-albums-01"
ALGO = "whowhen/Algorithm-Generated/q-library-02"


def test_roles_with_hand_offs_parse_into_actor_and_recipient():
    assert parse_role("Orchestrator (-> WebSurfer)") == ("Orchestrator", ["WebSurfer"], None)
    assert parse_role("Orchestrator (thought)") == ("Orchestrator", [], "thought")
    assert parse_role("Orchestrator (termination condition)") == ("Orchestrator", [], "termination condition")
    assert parse_role("WebSurfer") == ("WebSurfer", [], None)


def test_records_become_runs_with_seq_equal_to_history_index_and_an_attribution():
    assert detect_format(WW / "Hand-Crafted" / "1.json") == "whowhen"
    items = {i.run["run_id"]: i.run for i in iter_path(WW)}
    assert set(items) == {HAND, ALGO}
    hand = items[HAND]
    record = json.loads((WW / "Hand-Crafted" / "1.json").read_text())
    assert [e["content"] for e in hand["events"]] == [h["content"] for h in record["history"]]
    assert [(e["seq"], e["actor"], e["recipients"], e["kind"]) for e in hand["events"]] == [
        (0, "user", [], "message"), (1, "Orchestrator", [], "log"), (2, "Orchestrator", ["WebSurfer"], "message"),
        (3, "WebSurfer", [], "message"), (4, "Orchestrator", [], "log"), (5, "Orchestrator", [], "log")]
    assert hand["events"][1]["data"]["note"] == "thought" and hand["events"][2]["visibility"] == "shared"
    assert hand["audits"] == [{"source": "who-and-when", "level": None, "mode": None, "agent": "Orchestrator",
                               "evidence": [4], "note": "It counted the 2011 album, outside the range.",
                               "metadata": {"taxonomy": "who-and-when", "annotator_kind": "human",
                                            "annotator": "whowhen:annotators", "mistake_type": None}}]
    assert hand["aggregate_score"] == 0.0 and hand["metadata"]["whowhen"]["ground_truth"] == "3"
    algo = items[ALGO]
    assert [a["id"] for a in algo["agents"]] == ["Research_Expert", "Computer_terminal", "Verification_Expert"]
    assert algo["agents"][0]["metadata"] == {"system_prompt": "You research facts."}
    assert algo["events"][0]["actor"] == "user" and algo["audits"][0]["evidence"] == [3]
    # the AG2 half is group chats: every turn is shared with all the other members
    members = ["user", "Research_Expert", "Computer_terminal", "Verification_Expert"]
    assert [(e["actor"], e["recipients"], e["visibility"]) for e in algo["events"]] == [
        (h.get("name", "user"), [m for m in members if m != h.get("name", "user")], "shared")
        for h in json.loads((WW / "Algorithm-Generated" / "2.json").read_text())["history"]]
    assert all(e["data"]["group_chat"] for e in algo["events"])
    # the hand-crafted half says who it writes to: a thought stays private
    assert [e["visibility"] for e in hand["events"]][1:3] == ["private", "shared"]


def test_cli_imports_a_folder_and_stores_attribution_labels(engine, run_cli):
    res = run_cli("import", WW)
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == "imported 2, unchanged 0, rejected 0, warnings 0"
    assert "unknown" not in res.output and "None" not in res.output  # attributions carry no mode: not unknown
    labels = stored_labels(engine)
    tax = next(iter(labels))[2]
    assert tax.startswith("who-and-when@")  # the attribution taxonomy; the dataset's annotators are a source
    assert labels[(HAND, "whowhen:annotators", tax)] == (
        "source", False, (("", "Orchestrator", (4,), "It counted the 2011 album, outside the range."),))
    assert labels[(ALGO, "whowhen:annotators", tax)][2][0][:3] == ("", "Verification_Expert", (3,))


def test_cli_malformed_records(engine, run_cli):
    res = run_cli("import", "--format", "whowhen", WW_BAD)
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1] == "imported 1, unchanged 0, rejected 2, warnings 1"
    assert "4.json: field history: required" in res.output
    assert "5.json:1: not valid JSON" in res.output
    assert stored_labels(engine) == {}  # the run with an out-of-range mistake step has no label


def test_attribution_agreement_between_two_label_sets_cli_and_rest(engine, run_cli, client, tmp_path):
    assert run_cli("import", WW).exit_code == 0
    second = tmp_path / "baseline.csv"  # a second attribution method: who and when, no mode
    second.write_text("annotator,run_id,mode,agent,evidence,taxonomy,note\n"
                      f"judge:baseline,{HAND},,Orchestrator,5,who-and-when,one step late\n"
                      f"judge:baseline,{ALGO},,Research_Expert,3,who-and-when,wrong agent\n")
    res = run_cli("import-labels", second)
    assert res.exit_code == 0, res.output
    rest = client.get("/api/v1/agreement/attribution?taxonomy=who-and-when&k=1", headers=client.hdr["admin"])
    assert rest.status_code == 200, rest.text
    att = rest.json()
    assert att["n_runs"] == 2 and att["k"] == 1 and att["labels_without_mode"] == 4
    assert att["agent"] == {"n_pairs": 2, "n_agree": 1, "proportion": 0.5}  # Orchestrator both; run 2 differs
    assert att["step_exact"] == {"n_pairs": 2, "n_agree": 1, "proportion": 0.5}  # 4 vs 5; 3 vs 3
    assert att["step_within_k"] == {"n_pairs": 2, "n_agree": 2, "proportion": 1.0}
    assert att["agent_and_step"] == {"n_pairs": 2, "n_agree": 0, "proportion": 0.0}
    exact = client.get("/api/v1/agreement/attribution?taxonomy=who-and-when&k=0", headers=client.hdr["admin"]).json()
    assert exact["step_within_k"]["n_agree"] == 1
    assert client.get("/api/v1/agreement/attribution", headers=client.hdr["annotator"]).status_code == 403
    cli = run_cli("agreement", "--taxonomy", "who-and-when", "--include-judges", "--n-boot", "0", "--k", "1")
    assert cli.exit_code == 0, cli.output
    assert "Attribution agreement over 2 run(s)" in cli.output
    assert "same agent: 50.0% (1/2)" in cli.output and "step within +-1: 100.0% (2/2)" in cli.output
    js = json.loads(run_cli("agreement", "--taxonomy", "who-and-when", "--include-judges", "--n-boot", "0", "--json",
                            "--no-gold").output)
    assert js["attribution_agreement"]["agent_and_step"]["n_agree"] == 0
    assert js["labels_without_mode"] == 4


def test_rest_upload_of_one_record_is_detected(client, engine):
    body = (WW / "Algorithm-Generated" / "2.json").read_bytes()
    r = client.post("/api/v1/imports", content=body, headers={**client.hdr["admin"], "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert (r.json()["imported"], r.json()["rejected"]) == (1, 0)
    run = client.get("/api/v1/runs/whowhen/who-and-when/q-library-02", headers=client.hdr["admin"])
    assert run.status_code == 200 and len(run.json()["events"]) == 5


def test_pages_and_annotation_api_show_attribution_and_trace_level_labels(engine, client, run_cli):
    from app.auth.service import create_user as make_user
    from tests.web.helpers import PASSWORD, login

    assert run_cli("import", WW, DATA / "MAD_full_dataset.json").exit_code == 0
    with Session(engine) as s:
        make_user(s, "rev", "reviewer", PASSWORD)
        s.commit()
    listed = client.get(f"/api/v1/annotations?run_id={HAND}", headers=client.hdr["admin"])
    assert listed.status_code == 200, listed.text
    (item,) = listed.json()["items"]
    assert item["labels"][0]["mode"] is None and item["labels"][0]["agent"] == "Orchestrator"
    login(client, "rev")
    page = client.get(f"/runs/{HAND}?taxonomy=who-and-when")
    assert page.status_code == 200 and "attribution" in page.text and "whowhen:annotators" in page.text
    assert 'id="att-beside"' in page.text and "Orchestrator at" in page.text  # the dataset's attribution, for reviewers
    mad = client.get("/runs/mad/ChatDev/GPT-4o/1/chatdev_tip_1?taxonomy=mast")
    assert mad.status_code == 200 and "judge:mast-llm" in mad.text
    adj = client.get(f"/adjudicate/{HAND}?taxonomy=who-and-when")  # attribution-only labels: nothing to adjudicate
    assert adj.status_code == 200, adj.text
    adj_mad = client.get("/api/v1/adjudication/mad/ChatDev/GPT-4o/1/chatdev_tip_1?taxonomy=mast",
                         headers=client.hdr["admin"])
    assert adj_mad.status_code == 200, adj_mad.text
    assert {(c["mode"], c["agent"]) for c in adj_mad.json()["candidates"]} == {("1.1", None), ("3.2", None)}
    dash = client.get("/agreement?taxonomy=mast&include_judges=true&n_boot=0")
    assert dash.status_code == 200 and "8 label(s) name no responsible agent" in dash.text
    att = client.get("/agreement?taxonomy=who-and-when&n_boot=0")
    assert att.status_code == 200 and "2 label(s) are attribution-only" in att.text
    assert 'id="attribution-agreement"' in att.text and "step within ±1" in att.text
    page = client.get("/reports?taxonomy=mast")
    assert page.status_code == 200 and "8 label(s) name no responsible agent" in page.text
    report = client.get("/api/v1/reports/outcomes?taxonomy=mast", headers=client.hdr["admin"])
    assert report.status_code == 200 and report.json()["labels_without_agent"] == 8


def test_rest_zip_of_dataset_folders_is_detected_per_file(client, engine):
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(WW.rglob("*.json")):
            z.write(p, p.relative_to(DATA))
        z.write(DATA / "MAD_full_bad.json", "mad/MAD_full_bad.json")
        for p in sorted(WW_BAD.glob("*.json")):
            z.write(p, p.relative_to(DATA))
    r = client.post("/api/v1/imports", files={"file": ("datasets.zip", buf.getvalue(), "application/zip")},
                    headers=client.hdr["admin"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["imported"], body["rejected"]) == (2 + 3 + 1, 2 + 2), body
    assert {e["location"] for e in body["errors"]} == {
        "datasets.zip/mad/MAD_full_bad.json:29:[1]: field trace.trajectory",
        "datasets.zip/mad/MAD_full_bad.json:38:[2]: field trace_id",
        "datasets.zip/whowhen_bad/4.json: field history", "datasets.zip/whowhen_bad/5.json:1"}
    ok = client.get(f"/api/v1/runs/{HAND}", headers=client.hdr["admin"])
    assert ok.status_code == 200 and ok.json()["audits"][0]["evidence"] == [4]
