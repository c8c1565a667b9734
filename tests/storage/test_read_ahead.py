"""Reading in a second process while the importer writes (issue 14): the same items in the same
order, errors naming file and line, a reader's exception raised in the importer."""
from __future__ import annotations

import json

import pytest

from app.ingest import iter_path
from app.ingest.loader import _read_in_child
from tests.storage.test_loader import demo_runs


def _file(tmp_path):
    runs = demo_runs(21, seed=5)
    lines = [json.dumps(r) for r in runs]
    lines.insert(7, "{not json")
    lines.insert(12, json.dumps({"run_id": "bad", "scenario": {"id": "s", "family": "f"}, "status": "nope"}))
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _view(item):
    return (item.run, item.source, item.plain_floats, None if item.error is None else str(item.error),
            [str(e) for e in item.more_errors])


def test_items_from_the_reading_process_are_the_items_read_here(tmp_path):
    path = _file(tmp_path)
    here = [_view(i) for i in iter_path(path)]
    there = [_view(i) for i in _read_in_child(lambda: iter_path(path))]
    assert there == here and len(here) == 23
    assert there[7][3].startswith(f"{path}:8: not valid JSON")
    assert there[12][3].startswith(f"{path}:13: run bad: field status")


def test_an_exception_of_the_readers_is_raised_after_the_items_before_it(tmp_path):
    path = _file(tmp_path)

    def items():
        yield from iter_path(path)
        raise FileNotFoundError(2, "No such file or directory", "missing.jsonl")

    seen = []
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        for item in _read_in_child(items):
            seen.append(item)
    assert len(seen) == 23
