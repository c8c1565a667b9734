"""iter_bytes: REST upload bodies (JSON array, NDJSON, single object, wire log, zip archives)."""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest

from app.ingest import iter_bytes, write_tree
from app.ingest.detect import safe_extract

from .factory import make_runs, small_run

DATA = Path(__file__).parent / "data"


def _ids(items):
    return [i.run["run_id"] for i in items if i.run]


def test_json_array_body():
    body = json.dumps([small_run(0), small_run(1)]).encode()
    assert _ids(iter_bytes(body, "runs.json", "application/json")) == ["r0", "r1"]


def test_ndjson_body_by_content_type_with_a_bad_line_named_after_the_upload():
    body = (json.dumps(small_run(0)) + "\n{bad\n" + json.dumps(small_run(1)) + "\n").encode()
    items = list(iter_bytes(body, "upload", "application/x-ndjson"))
    assert _ids(items) == ["r0", "r1"]
    (err,) = [i.error for i in items if i.error]
    assert str(err.where) == "upload:2"


def test_single_object_and_wire_bodies():
    assert _ids(iter_bytes(json.dumps(small_run(3), indent=2).encode(), "one.json")) == ["r3"]
    wire = (DATA / "wire" / "v10_stream.sse").read_bytes()
    assert _ids(iter_bytes(wire, "stream.sse", "text/event-stream")) == ["ctx-stream"]


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_zip_of_files_and_a_tree(tmp_path):
    runs = make_runs(2, seed=5)
    write_tree(runs, tmp_path / "tree")
    entries = {f"release/{p.relative_to(tmp_path / 'tree').as_posix()}": p.read_bytes()
               for p in (tmp_path / "tree").rglob("*") if p.is_file()}
    entries["extra/runs.jsonl"] = (json.dumps(small_run(8)) + "\n").encode()
    entries["extra/readme.txt"] = b"hello"
    entries["wire/log.sse"] = (DATA / "wire" / "v10_stream.sse").read_bytes()
    items = list(iter_bytes(_zip(entries), "bundle.zip", "application/zip"))
    assert [str(i.error) for i in items if i.error] == []
    assert sorted(_ids(items)) == sorted([r["run_id"] for r in runs] + ["r8", "ctx-stream"])
    by_id = {i.run["run_id"]: i.run for i in items if i.run}
    assert all(by_id[r["run_id"]] == r for r in runs)
    assert [u for i in items for u in i.unused_files] == ["bundle.zip/extra/readme.txt"]


@pytest.mark.parametrize("name", ["../evil.json", "/abs/evil.json", "a/../../evil.json", "C:/evil.json"])
def test_zip_with_unsafe_paths_is_rejected_and_writes_nothing_outside(tmp_path, name):
    body = _zip({"ok.jsonl": (json.dumps(small_run(0)) + "\n").encode(), name: b"[]"})
    before = set(os.listdir(tmp_path.parent))
    items = list(iter_bytes(body, "evil.zip"))
    (item,) = items
    assert item.run is None and "zip archive rejected" in item.error.message and "unsafe" in item.error.message
    assert set(os.listdir(tmp_path.parent)) == before


def test_safe_extract_rejects_symlinks(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    with zipfile.ZipFile(buf) as zf, pytest.raises(ValueError, match="symbolic link"):
        safe_extract(zf, tmp_path)


def test_safe_extract_limits_size(tmp_path):
    body = _zip({"big.json": b"[" + b" " * 5000 + b"]"})
    with zipfile.ZipFile(io.BytesIO(body)) as zf, pytest.raises(ValueError, match="more than"):
        safe_extract(zf, tmp_path, max_bytes=1000)
