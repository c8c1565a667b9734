"""OTLP dialects beyond GenAI / OpenInference (app.ingest.readers.otlp_dialects): Google ADK's
``gcp.vertex.agent.*`` spans and OpenLLMetry's ``gen_ai.prompt.N`` / ``gen_ai.completion.N`` and
``traceloop.*`` spans, made with the real opentelemetry-sdk, through the registry and the loader."""
from __future__ import annotations

import json

import pytest

from app.ingest import detect_format, iter_path
from app.ingest.readers.otlp_dialects import ATTRS, carries_text, row_of, unmapped_text

from .. import otlp_gen
from . import dialect_spans
from .stored_text import import_file, missing_texts


@pytest.fixture
def adk_file(tmp_path):
    return otlp_gen.write_file(tmp_path / "adk.otlp.jsonl", dialect_spans.adk_spans())


@pytest.fixture
def ollm_file(tmp_path):
    return otlp_gen.write_file(tmp_path / "openllmetry.otlp.jsonl", dialect_spans.openllmetry_spans())


def _run(path):
    items = list(iter_path(path))
    assert [str(i.error) for i in items if i.error] == []
    (item,) = items
    return item


def _attributes(path) -> dict:
    """Every span's attributes, keyed by attribute name (the OTLP file's text-bearing values)."""
    out: dict = {}
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    for kv in sp.get("attributes", []):
                        out.setdefault(kv["key"], []).append(next(iter(kv["value"].values())))
    return out


def test_the_table_names_each_dialect_and_text_detection():
    assert {r.dialect for r in ATTRS} == {"genai", "openinference", "openllmetry", "adk"}
    assert row_of("gen_ai.prompt.3.tool_calls.0.arguments").dialect == "openllmetry"
    assert row_of("gcp.vertex.agent.llm_response").role == "output"
    assert carries_text("Fog after six") and not carries_text("lamp-model-1") and not carries_text("{}")
    assert carries_text('{"note": "two words"}')
    assert unmapped_text({"gen_ai.request.model": "m", "x.note": "free text here", "x.n": 3}) == ["x.note"]


def test_adk_spans_give_text_tools_results_and_a_hand_off(adk_file):
    assert detect_format(adk_file) == "otlp"
    item = _run(adk_file)
    run = item.run
    assert run["run_id"] == dialect_spans.SESSION  # gcp.vertex.agent.session_id groups the run
    assert [p["id"] for p in run["principals"]] == ["user"]
    ev = run["events"]
    assert not any(e["actor"] == "system" for e in ev) and all(e["content"] for e in ev)
    user = next(e for e in ev if e["actor"] == "user")
    assert (user["recipients"], user["visibility"]) == (["keeper"], "shared")
    assert user["content"].startswith("Is the north lamp due")
    call = next(e for e in ev if e["kind"] == "tool_call")
    result = next(e for e in ev if e["kind"] == "tool_result")
    assert (call["actor"], call["visibility"], result["parent_seq"]) == ("keeper", "private", call["seq"])
    assert call["data"]["tool"]["arguments"] == {"lamp": "north"}
    assert "salt haze noted" in result["content"]
    (hand,) = [e for e in ev if e["kind"] == "delegation"]
    assert (hand["actor"], hand["recipients"], hand["visibility"]) == ("keeper", ["lamp_tender"], "shared")
    answer = ev[-1]
    assert (answer["actor"], answer["recipients"], answer["content"]) == (
        "lamp_tender", ["user"], "Yes: clean the north lens on Thursday; salt haze dims it before a storm.")
    assert {e["actor"] for e in ev if e["data"].get("role") == "system"} == {"keeper", "lamp_tender"}
    # the custom attribute that carries text and maps to nothing is a warning (it was silent before)
    assert [w["message"].split(" carries")[0] for w in item.warnings] == ["span attribute 'lighthouse.shift_note'"]


