"""What the database can hold, checked on a normalized run before it is stored.

SQLite stores any text length, NUL characters and 64-bit integers, while PostgreSQL refuses text
longer than a column's limit, NUL (0x00) characters anywhere (text and JSON) and integers beyond
32 bits. Checking here makes a run import (or be rejected, naming the field) the same way on both
backends. Pure: a dict in, a (field, message) pair or None out.
"""
from __future__ import annotations

from typing import Any

#: 32-bit integer columns (event seq, parent_seq, hop)
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
#: the longest `source` of an audit: its annotator is the user `judge:<source>` (200 characters)
MAX_AUDIT_SOURCE = 200 - len("judge:")

_RUN_TEXT = (("run_id", 300), ("started_at", 64), ("ended_at", 64))
_SCENARIO_TEXT = (("id", 300), ("family", 100))
_PRINCIPAL_TEXT = (("id", 200),)
_AGENT_TEXT = (("id", 200), ("principal", 200), ("role", 200), ("model", 200), ("harness", 200))
_EVENT_TEXT = (("ts", 64), ("actor", 200))
_AUDIT_TEXT = (("source", MAX_AUDIT_SOURCE), ("level", 40), ("mode", 40), ("agent", 200))
_CHECK_TEXT = (("source", 200), ("level", 40), ("check_id", 200), ("agent", 200))


def storage_problem(run: dict[str, Any], serialized: str | bytes | None = None) -> tuple[str, str] | None:
    """Returns ``(field, message)`` for the first value of normalized `run` the database cannot
    store (a text over its column's length, an integer beyond 32 bits, a NUL character), e.g.
    ``("events[3].hop", "1000000000000 is out of range ...")``; None when everything fits.

    `serialized` (the run as JSON text or its UTF-8 bytes, e.g. its hashed form) lets the NUL
    search skip runs that have none."""
    for key, limit in _RUN_TEXT:
        if (p := _too_long(run.get(key), limit, key)) is not None:
            return p
    for key, limit in _SCENARIO_TEXT:
        if (p := _too_long((run.get("scenario") or {}).get(key), limit, f"scenario.{key}")) is not None:
            return p
    for name, keys in (("principals", _PRINCIPAL_TEXT), ("agents", _AGENT_TEXT), ("audits", _AUDIT_TEXT),
                       ("checks", _CHECK_TEXT)):
        for i, obj in enumerate(run.get(name) or []):
            for key, limit in keys:
                if (p := _too_long(obj.get(key), limit, f"{name}[{i}].{key}")) is not None:
                    return p
    for i, ev in enumerate(run.get("events") or []):
        for key, limit in _EVENT_TEXT:
            if (p := _too_long(ev.get(key), limit, f"events[{i}].{key}")) is not None:
                return p
        for key in ("seq", "parent_seq", "hop"):
            v = ev.get(key)
            if isinstance(v, int) and not INT_MIN <= v <= INT_MAX:
                return f"events[{i}].{key}", f"{v} is out of range (integers from {INT_MIN} to {INT_MAX})"
    if serialized is None or (b"\\u0000" if isinstance(serialized, bytes) else "\\u0000") in serialized:
        where = _nul_path(run, "")
        if where is not None:
            return where or "run", "contains a NUL character (\\u0000), which the database cannot store"
    return None


def _too_long(value: Any, limit: int, field: str) -> tuple[str, str] | None:
    if isinstance(value, str) and len(value) > limit:
        return field, f"is {len(value)} characters long, at most {limit} are stored"
    return None


def surrogate_path(run: Any) -> str | None:
    """The path of the first string (or key) of `run` holding a lone surrogate (U+D800-U+DFFF,
    which UTF-8 cannot encode), e.g. ``events[0].content``; None when there is none."""
    return _char_path(run, "", _has_surrogate)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _char_path(value: Any, path: str, bad) -> str | None:
    if isinstance(value, str):
        return (path or "run") if bad(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and bad(k):
                return sub
            if (found := _char_path(v, sub, bad)) is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _char_path(v, f"{path}[{i}]", bad)) is not None:
                return found
    return None


def _nul_path(value: Any, path: str) -> str | None:
    """Returns the path of the first string (or key) holding a NUL character, else None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and "\x00" in k:
                return sub
            if (found := _nul_path(v, sub)) is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _nul_path(v, f"{path}[{i}]")) is not None:
                return found
    return None


# --------------------------------------------------------------------------- input limits

from dataclasses import dataclass  # noqa: E402


@dataclass(frozen=True)
class InputLimits:
    """Limits on what one input may hold, enforced while it is parsed (see app.ingest.safety.safejson)
    and while an upload or a zip archive is read (app.api.uploads, app.ingest.detect).

    Each comes from the setting of the same name in upper case (app.core.config), e.g.
    ``MAX_JSON_DEPTH=32``; `input_limits()` reads them."""

    #: deepest nesting of arrays/objects inside one run, line or document
    max_json_depth: int = 64
    #: longest JSON string (bytes as written, escapes included)
    max_string_bytes: int = 10 * 1024 * 1024
    #: most digits of one JSON integer
    max_int_digits: int = 1000
    #: most events in one run
    max_events_per_run: int = 50_000
    #: longest record: a line of JSON Lines, an element of a JSON array, a one-run JSON file (bytes)
    max_record_bytes: int = 256 * 1024 * 1024
    #: bytes unpacked from one zip archive, nested archives included (counted while decompressing)
    max_zip_bytes: int = 2 << 30
    #: members (files and folders) of one zip archive, nested archives included
    max_zip_members: int = 10_000
    #: how deep zip archives may nest inside zip archives (1: a zip may hold zips, which may not)
    max_zip_nesting: int = 1
    #: largest ratio of unpacked to compressed bytes of one zip member (checked while unpacking)
    max_zip_ratio: int = 200


def input_limits() -> InputLimits:
    """The limits configured in the settings (environment / .env)."""
    from app.core.config import get_settings

    s = get_settings()
    return InputLimits(**{f: getattr(s, f) for f in InputLimits.__dataclass_fields__})
