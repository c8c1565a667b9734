"""AutoGen AgentChat and AG2 readers: team turns shared with every member, hand-offs as
delegations, tool calls and results private and linked, the user as principal, zero silent loss."""
from __future__ import annotations

import json
from pathlib import Path

from app.ingest.readers.autogen import AG2Reader, AutoGenReader

from .loss import assert_no_silent_loss, store_and_reload

DATA = Path(__file__).parent / "data"
SWARM = DATA / "autogen" / "greenhouse-swarm.json"
STREAM = DATA / "autogen" / "notice-stream.jsonl"
CHAT = DATA / "ag2" / "bridge-archive-chat.json"


def test_task_result_of_a_swarm():
    assert AutoGenReader().sniff(SWARM).score > 0.8 and not AG2Reader().sniff(SWARM)
    (item,) = AutoGenReader().read(SWARM, "greenhouse-swarm.json")
    run = item.run
    assert [p["id"] for p in run["principals"]] == ["user"]
    assert run["principals"][0]["objective"].startswith("My greenhouse sensor")
    assert {a["id"]: a["principal"] for a in run["agents"]} == {
        "triage": "user", "climate_specialist": "user", "reviewer": "user"}
    ev = run["events"]
    kinds = [(e["kind"], e["actor"], e["visibility"]) for e in ev]
    assert kinds == [("message", "user", "shared"), ("tool_call", "triage", "private"),
                     ("tool_result", "triage", "private"), ("log", "triage", "private"),
                     ("delegation", "triage", "shared"), ("message", "climate_specialist", "shared"),
                     ("message", "reviewer", "shared"), ("tool_call", "climate_specialist", "private"),
                     ("tool_result", "climate_specialist", "private"), ("message", "climate_specialist", "shared"),
                     ("log", "system", "private")]
    assert ev[0]["recipients"] == ["triage", "climate_specialist", "reviewer"]
    assert ev[4]["recipients"] == ["climate_specialist"]
    assert (ev[2]["parent_seq"], ev[8]["parent_seq"]) == (1, 7) and ev[8]["data"]["is_error"] is True
    assert ev[1]["data"]["arguments"] == {"sensor": "gh-3"} and ev[1]["data"]["models_usage"]["prompt_tokens"] == 80
    assert not any(e["actor"] == "system" for e in ev[:-1])  # only the stop reason is the team's
    assert run["metadata"]["stop_reason"] == "Text 'DONE' mentioned"
    warned = [w["message"] for w in item.warnings]
    assert any(w.startswith("task_result.team_note: carries text") for w in warned)
    assert any(w.startswith("messages[6].metadata.note_to_self: carries text") for w in warned)


def test_message_stream_with_multimodal_content():
    (item,) = AutoGenReader().read(STREAM, "notice-stream.jsonl")
    ev = item.run["events"]
    assert [e["actor"] for e in ev] == ["user", "writer", "editor"]
    assert ev[2]["content"] == "Fine as is.\n[image]" and ev[2]["recipients"] == ["user", "writer"]


def test_ag2_chat_result_group_chat_is_shared():
    assert AG2Reader().sniff(CHAT).score > 0.8 and not AutoGenReader().sniff(CHAT)
    (item,) = AG2Reader().read(CHAT, "bridge-archive-chat.json")
    run = item.run
    assert run["run_id"] == "ag2/4471"
    assert [p["id"] for p in run["principals"]] == ["Curator_proxy"]
    assert {a["id"] for a in run["agents"]} == {"Archivist", "Checker"}
    ev = run["events"]
    assert [(e["kind"], e["actor"], e["visibility"]) for e in ev] == [
        ("message", "Curator_proxy", "shared"), ("message", "Archivist", "shared"), ("tool_call", "Archivist", "private"),
        ("tool_result", "Archivist", "private"), ("message", "Archivist", "shared"), ("message", "Checker", "shared"),
        ("log", "Curator_proxy", "private")]
    assert ev[5]["recipients"] == ["Curator_proxy", "Archivist"] and ev[3]["parent_seq"] == 2
    assert ev[6]["content"] == "summary: The stone bridge (1612) is the oldest."


def test_ag2_plain_message_list(tmp_path):
    p = tmp_path / "groupchat.json"
    p.write_text(json.dumps(json.loads(CHAT.read_text())["chat_history"]))
    assert AG2Reader().sniff(p).score > 0
    (item,) = AG2Reader().read(p, "groupchat.json")
    assert item.run["run_id"] == "ag2/groupchat" and len(item.run["events"]) == 6


def test_zero_silent_loss_through_the_loader(engine):
    structural = (r"\.id$", r"\.source$", r"\.type$", r"created_at$", r"\.name$", r"call_id$", r"\.target$",
                  r"\.role$", r"format$", r"tool_call_id$")
    for reader, path, kept in ((AutoGenReader(), SWARM, (r"\.arguments<json>",)),
                               (AutoGenReader(), STREAM, (r"\.data$",)),
                               (AG2Reader(), CHAT, (r"\.arguments<json>",))):
        runs, warnings, summary = store_and_reload(engine, reader.read(path, path.name))
        assert summary.imported == 1 and summary.rejected == 0
        text = path.read_text()
        doc = [json.loads(line) for line in text.splitlines()] if path.suffix == ".jsonl" else json.loads(text)
        assert_no_silent_loss(doc, runs, warnings, structural=structural, kept=kept)


def test_streaming_chunks_of_a_whole_message_are_not_stored_twice(tmp_path):
    msgs = [{"id": "a", "source": "user", "type": "TextMessage", "content": "hi"},
            {"id": "c1", "source": "bot", "type": "ModelClientStreamingChunkEvent", "content": "hel", "full_message_id": "b"},
            {"id": "c2", "source": "bot", "type": "ModelClientStreamingChunkEvent", "content": "lo", "full_message_id": "b"},
            {"id": "c3", "source": "bot", "type": "ModelClientStreamingChunkEvent", "content": "orphan piece"},
            {"id": "b", "source": "bot", "type": "TextMessage", "content": "hello"}]
    p = tmp_path / "stream.json"
    p.write_text(json.dumps(msgs))
    (item,) = AutoGenReader().read(p, "stream.json")
    assert [(e["kind"], e["content"]) for e in item.run["events"]] == [
        ("message", "hi"), ("log", "orphan piece"), ("message", "hello")]
    assert item.run["metadata"]["import_notes"] == [
        "2 streaming chunk(s) of messages also present whole were not stored twice"]
