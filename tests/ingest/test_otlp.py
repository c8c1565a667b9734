"""OTLP/JSON and OpenInference trace files -> canonical runs (app.ingest.readers.otlp), via iter_path, the CLI
and POST /api/v1/imports. Fixtures: made with the real opentelemetry-sdk (otlp_gen) or by hand."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.ingest import detect_format, iter_path
from app.ingest.readers.otlp import attributes_dict, build_runs, norm_id, spans_from_json, unflatten

from . import otlp_gen

DATA = Path(__file__).parent / "data" / "otlp"


@pytest.fixture
def sdk_file(tmp_path):
    return otlp_gen.write_file(tmp_path / "traces.jsonl", {**otlp_gen.genai_spans(), **otlp_gen.openinference_spans()})


def _runs(path, **kw):
    items = list(iter_path(path, **kw))
    assert [str(i.error) for i in items if i.error] == []
    return {i.run["run_id"]: i.run for i in items}


def test_typed_values_ids_and_enums():
    attrs = attributes_dict([{"key": "a", "value": {"intValue": "12"}}, {"key": "b", "value": {"doubleValue": "NaN"}},
                             {"key": "c", "value": {"arrayValue": {"values": [{"boolValue": True}]}}},
                             {"key": "d", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"stringValue": "y"}}]}}}])
    assert attrs == {"a": 12, "b": "nan", "c": [True], "d": {"x": "y"}}
    assert norm_id("W47/95gDgQPSabYzgT/GDA==") == "5b8efff798038103d269b633813fc60c"  # base64 -> hex
    assert unflatten({"llm.input_messages.1.message.content": "b", "llm.input_messages.0.message.content": "a"},
                     "llm.input_messages") == [{"message": {"content": "a"}}, {"message": {"content": "b"}}]


def test_genai_conversation_from_two_processes(sdk_file):
    assert detect_format(sdk_file) == "otlp"
    runs = _runs(sdk_file)
    assert set(runs) == {otlp_gen.CONV, otlp_gen.SESSION}
    run = runs[otlp_gen.CONV]
    agents = {a["id"]: a for a in run["agents"]}
    assert list(agents) == ["planner", "booker", "payments-agent"]
    assert agents["planner"]["model"] == "model-a-0613" and agents["planner"]["metadata"]["agent_id"] == "agt-planner"
    ev = run["events"]
    assert [e["seq"] for e in ev] == list(range(len(ev)))
    call = next(e for e in ev if e["kind"] == "tool_call" and e["data"]["tool"]["name"] == "search_flights")
    assert call["data"]["tool"]["arguments"] == {"to": "LIS", "date": "2026-06-01"}
    result = next(e for e in ev if e["kind"] == "tool_result" and e["parent_seq"] == call["seq"])
    assert result["data"]["result"] == {"flights": [{"id": "TP123", "usd": 310}]}
    declined = next(e for e in ev if e["kind"] == "tool_result" and e["data"]["tool"]["name"] == "charge_card")
    assert declined["data"]["error"] == "card declined"
    handoff = next(e for e in ev if e["kind"] == "delegation")
    assert (handoff["actor"], handoff["recipients"], handoff["visibility"]) == ("planner", ["booker"], "shared")
    assert handoff["data"]["transfer_mode"] == "return_to_caller"
    booker_first = next(e for e in ev if e["actor"] == "booker")
    assert booker_first["parent_seq"] == handoff["seq"]  # parent span -> parent_seq, across processes
    a2a = next(e for e in ev if e["data"].get("attributes", {}).get("a2a.method.name"))
    assert (a2a["kind"], a2a["actor"], a2a["recipients"], a2a["content"]) == (
        "state_update", "booker", ["payments-agent"], "completed")
    assert a2a["data"]["span_events"][0]["name"] == "retry"
    chat = next(e for e in ev if e["data"].get("model"))
    assert chat["visibility"] == "private" and chat["content"] == "I will search flights first."
    assert chat["data"]["attributes"]["gen_ai.usage.input_tokens"] == 120  # everything kept in data
    assert run["metadata"]["services"] == ["booker-svc", "planner-svc"]


def test_openinference_session(sdk_file):
    run = _runs(sdk_file, format="openinference")[otlp_gen.SESSION]
    assert [a["id"] for a in run["agents"]] == ["researcher", "summarizer"]
    assert run["agents"][1]["metadata"]["graph_node_parent_id"] == "node-r"
    kinds = [(e["kind"], e["actor"]) for e in run["events"]]
    assert ("tool_call", "researcher") in kinds and ("delegation", "researcher") in kinds
    llm = next(e for e in run["events"] if e["data"].get("model") == "model-b")
    assert llm["content"] == 'web_search({"q": "tallest"})'
    assert llm["data"]["input_messages"][1]["message"]["content"] == "What is the tallest tower?"


def test_out_of_order_lines_give_the_same_run(tmp_path):
    a = _runs(otlp_gen.write_file(tmp_path / "a.jsonl", otlp_gen.genai_spans()))
    b = _runs(otlp_gen.write_file(tmp_path / "b.jsonl", otlp_gen.genai_spans(), per_span_lines=True))
    strip = lambda r: [(e["seq"], e["kind"], e["actor"], e["content"], e["parent_seq"]) for e in r["events"]]  # noqa: E731
    assert strip(a[otlp_gen.CONV]) == strip(b[otlp_gen.CONV])


def test_handwritten_pretty_file_keeps_every_typed_attribute():
    run = _runs(DATA / "handwritten.json")["5b8efff798038103d269b633813fc60c"]
    assert run["status"] == "error"  # the root span failed
    first = run["events"][0]
    assert (first["kind"], first["actor"], first["recipients"]) == ("delegation", "helpdesk-ui", ["triage"])
    attrs = first["data"]["attributes"]
    assert attrs["ticket.tags"] == ["vpn", "p2"] and attrs["ticket.meta"] == {"priority": 2, "score": 0.75}
    assert attrs["blob"] == {"bytes_base64": "aGVsbG8="} and first["data"]["otel"]["kind"] == 2
    assert first["data"]["otel"]["status"] == {"code": 2, "message": "escalation timeout"}
    assert {a["id"]: a.get("role") for a in run["agents"]} == {"triage": None, "helpdesk-ui": "workflow"}
    assert run["events"][-1]["content"] == "Escalated to network team"


def test_malformed_lines_are_named_and_the_rest_imports():
    items = list(iter_path(DATA / "malformed.jsonl"))
    errors = sorted(str(i.error) for i in items if i.error)
    assert len(errors) == 2
    assert "malformed.jsonl:2" in errors[0] and "not valid JSON" in errors[0]
    assert "malformed.jsonl:3" in errors[1] and "resourceSpans" in errors[1]
    assert [i.run["run_id"] for i in items if i.run] == ["5b8efff798038103d269b633813fc60c"]


def test_spans_without_ids_are_reported_not_fatal():
    spans, problems = spans_from_json({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]})
    assert spans == [] and "without traceId" in problems[0]
    assert build_runs(spans) == {}


def test_cli_and_rest_import(sdk_file, db_url, monkeypatch, engine):
    from app.auth.service import create_token, create_user
    from app.cli import cli
    from app.core.config import get_settings
    from app.core.db import get_engine
    from app.main import create_app

    monkeypatch.setenv("DATABASE_URL", db_url)
    get_settings.cache_clear()
    get_engine.cache_clear()
    try:
        res = CliRunner().invoke(cli, ["import", "--format", "otlp", str(sdk_file)], catch_exceptions=False)
        assert res.exit_code == 0 and res.output.strip().endswith("imported 2, unchanged 0, rejected 0, warnings 0"), res.output
        res = CliRunner().invoke(cli, ["import", str(DATA / "malformed.jsonl")], catch_exceptions=False)
        assert res.exit_code == 1 and "imported 1, unchanged 0, rejected 2" in res.output
    finally:
        get_engine().dispose()
        get_engine.cache_clear()
        get_settings.cache_clear()
    with Session(engine) as s:
        token = create_token(s, create_user(s, "rev", "reviewer", "password123"))
        s.commit()
    client = TestClient(create_app(engine))
    h = {"Authorization": f"Bearer {token}"}
    r = client.post("/api/v1/imports", headers=h, files={"file": ("t.jsonl", sdk_file.read_bytes(), "application/x-ndjson")})
    assert r.status_code == 200 and (r.json()["imported"], r.json()["unchanged"]) == (0, 2), r.text
    r = client.post("/api/v1/imports", headers={**h, "Content-Type": "application/json"},
                    content=(DATA / "handwritten.json").read_bytes())
    assert r.json()["imported"] == 0 and r.json()["unchanged"] == 1  # already imported by the CLI above
    got = client.get(f"/api/v1/runs/{otlp_gen.CONV}", headers=h).json()
    assert [a["id"] for a in got["agents"]] == ["planner", "booker", "payments-agent"]


def test_older_genai_conventions_prompt_attributes_and_events():
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "old-app"}}]},
                              "scopeSpans": [{"spans": [
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat m",
         "startTimeUnixNano": "1780000000000000000", "endTimeUnixNano": "1780000001000000000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                        {"key": "gen_ai.prompt.0.role", "value": {"stringValue": "user"}},
                        {"key": "gen_ai.prompt.0.content", "value": {"stringValue": "hello?"}}],
         "events": [{"name": "gen_ai.choice", "timeUnixNano": "1780000000900000000",
                     "attributes": [{"key": "message", "value": {"stringValue": '{"role": "assistant", "content": "hi!"}'}}]}]},
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "c7ad6b7169203331", "name": "create_agent x",
         "startTimeUnixNano": "1780000002000000000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "create_agent"}}]}]}]}]}
    spans, _ = spans_from_json(doc)
    run = build_runs(spans)["0af7651916cd43dd8448eb211c80319c"]
    assert [(e["kind"], e["actor"], e["content"]) for e in run["events"]] == [
        ("message", "old-app", "hi!"), ("log", "old-app", "create_agent x")]
