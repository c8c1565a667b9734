"""The import budget (issue 23, row 3): blank lines, comment lines and other content-free input
count against MAX_IMPORT_RECORDS, a zip member may unpack to at most MAX_ZIP_RATIO times its
compressed size, an import has IMPORT_CPU_SECONDS when it is not a job and can be cancelled; past
any of them the whole import stops, naming the limit, and what was stored before stays.
Sizes scaled down (full sizes: bench/bench_attacks.py)."""
from __future__ import annotations

import io
import json
import time
import zipfile

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token
from app.core.config import get_settings
from app.ingest import iter_path
from app.ingest.budget import ImportBudget, use
from app.main import create_app
from tests.annotations.factories import make_user
from tests.hardening import hostile


def _line(rid: str) -> bytes:
    return json.dumps(hostile.run(rid)).encode() + b"\n"


def _errors(items) -> list[str]:
    return [str(i.error) for i in items if i.error]


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_blank_lines_count_and_the_whole_import_stops(tmp_path):
    """3 million blank lines between two runs, a budget of one million records: the import
    stops at the budget (it read on through every blank line, a line at a time)."""
    p = tmp_path / "runs.jsonl"
    p.write_bytes(_line("before") + b"\n" * 3_000_000 + _line("after"))
    t = time.process_time()
    with use(ImportBudget(max_records=1_000_000)):
        items = list(iter_path(p))
    assert time.process_time() - t < 5
    assert [i.run["run_id"] for i in items if i.run] == ["before"]
    (err,) = _errors(items)
    assert "import stopped: more than 1000000 records" in err and "MAX_IMPORT_RECORDS" in err


def test_blank_lines_before_any_content_are_counted_while_sniffing(tmp_path, monkeypatch):
    monkeypatch.setenv("MAX_IMPORT_RECORDS", "100000")
    get_settings.cache_clear()
    try:
        p = tmp_path / "upload"
        p.write_bytes(b"\r\n" * 500_000 + _line("late"))
        items = list(iter_path(p))
    finally:
        get_settings.cache_clear()
    (err,) = _errors(items)
    assert "import stopped: more than 100000 records" in err and not any(i.run for i in items)


def test_comment_lines_of_an_sse_log_and_array_elements_count_too(tmp_path):
    sse = tmp_path / "traffic.sse"
    sse.write_bytes(b"data: {}\n" + b": keep-alive\n" * 5000)
    arr = tmp_path / "runs.json"
    arr.write_bytes(b"[" + b",".join([b"{}"] * 5000) + b"]")
    for p in (sse, arr):
        with use(ImportBudget(max_records=1000)):
            errs = _errors(iter_path(p))
        assert any("import stopped: more than 1000 records" in e for e in errs), (p, errs)


def test_a_zip_member_over_the_compression_ratio_is_refused_while_unpacking(tmp_path):
    """A member of 64 MiB of blank lines (about 1,000:1) stops within the first MiBs unpacked."""
    p = tmp_path / "blank.zip"
    p.write_bytes(_zip({"ok.jsonl": _line("fine"), "runs.jsonl": b"\n" * (64 << 20) + _line("x")}))
    t = time.process_time()
    items = list(iter_path(p))
    assert time.process_time() - t < 3
    (err,) = _errors(items)
    assert "'runs.jsonl' unpacks to more than 200 times its compressed size (limit MAX_ZIP_RATIO)" in err
    # ordinary JSON Lines compress far less than that and unpack as before
    q = tmp_path / "ok.zip"
    q.write_bytes(_zip({"runs.jsonl": b"".join(_line(f"r{i}") for i in range(20_000))}))
    assert len([i for i in iter_path(q) if i.run]) == 20_000


def test_cpu_budget_and_cancellation_stop_the_import(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_bytes(b"".join(_line(f"r{i}") for i in range(40_000)))
    budget = ImportBudget(max_cpu_seconds=0.05)
    budget.start_clock()
    with use(budget):
        items = list(iter_path(p))
    assert "more than 0.05 CPU seconds (limit IMPORT_CPU_SECONDS" in _errors(items)[-1]
    assert 0 < len([i for i in items if i.run]) < 40_000
    budget = ImportBudget()
    seen = []
    with use(budget):
        for item in iter_path(p):
            seen.append(item)
            if len(seen) == 10:
                budget.cancel("the client disconnected")
    assert _errors(seen) == [f"{p}: import stopped: the client disconnected; nothing after this was read"]
    assert len(seen) == 11  # stopped at the next record


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_rest_import_reports_a_stopped_import_and_keeps_the_runs_before(engine, monkeypatch):
    monkeypatch.setenv("MAX_IMPORT_RECORDS", "50000")
    get_settings.cache_clear()
    try:
        with Session(engine) as s:
            tok = create_token(s, make_user(s, "budget-admin", "admin"), "t")
            s.commit()
        client = TestClient(create_app(engine))
        body = _line("kept-1") + _line("kept-2") + b"\n" * 100_000 + _line("never")
        res = client.post("/api/v1/imports", content=body,
                          headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/x-ndjson"})
    finally:
        get_settings.cache_clear()
    assert res.status_code == 200
    out = res.json()
    assert out["imported"] == 2, out
    assert out["errors"][-1]["message"].startswith("import stopped: more than 50000 records")
    assert out["errors"][-1]["location"] == "request-body.jsonl"
