"""Smoke test against a real OpenAI-compatible endpoint (vLLM, llama.cpp server, Ollama, ...):
one judge with the built-in prompts over three demo runs. Runs only with A2ANNOTATE_JUDGE_TEST_URL
and A2ANNOTATE_JUDGE_TEST_MODEL set (see docs/judges.md); deselected otherwise."""
from __future__ import annotations

import os

import pytest
from sqlmodel import Session, select

from app.judges import service
from app.judges.models import JudgeResult
from tests.judges.helpers import load_demo

pytestmark = [pytest.mark.judge_live, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]


def test_real_endpoint_judges_three_demo_runs(engine, monkeypatch):
    monkeypatch.setenv("A2ANNOTATE_JUDGE_TEST_KEY", os.environ.get("A2ANNOTATE_JUDGE_TEST_KEY", "none"))
    runs = load_demo(engine, 3)
    output = os.environ.get("A2ANNOTATE_JUDGE_TEST_OUTPUT", "json_schema")
    text = (f"judge: 1\nname: live-smoke\nendpoint:\n  base_url: \"{os.environ['A2ANNOTATE_JUDGE_TEST_URL']}\"\n"
            f"  model: \"{os.environ['A2ANNOTATE_JUDGE_TEST_MODEL']}\"\n  api_key_env: A2ANNOTATE_JUDGE_TEST_KEY\n"
            f"taxonomy: a2-failures\nstrategy: all-at-once\noutput: {output}\n"
            "limits: {concurrency: 1, timeout_seconds: 600}\n")
    with Session(engine) as s:
        jv, _ = service.register(s, text)
        jr_id = service.plan(s, jv).id
        s.commit()
    prog = service.execute(engine, jr_id)
    with Session(engine) as s:
        res = s.exec(select(JudgeResult)).all()
        errors = [(r.error, (r.raw or "")[:300]) for r in res if r.state != "done"]
    assert prog.state == "done" and len(res) == len(runs) == 3
    assert not errors, errors
