"""Readers for the canonical shape itself: JSON array, JSON Lines, or one JSON object per file.

Each reader is a generator of `ImportItem`s, one per run; a bad run (or a line that is not
JSON) becomes an error item and reading goes on. Memory stays flat: arrays are streamed with
`ijson` and JSON Lines are read line by line; only a single-object file is parsed whole.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import ijson

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item, item_from_raw

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")
BOM = b"\xef\xbb\xbf"


def _display(path: str | os.PathLike, display: str | None) -> str:
    return display if display is not None else os.fspath(path)


def iter_json_array(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one item per element of a top-level JSON array, streaming the file with ijson."""
    name = _display(path, display)
    index = 0
    with open(path, "rb") as f:
        head = f.read(3)
        if head != BOM:
            f.seek(0)
        try:
            for obj in ijson.items(f, "item", use_float=True):
                yield item_from_raw(obj, Location(name, pointer=f"[{index}]"))
                index += 1
        except (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError) as exc:
            yield error_item(Location(name, pointer=f"[{index}]"),
                             f"invalid JSON ({exc}); the rest of the file was not read")


def _loads_line(raw: bytes, name: str, lineno: int) -> tuple[Any, ImportItem | None]:
    try:
        return json.loads(raw.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return None, error_item(Location(name, lineno), f"not UTF-8 text: {exc.reason}")
    except json.JSONDecodeError as exc:
        return None, error_item(Location(name, lineno), f"not valid JSON: {exc.msg} (column {exc.colno})")


def iter_jsonl(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one item per non-blank line; a line that is not JSON is an error for that line only."""
    name = _display(path, display)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[3:]
            raw = raw.strip()
            if not raw:
                continue
            obj, err = _loads_line(raw, name, lineno)
            yield err if err is not None else item_from_raw(obj, Location(name, lineno))


def iter_json_object(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield the single run held by a file containing one JSON object."""
    name = _display(path, display)
    try:
        with open(path, "rb") as f:
            data = f.read()
        obj = json.loads(data[3:] if data.startswith(BOM) else data)
    except UnicodeDecodeError as exc:
        yield error_item(Location(name), f"not UTF-8 text: {exc.reason}")
        return
    except json.JSONDecodeError as exc:
        yield error_item(Location(name, exc.lineno), f"not valid JSON: {exc.msg} (column {exc.colno})")
        return
    yield item_from_raw(obj, Location(name))


def _first_lines(path: str | os.PathLike, limit: int = 5, max_bytes: int = 1 << 20) -> list[bytes]:
    out: list[bytes] = []
    read = 0
    with open(path, "rb") as f:
        for raw in f:
            read += len(raw)
            s = raw.strip()
            if not out and s.startswith(BOM):
                s = s[3:].strip()
            if s:
                out.append(s)
            if len(out) >= limit or read >= max_bytes:
                break
    return out


def canonical_layout(path: str | os.PathLike) -> str:
    """Return "array", "jsonl" or "object" for a canonical file (by first character / lines)."""
    lines = _first_lines(path)
    if not lines:
        return "jsonl"
    if lines[0].startswith(b"["):
        return "array"
    if os.fspath(path).lower().endswith(JSONL_SUFFIXES):
        return "jsonl"
    for line in lines:
        try:
            if isinstance(json.loads(line), dict):
                return "jsonl"
        except ValueError:
            continue
    return "object"


def iter_canonical_file(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Dispatch a canonical file to the array, JSON Lines or single-object reader."""
    layout = canonical_layout(path)
    if layout == "array":
        yield from iter_json_array(path, display)
    elif layout == "jsonl":
        yield from iter_jsonl(path, display)
    else:
        yield from iter_json_object(path, display)
