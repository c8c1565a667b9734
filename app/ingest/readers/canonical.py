"""Readers for the canonical shape itself: JSON array, JSON Lines, or one JSON object per file.

Each reader is a generator of `ImportItem`s, one per run; a bad run (or a line that is not
JSON) becomes an error item and reading goes on. Memory stays flat: arrays are streamed element
by element and JSON Lines are read line by line; only a single-object file is parsed whole.
Everything goes through app.ingest.safety.safejson, which enforces the input limits (nesting depth,
string length, integer digits) while parsing: a breach rejects that run, naming file, line and
field, and the runs after it are still read.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest import budget
from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item, item_from_raw
from app.ingest.readers import peek
from app.ingest.readers.base import Reader, Sniff
from app.ingest.safety import safejson
from app.ingest.safety.limits import input_limits
from app.ingest.safety.safejson import JSONLimitError

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")
BOM = b"\xef\xbb\xbf"


def _display(path: str | os.PathLike, display: str | None) -> str:
    return display if display is not None else os.fspath(path)


def iter_json_array(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one item per element of a top-level JSON array, streaming the file element by element.

    An element that is not valid JSON or breaks an input limit is an error for that element; the
    elements after it are still read (unless the bracket structure itself is broken)."""
    name = _display(path, display)
    with open(path, "rb") as f:
        try:
            for el in safejson.iter_array(f):
                budget.charge()  # every element counts (MAX_IMPORT_RECORDS)
                loc = Location(name, el.line, pointer=f"[{el.index}]")
                if el.error is None:
                    yield item_from_raw(el.value, Location(name, pointer=f"[{el.index}]"))
                elif el.fatal:
                    yield error_item(loc, f"invalid JSON ({el.error}); the rest of the file was not read")
                    return
                else:
                    yield error_item(loc, _json_error_text(el.error))
        except UnicodeDecodeError as exc:
            yield error_item(Location(name), f"not UTF-8 text: {exc.reason}")


def _json_error_text(exc: BaseException) -> str:
    """The message of a rejected JSON text: a limit breach names field and limit as it is."""
    if isinstance(exc, JSONLimitError):
        return f"input limit: {exc.msg}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc.reason}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} (column {exc.colno})"
    return f"not valid JSON: {exc}"


def _loads_line(raw: bytes, name: str, lineno: int) -> tuple[Any, ImportItem | None]:
    try:
        return safejson.loads(raw), None
    except (UnicodeDecodeError, ValueError) as exc:
        return None, error_item(Location(name, lineno), _json_error_text(exc))


def iter_jsonl(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one item per non-blank line; a line that is not JSON is an error for that line only."""
    name = _display(path, display)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(safejson.bounded_lines(f), 1):
            if isinstance(raw, safejson.LineTooLong):
                yield error_item(Location(name, lineno), f"input limit: the line is {raw.size} bytes long, longer "
                                                         f"than {input_limits().max_record_bytes} (limit MAX_RECORD_BYTES)")
                continue
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
    most = input_limits().max_record_bytes
    if os.path.getsize(path) > most:
        yield error_item(Location(name), f"input limit: one run of {os.path.getsize(path)} bytes, longer than "
                                         f"{most} (limit MAX_RECORD_BYTES)")
        return
    try:
        with open(path, "rb") as f:
            data = f.read()
        obj = safejson.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        yield error_item(Location(name, getattr(exc, "lineno", None)), _json_error_text(exc))
        return
    yield item_from_raw(obj, Location(name))


def _first_lines(path: str | os.PathLike, limit: int = 5, max_bytes: int = 1 << 20) -> list[bytes]:
    out: list[bytes] = []
    read = 0
    with open(path, "rb") as f:
        while raw := f.readline(max_bytes - read if read < max_bytes else 1):  # never a whole long line
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
            if isinstance(safejson.loads(line), dict):
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


#: the keys that make a record look like a canonical run even without its run_id
CANONICAL_HINTS = ("events", "agents", "principals", "scenario", "audits", "checks")


class CanonicalReader(Reader):
    """The canonical run record itself (docs run-format.md): a JSON array, JSON Lines, one object."""

    name = "canonical"
    description = "a2annotate's canonical run record: a JSON array of runs, JSON Lines, or one run per file"

    def sniff(self, path: Path) -> Sniff:
        line = peek.head(path)
        if not line:
            return Sniff(0.0, "empty file")
        if line[:1] not in (b"{", b"["):
            return Sniff(0.0, "not JSON: the first line starts with neither { nor [")
        if line.startswith(b"{") and line != b"{" and peek.head_is_whole_line(path) and peek.first_object(path) is None:
            return Sniff(0.3, "a JSON line that does not parse: read as canonical to report why")
        keys = peek.record_keys(path)
        if "run_id" in keys:
            return Sniff(0.9, "JSON records with a run_id")
        hints = sorted(keys.intersection(CANONICAL_HINTS))
        if hints:
            return Sniff(0.6, f"JSON records with canonical keys ({', '.join(hints)}) but no run_id")
        if not keys:
            return Sniff(0.3, "JSON whose first record shows no keys (empty, not objects, or not parseable): "
                              "read as canonical to report where")
        return Sniff(0.0, "JSON, but its records have no canonical key (run_id, events): they have "
                          + ", ".join(sorted(keys)[:8]))

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        return iter_canonical_file(path, shown)
