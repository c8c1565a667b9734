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


def storage_problem(run: dict[str, Any], serialized: str | None = None) -> tuple[str, str] | None:
    """Returns ``(field, message)`` for the first value of normalized `run` the database cannot
    store (a text over its column's length, an integer beyond 32 bits, a NUL character), e.g.
    ``("events[3].hop", "1000000000000 is out of range ...")``; None when everything fits.

    `serialized` (the run as JSON text, e.g. its hashed form) lets the NUL search skip runs
    that have none."""
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
    if serialized is None or "\\u0000" in serialized:
        where = _nul_path(run, "")
        if where is not None:
            return where or "run", "contains a NUL character (\\u0000), which the database cannot store"
    return None


def _too_long(value: Any, limit: int, field: str) -> tuple[str, str] | None:
    if isinstance(value, str) and len(value) > limit:
        return field, f"is {len(value)} characters long, at most {limit} are stored"
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