def test_openllmetry_spans_give_prompts_completions_and_tools(ollm_file):
    item = _run(ollm_file)
    ev = item.run["events"]
    assert not any(e["actor"] == "system" for e in ev) and all(e["content"] for e in ev)
    user = next(e for e in ev if e["actor"] == "user")
    assert (user["content"], user["recipients"]) == ("Two seats on the 07:15 ferry to Inis Mor", ["booking_clerk"])
    asks = next(e for e in ev if e["kind"] == "message" and e["actor"] == "booking_clerk" and not e["recipients"])
    assert asks["content"] == 'reserve_seats({"sailing": "07:15", "seats": 2})'  # completion.0.tool_calls.0
    tool = next(e for e in ev if e["kind"] == "tool_call")
    res = next(e for e in ev if e["kind"] == "tool_result")
    assert tool["data"]["tool"]["name"] == "reserve_seats" and res["parent_seq"] == tool["seq"]
    assert res["content"] == "Seats 14A and 14B held until 06:45"
    final = next(e for e in ev if e["content"] == "Booked seats 14A and 14B on the 07:15.")
    assert (final["actor"], final["recipients"]) == ("booking_clerk", ["user"])
    assert item.warnings == []


def test_every_attribute_text_is_stored_or_warned_on_both_databases(engine, adk_file, ollm_file):
    for path in (adk_file, ollm_file):
        summary, _ = import_file(engine, path)
        assert (summary.imported, summary.rejected) == (1, 0)
        rid = _run(path).run["run_id"]
        # tool descriptions are kept in data.tool.description (a tool's label, not conversation text)
        assert missing_texts(_attributes(path), engine, [rid], summary.warnings,
                             kept=["gen_ai.tool.description"]) == []


def _shape(run):
    return [(e["kind"], e["actor"], e["recipients"], e["visibility"], e["content"]) for e in run["events"]]


def test_the_otlp_endpoint_body_gives_the_same_adk_run(adk_file):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from app.ingest.items import item_from_raw
    from app.ingest.readers.otlp import build_runs, read_body

    (exp,) = dialect_spans.adk_spans().values()
    spans, problems = read_body(encode_spans(exp.get_finished_spans()).SerializeToString(), "application/x-protobuf")
    assert problems == []
    item = item_from_raw(build_runs(spans)[dialect_spans.SESSION], "POST /v1/traces")
    assert item.ok, item.error
    assert _shape(item.run) == _shape(_run(adk_file).run)
    assert [w["message"].split(" carries")[0] for w in item.warnings] == ["span attribute 'lighthouse.shift_note'"]


def test_the_live_otlp_endpoint_builds_the_adk_run(engine, adk_file):
    """The real OTLP/HTTP exporter sends ADK-shaped spans to POST /v1/traces, one batch per span."""
    import httpx
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from sqlmodel import Session

    from app.auth.service import create_token, create_user
    from tests.e2e.live import LiveServer

    with Session(engine) as s:
        token = create_token(s, create_user(s, "adk-collector", "reviewer", "password123"))
        s.commit()
    with LiveServer(engine) as url:
        sender = SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces",
                                                      headers={"Authorization": f"Bearer {token}"}))
        dialect_spans.adk_spans(sender)
        r = httpx.get(f"{url}/api/v1/runs/{dialect_spans.SESSION}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert _shape(r.json()) == _shape(_run(adk_file).run)


def test_later_adk_releases_invoke_agent_spans_give_the_same_run(adk_file, tmp_path):
    newer = otlp_gen.write_file(tmp_path / "adk-newer.otlp.jsonl", dialect_spans.adk_spans(style="invoke_agent"))
    old, new = _run(adk_file).run, _run(newer).run
    assert new["run_id"] == dialect_spans.SESSION
    strip = [s for s in _shape(old) if not (s[0] == "log" and s[4].startswith("agent_run ["))]
    assert [s for s in _shape(new) if not (s[0] == "log" and s[4].startswith("invoke_agent "))] == strip
    agents = {a["id"]: a for a in new["agents"]}
    assert agents["lamp_tender"]["metadata"]["description"] == "Tends the lamps and lenses"
