"""Canonical readers (array, JSON Lines, single object, directory of files) and format detection."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.ingest import ReadSummary, detect_format, iter_path

from .factory import small_run

DATA = Path(__file__).parent / "data"


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_jsonl_bad_line_is_an_error_for_that_line_only(tmp_path):
    p = tmp_path / "runs.jsonl"
    _write_lines(p, [json.dumps(small_run(0)), "", "{not json", json.dumps(small_run(1)), "   ",
                     json.dumps(small_run(2))])
    items = list(iter_path(p))
    assert [i.run["run_id"] for i in items if i.run] == ["r0", "r1", "r2"]
    errors = [i.error for i in items if i.error]
    assert len(errors) == 1
    assert errors[0].where.file == str(p) and errors[0].where.line == 3
    assert str(errors[0]).startswith(f"{p}:3: not valid JSON")


def test_jsonl_first_line_bad_still_reads_as_jsonl(tmp_path):
    p = tmp_path / "runs.txt"  # no telling extension: the layout is sniffed
    _write_lines(p, ["{oops", json.dumps(small_run(5))])
    items = list(iter_path(p, format="canonical"))
    assert [i.run["run_id"] for i in items if i.run] == ["r5"]
    assert [i.error.where.line for i in items if i.error] == [1]


@pytest.mark.parametrize("mutate, field, run_id", [
    (lambda r: r.pop("run_id"), "run_id", None),
    (lambda r: r.update(status="finished"), "status", "r1"),
    (lambda r: r["events"][0].update(seq=3), "events[0].seq", "r1"),
    (lambda r: r["events"][0].update(actor="mallory"), "events[0].actor", "r1"),
])
def test_invalid_runs_are_rejected_one_by_one_with_file_line_run_and_field(tmp_path, mutate, field, run_id):
    bad = small_run(1)
    mutate(bad)
    p = tmp_path / "runs.jsonl"
    _write_lines(p, [json.dumps(small_run(0)), json.dumps(bad), json.dumps(small_run(2))])
    items = list(iter_path(p))
    assert [i.run["run_id"] for i in items if i.run] == ["r0", "r2"]
    (err,) = [i.error for i in items if i.error]
    assert (err.where.line, err.field, err.run_id) == (2, field, run_id)
    expected_prefix = f"{p}:2: " + (f"run {run_id}: " if run_id else "") + f"field {field}: "
    assert str(err).startswith(expected_prefix)


def test_json_array_errors_name_the_item_and_the_rest_imports(tmp_path):
    bad = small_run(1)
    bad["scenario"]["alignment"] = "hostile"
    p = tmp_path / "runs.json"
    p.write_text(json.dumps([small_run(0), bad, small_run(2)]), encoding="utf-8")
    assert detect_format(p) == "canonical"
    items = list(iter_path(p))
    assert [i.run["run_id"] for i in items if i.run] == ["r0", "r2"]
    (err,) = [i.error for i in items if i.error]
    assert str(err).startswith(f"{p}:[1]: run r1: field scenario.alignment: ")


def test_truncated_json_array_keeps_what_came_before(tmp_path):
    p = tmp_path / "runs.json"
    text = json.dumps([small_run(0), small_run(1)])
    p.write_text(text[:-30], encoding="utf-8")
    items = list(iter_path(p))
    assert [i.run["run_id"] for i in items if i.run] == ["r0"]
    (err,) = [i.error for i in items if i.error]
    assert err.where.pointer == "[1]" and "invalid JSON" in err.message


def test_single_pretty_object_file(tmp_path):
    p = tmp_path / "one.json"
    p.write_text(json.dumps(small_run(7), indent=2), encoding="utf-8")
    assert detect_format(p) == "canonical"
    (item,) = list(iter_path(p))
    assert item.run["run_id"] == "r7" and item.run["events"][0]["content"] == "hi 7"


def test_directory_of_run_files_and_unused_report(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(small_run(1), indent=1), encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(json.dumps(small_run(2)) + "\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("# not data\n", encoding="utf-8")
    summary = ReadSummary()
    items = list(iter_path(tmp_path, summary=summary))
    assert sorted(i.run["run_id"] for i in items if i.run) == ["r1", "r2"]
    assert summary.runs == 2 and summary.errors == []
    assert summary.unused_files == [f"{tmp_path}/notes.md"]
    assert detect_format(tmp_path) == "tree"


def test_detect_format_sniffs_wire_shapes(tmp_path):
    cases = {
        "bare.jsonl": '{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}\n',
        "env.jsonl": '{"ts": null, "direction": "request", "body": {"jsonrpc": "2.0"}}\n',
        "ctx.jsonl": '{"type": "run_context", "context_id": "c", "run": {}}\n',
        "stream.txt": ": comment\nevent: message\ndata: {}\n\n",
        "pretty.json": '{\n  "jsonrpc": "2.0",\n  "id": 1\n}\n',
        "run.jsonl": json.dumps(small_run(0)) + "\n",
        "array.json": "\n\n  [\n]",
    }
    expected = {"bare.jsonl": "wire", "env.jsonl": "wire", "ctx.jsonl": "wire", "stream.txt": "wire",
                "pretty.json": "wire", "run.jsonl": "canonical", "array.json": "canonical"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert detect_format(tmp_path / name) == expected[name], name
    for name in ("v10_envelopes.jsonl", "v10_stream.sse", "v03_mixed.log"):
        assert detect_format(DATA / "wire" / name) == "wire"


def test_unknown_format_and_missing_path(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(Exception, match="cannot tell the format"):
        detect_format(p)
    (item,) = list(iter_path(p))
    assert item.error is not None and "cannot tell the format" in item.error.message
    (item,) = list(iter_path(tmp_path / "missing.json"))
    assert "no such file" in item.error.message
    with pytest.raises(ValueError, match="unknown format"):
        list(iter_path(p, format="yaml"))


def test_empty_array_and_empty_file(tmp_path):
    (tmp_path / "e.json").write_text("[]", encoding="utf-8")
    (tmp_path / "e.jsonl").write_text("\n\n", encoding="utf-8")
    assert list(iter_path(tmp_path / "e.json")) == []
    assert list(iter_path(tmp_path / "e.jsonl", format="canonical")) == []
