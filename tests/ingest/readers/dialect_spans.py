"""Spans in the attribute dialects of Google ADK (tracer ``gcp.vertex.agent``) and Traceloop
OpenLLMetry, emitted with the real opentelemetry-sdk in the shapes those libraries write
(google/adk-python src/google/adk/telemetry.py, base_agent.py, functions.py; openllmetry's
semantic conventions and its OpenAI wrapper's gen_ai.prompt.N / gen_ai.completion.N attributes).
Names and texts are this test's own."""
from __future__ import annotations

import json

from opentelemetry import trace

from ..otlp_gen import _provider

T0 = 1_781_000_000_000_000_000
MS = 1_000_000
SESSION = "adk-sess-lighthouse-9"


def _adk_content(role: str, *parts: dict) -> dict:
    return {"role": role, "parts": list(parts)}


def adk_spans(extra_processor=None, style: str = "agent_run"):
    """An ADK run: the keeper agent calls a tool, then hands off to the lamp agent (transfer_to_agent).
    `extra_processor` (e.g. a real OTLP/HTTP exporter) also gets every span. `style`: ``agent_run``
    (ADK up to mid 2025: ``agent_run [NAME]`` spans) or ``invoke_agent`` (later releases:
    ``invoke_agent NAME`` with gen_ai.agent.name / description and gen_ai.conversation.id)."""

    def agent_span(name, parent_ctx, start, description, **attrs):
        if style == "agent_run":
            return tr.start_span(f"agent_run [{name}]", context=parent_ctx, start_time=start, attributes=attrs)
        return tr.start_span(f"invoke_agent {name}", context=parent_ctx, start_time=start, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
            "gen_ai.agent.description": description, "gen_ai.conversation.id": SESSION, **attrs})

    tp, exp = _provider("lighthouse-app")
    if extra_processor is not None:
        tp.add_span_processor(extra_processor)
    tr = tp.get_tracer("gcp.vertex.agent")
    t = T0
    user_text = "Is the north lamp due for a lens clean before the storm on Friday?"
    sys_text = "You keep the lighthouse log. Ask lamp_tender about anything optical."
    inv = tr.start_span("invocation", start_time=t)
    ctx = trace.set_span_in_context(inv)
    keeper = agent_span("keeper", ctx, t + 1 * MS, "Keeps the lighthouse log")
    kctx = trace.set_span_in_context(keeper)

    def call_llm(parent_ctx, start, contents, response, event_id, system=sys_text):
        span = tr.start_span("call_llm", context=parent_ctx, start_time=start, attributes={
            "gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "lamp-model-1",
            "gcp.vertex.agent.invocation_id": "e-77", "gcp.vertex.agent.session_id": SESSION,
            "gcp.vertex.agent.event_id": event_id,
            "gcp.vertex.agent.llm_request": json.dumps({"model": "lamp-model-1",
                                                        "config": {"system_instruction": system},
                                                        "contents": contents}),
            "gcp.vertex.agent.llm_response": json.dumps({"content": response, "usage_metadata": {
                "prompt_token_count": 80, "candidates_token_count": 12}})})
        return span

    def tool_span(parent_ctx, start, name, args, response, call_id, event_id):
        return tr.start_span(f"execute_tool {name}", context=parent_ctx, start_time=start, attributes={
            "gen_ai.system": "gcp.vertex.agent", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.description": f"{name} tool", "gen_ai.tool.call.id": call_id,
            **({"gen_ai.tool.type": "FunctionTool"} if style != "agent_run" else {}),
            "gcp.vertex.agent.tool_call_args": json.dumps(args), "gcp.vertex.agent.event_id": event_id,
            "gcp.vertex.agent.tool_response": json.dumps(response),
            "gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.llm_response": "{}"})

    user_turn = _adk_content("user", {"text": user_text})
    llm1 = call_llm(kctx, t + 2 * MS, [user_turn], _adk_content("model", {
        "function_call": {"id": "adk-c1", "name": "read_maintenance_log", "args": {"lamp": "north"}}}), "ev-1")
    l1ctx = trace.set_span_in_context(llm1)
    tool1 = tool_span(l1ctx, t + 3 * MS, "read_maintenance_log", {"lamp": "north"},
                      {"last_clean": "six weeks ago, salt haze noted"}, "adk-c1", "ev-2")
    tool1.end(end_time=t + 4 * MS)
    llm1.end(end_time=t + 5 * MS)
    llm2 = call_llm(kctx, t + 6 * MS, [user_turn], _adk_content("model", {
        "text": "Handing this to lamp_tender, who owns the optics."}, {
        "function_call": {"id": "adk-c2", "name": "transfer_to_agent", "args": {"agent_name": "lamp_tender"}}}),
        "ev-3")
    l2ctx = trace.set_span_in_context(llm2)
    tool2 = tool_span(l2ctx, t + 7 * MS, "transfer_to_agent", {"agent_name": "lamp_tender"}, {"result": None},
                      "adk-c2", "ev-4")
    tool2.end(end_time=t + 8 * MS)
    lamp = agent_span("lamp_tender", l2ctx, t + 9 * MS, "Tends the lamps and lenses",
                      **{"lighthouse.shift_note": "Night shift reports a cracked vent pane"})
    lctx = trace.set_span_in_context(lamp)
    llm3 = call_llm(lctx, t + 10 * MS, [user_turn], _adk_content("model", {
        "text": "Yes: clean the north lens on Thursday; salt haze dims it before a storm."}), "ev-5",
        system="You tend the lamps and lenses.")
    llm3.end(end_time=t + 11 * MS)
    lamp.end(end_time=t + 12 * MS)
    llm2.end(end_time=t + 13 * MS)
    keeper.end(end_time=t + 14 * MS)
    inv.end(end_time=t + 15 * MS)
    return {"lighthouse-app": exp}


