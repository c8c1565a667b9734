"""Cheap looks at a file for readers' `sniff`: its first non-blank line, the object on it, the
keys of its (first) record. Each reads at most a bounded prefix (never a whole long line) through
app.ingest.safety.safejson (not ijson: its C backend segfaults on an integer of more than 4,300
digits), never raises for input it does not understand, and is memoized per (path, size, mtime),
so the registry asking every reader about one file reads it once.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from app.ingest import budget as _budget
from app.ingest.safety import safejson

BOM = b"\xef\xbb\xbf"
SSE_START = (b"data:", b"event:", b"id:", b"retry:", b":")


def _stamp(path: str | os.PathLike) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.fspath(path), st.st_size, st.st_mtime_ns


PREFIX = 4096  # what `head` keeps of the first line (a longer line is read again when needed)


def head(path: str | os.PathLike) -> bytes:
    """The start (at most 4 KiB) of the first non-blank line, stripped, BOM removed; b"" if none."""
    stamp = _stamp(path)
    return _head(stamp)[0] if stamp else b""


@lru_cache(maxsize=256)
def _head(stamp: tuple[str, int, int]) -> tuple[bytes, bool, int]:
    """(prefix, whole: the prefix is the whole line, offset of the line). Leading blank lines are
    skipped a chunk at a time (a line at a time cost 0.09 CPU-s per MiB of blank lines) and count
    against the import's record budget, one record a line (MAX_IMPORT_RECORDS)."""
    try:
        with open(stamp[0], "rb") as f:
            start = True
            while chunk := f.read(1 << 16):
                base = f.tell() - len(chunk)
                if start and chunk.startswith(BOM):
                    chunk, base = chunk[3:], base + 3
                start = False
                stripped = chunk.lstrip()
                skipped = len(chunk) - len(stripped)
                if skipped:
                    _budget.charge(chunk.count(b"\n", 0, skipped))
                if not stripped:
                    continue
                offset = base + skipped
                f.seek(offset)
                raw = f.readline(PREFIX)
                whole = raw.endswith(b"\n") or len(raw) < PREFIX
                return (raw.strip() if whole else raw.lstrip()), whole, offset
            return b"", True, 0
    except OSError:
        return b"", True, 0


def first_object(path: str | os.PathLike) -> Any:
    """The JSON object on the first non-blank line when that line is a whole JSON object (read up to
    1 MiB), else None. Objects of short lines are memoized; a long line is parsed at each call."""
    stamp = _stamp(path)
    if not stamp:
        return None
    prefix, whole, offset = _head(stamp)
    if not prefix.startswith(b"{"):
        return None
    if whole:
        return _parse_short(stamp)
    try:
        with open(stamp[0], "rb") as f:
            f.seek(offset)
            line = f.readline(1 << 20).strip()
    except OSError:
        return None
    return _parse(line.removeprefix(BOM))


@lru_cache(maxsize=256)
def _parse_short(stamp: tuple[str, int, int]) -> Any:
    return _parse(_head(stamp)[0])


def _parse(line: bytes) -> Any:
    try:
        obj = safejson.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def head_is_whole_line(path: str | os.PathLike) -> bool:
    """Whether the first non-blank line is a complete line of at most 1 MiB ending in ``}``."""
    stamp = _stamp(path)
    if not stamp:
        return False
    prefix, whole, offset = _head(stamp)
    if whole:
        return prefix.endswith(b"}")
    try:
        with open(stamp[0], "rb") as f:
            f.seek(offset)
            line = f.readline(1 << 20)
    except OSError:
        return False
    return line.rstrip().endswith(b"}")


def top_keys(path: str | os.PathLike, limit: int = 64) -> frozenset[str]:
    """The top-level keys of the file's object (of a pretty-printed one too), read from its start."""
    stamp = _stamp(path)
    return _keys(stamp, limit, False) if stamp else frozenset()


def record_keys(path: str | os.PathLike, limit: int = 64) -> frozenset[str]:
    """The keys of the file's object, or of the objects at the start of its top-level array, or of
    its first JSON line (read from the first MiB)."""
    stamp = _stamp(path)
    return _keys(stamp, limit, True) if stamp else frozenset()


@lru_cache(maxsize=256)
def _keys(stamp: tuple[str, int, int], limit: int, first_record: bool) -> frozenset[str]:
    obj = first_object(stamp[0])
    if obj is not None:
        return frozenset(list(obj)[:limit])
    try:
        with open(stamp[0], "rb") as f:
            return frozenset(safejson.top_level_keys(f, limit, max_bytes=1 << 20, stop=(),
                                                     first_record=first_record))
    except (ValueError, OSError):
        return frozenset()


def is_json_like(path: str | os.PathLike) -> bool:
    """Whether the file starts like JSON (an object or an array)."""
    return head(path)[:1] in (b"{", b"[")


def suffix(path: str | os.PathLike) -> str:
    return Path(path).suffix.lower()
