"""The profile language: JMESPath paths, agents and principals from the actors seen, chat roles to
any actor, visibility rules, one record to several events, and a schema that names every bad key."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.ingest import iter_path
from app.ingest.loader import import_paths
from app.ingest.profile import ProfileError, load_profile, path_get

PROFILE = """\
profile: 1
name: chat-with-tools
run_dirs: {marker: [episode.json]}
files: {episode.json: metadata, messages.jsonl: conversation}
keys:
  metadata: {run_id: episode_id, scenario_id: "task.id", family: "task.domain"}
  conversation:
    actor: speaker
    chat_role: role
    content: "content[?type=='text'].text | join('\\n', @)"
    tool_calls: tool_calls
    call_id: tool_call_id
values:
  chat_role:
    user: {kind: message, actor: principal}
    assistant: {kind: message, actor: agent}
    tool: {kind: tool_result, actor: system}
agents: {from: actors, principal: customer, principal_name: "The customer"}
principals: {from: actors, match: [customer]}
visibility:
  - {when: {kind: tool_result}, visibility: private, recipients: none}
  - {when: {kind: message, recipient: none}, visibility: shared, recipients: all_others}
"""


def _tree(root: Path) -> Path:
    run = root / "runs" / "ep-1"
    run.mkdir(parents=True)
    (run / "episode.json").write_text(json.dumps({"episode_id": "ep-1", "task": {"id": "shop/7", "domain": "retail"}}))
    lines = [
        {"speaker": "customer", "role": "user", "content": [{"type": "text", "text": "Where is my order #12?"}]},
        {"speaker": "helper", "role": "assistant",
         "content": [{"type": "text", "text": "Let me look it up."}],
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "find_order", "arguments": "{\"order\": 12}"}}]},
        {"speaker": "helper", "role": "tool", "tool_call_id": "call_1",
         "content": [{"type": "text", "text": "{\"status\": \"shipped\"}"}]},
        {"speaker": "helper", "role": "assistant", "content": [{"type": "text", "text": "It has shipped."}]},
    ]
    (run / "messages.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    prof = root / "profile.yaml"
    prof.write_text(PROFILE)
    return prof


def test_path_get_reads_jmespath_and_plain_dotted_keys():
    doc = {"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
           "run-info": {"id": 3}, "failure mode": 1}
    assert path_get(doc, "content[0].text") == (True, "a")
    assert path_get(doc, "content[?type=='text'].text") == (True, ["a", "b"])
    assert path_get(doc, "run-info.id") == (True, 3)  # an old dotted key with a dash reads as before
    assert path_get(doc, "failure mode") == (True, 1)
    assert path_get(doc, "content[5].text") == (False, None)


def test_one_record_to_several_events_roles_to_any_actor_and_visibility_rules(tmp_path):
    prof = _tree(tmp_path)
    (item,) = [i for i in iter_path(tmp_path / "runs", profile=prof)]
    assert item.error is None, item.error
    run = item.run
    assert [p["id"] for p in run["principals"]] == ["customer"]
    assert [(a["id"], a["principal"]) for a in run["agents"]] == [("helper", "customer")]
    got = [(e["seq"], e["kind"], e["actor"], e["recipients"], e["visibility"], e["content"], e["parent_seq"])
           for e in run["events"]]
    assert got == [
        (0, "message", "customer", ["helper"], "shared", "Where is my order #12?", None),
        (1, "message", "helper", ["customer"], "shared", "Let me look it up.", None),
        (2, "tool_call", "helper", [], "private", 'find_order({"order": 12})', None),
        (3, "tool_result", "system", [], "private", '{"status": "shipped"}', 2),
        (4, "message", "helper", ["customer"], "shared", "It has shipped.", None),
    ]
    assert run["events"][2]["data"]["arguments"] == {"order": 12} and run["events"][2]["data"]["call_id"] == "call_1"
    # nothing attributed to system but what the profile says; no text left unmapped
    assert not [w for w in item.warnings if "carry text" in w["message"]], item.warnings


def test_the_faithful_profile_imports_under_strict_on_both_databases(engine, tmp_path):
    prof = _tree(tmp_path)
    summary = import_paths(engine, [str(tmp_path / "runs")], profile=str(prof), strict=True)
    assert (summary.imported, summary.rejected) == (1, 0), summary.errors


@pytest.mark.parametrize("bad, named", [
    ("keys: {conversation: {sender: from}}", "keys.conversation.sender: unknown key"),
    ("keys: {conversation: {content: 'content[?'}}", "keys.conversation.content: path 'content[?'"),
    ("visibility: [{when: {kind: message, speaker: x}}]", "visibility[0].when.speaker: unknown key"),
    ("principals: {from: actors, matches: [u]}", "principals.matches: unknown key"),
    ("keep: {conversation: 3}", "keep.conversation"),
])
def test_the_schema_names_every_bad_key(bad, named):
    with pytest.raises(ProfileError) as exc:
        load_profile(__import__("yaml").safe_load(f"profile: 1\nname: x\n{bad}\n"))
    assert named in str(exc.value)


def test_private_sections_are_cut_out_of_the_scenario_text_by_heading(tmp_path):
    prof = _tree(tmp_path)
    run = tmp_path / "runs" / "ep-1"
    (run / "brief.md").write_text("# Order support\n\nA customer asks about a parcel.\n\n"
                                  "## Private (helper)\n\nRefund at most 20 USD.\n\n### detail\n\nnever more\n\n"
                                  "## Public rules\n\nBe polite.\n")
    text = prof.read_text().replace("files: {episode.json: metadata, messages.jsonl: conversation}",
                                    "files: {episode.json: metadata, messages.jsonl: conversation, brief.md: scenario_text}")
    prof.write_text(text + "private_state:\n  - {from: scenario_text, heading: 'Private ({role})', as: brief}\n")
    (item,) = list(iter_path(tmp_path / "runs", profile=prof))
    sc = item.run["scenario"]
    assert "Refund" not in sc["description"] and "never more" not in sc["description"]
    assert "Be polite." in sc["description"] and sc["title"] == "Order support"
    (helper,) = item.run["agents"]
    assert helper["private_state"]["brief"] == "Refund at most 20 USD.\n\n### detail\n\nnever more"