def openllmetry_spans():
    """An OpenLLMetry-instrumented agent: workflow > agent > chat (flattened prompts / completions) and tool."""
    tp, exp = _provider("ferry-desk")
    tr = tp.get_tracer("opentelemetry.instrumentation.openai.v1", "0.40.0")
    t = T0 + 100 * MS
    wf = tr.start_span("ferry_booking.workflow", start_time=t, attributes={
        "traceloop.span.kind": "workflow", "traceloop.entity.name": "ferry_booking",
        "traceloop.workflow.name": "ferry_booking",
        "traceloop.entity.input": json.dumps({"inputs": {"request": "Two seats on the 07:15 ferry to Inis Mor"}}),
        "traceloop.entity.output": json.dumps({"outputs": "Booked seats 14A and 14B on the 07:15."})})
    wctx = trace.set_span_in_context(wf)
    agent = tr.start_span("booking_clerk.agent", context=wctx, start_time=t + 1 * MS, attributes={
        "traceloop.span.kind": "agent", "traceloop.entity.name": "booking_clerk",
        "traceloop.workflow.name": "ferry_booking"})
    actx = trace.set_span_in_context(agent)
    chat = tr.start_span("openai.chat", context=actx, start_time=t + 2 * MS, attributes={
        "llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "ferry-model",
        "gen_ai.response.model": "ferry-model-0601",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "You book ferry seats for walk-on passengers.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Two seats on the 07:15 ferry to Inis Mor",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.0.id": "call_f1", "gen_ai.completion.0.tool_calls.0.name": "reserve_seats",
        "gen_ai.completion.0.tool_calls.0.arguments": json.dumps({"sailing": "07:15", "seats": 2}),
        "llm.usage.total_tokens": 95})
    chat.end(end_time=t + 3 * MS)
    tool = tr.start_span("reserve_seats.tool", context=actx, start_time=t + 4 * MS, attributes={
        "traceloop.span.kind": "tool", "traceloop.entity.name": "reserve_seats",
        "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"sailing": "07:15", "seats": 2}}),
        "traceloop.entity.output": json.dumps({"outputs": "Seats 14A and 14B held until 06:45"})})
    tool.end(end_time=t + 5 * MS)
    chat2 = tr.start_span("openai.chat", context=actx, start_time=t + 6 * MS, attributes={
        "llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "ferry-model",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "You book ferry seats for walk-on passengers.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Two seats on the 07:15 ferry to Inis Mor",
        "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.content": "Seats 14A and 14B held until 06:45",
        "gen_ai.prompt.2.tool_call_id": "call_f1",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Booked seats 14A and 14B on the 07:15."})
    chat2.end(end_time=t + 7 * MS)
    agent.end(end_time=t + 8 * MS)
    wf.end(end_time=t + 9 * MS)
    return {"ferry-desk": exp}
