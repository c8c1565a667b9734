"""GR-style divergence: the parties' final records or artifacts disagree on a key both hold.

An agent's final record is every field it last wrote: its ``state_update`` events (the object
under ``data.record`` when there is one, else ``data``) and the documents of the ``artifact``
events it sent (``data.document``, else ``data``), later writes replacing earlier ones, nested
fields as dotted paths. Two agents of different principals disagree on a field both hold when
the values differ as values: numbers with units compared as numbers (``"$18,500.00"`` equals
``18500``), dates as dates (``"2026-03-12"`` equals ``"March 12, 2026"``), text ignoring case
and whitespace. A field where each side names the other party (``counterparty``) is a matter of
perspective, not a disagreement.

Blame: the agent whose value departs from the value last stated for that field in a shared
message between the two (else in a shared artifact); both agents when no such value exists or
it matches neither.
"""
from __future__ import annotations

from typing import Any

from app.detectors.base import Candidate, Detector, Run, agents_by_id, is_shared, merge
from app.detectors.text import last_key, leaves, norm_text, same_value

NAME = "divergence"
VERSION = "1"
KEY = "final-record-divergence"
#: bookkeeping fields of a record write, not record content
META_KEYS = {"record_type", "op", "artifact_type", "tool"}


def _record_body(e: dict[str, Any]) -> dict[str, Any] | None:
    data = e.get("data")
    if not isinstance(data, dict):
        return None
    for key in ("record", "document"):
        if isinstance(data.get(key), dict):
            return data[key]
    body = {k: v for k, v in data.items() if k not in META_KEYS}
    return body or None


def final_records(run: Run) -> dict[str, dict[str, tuple[Any, int]]]:
    """{agent: {field path: (value, seq of the write)}} from its record writes and artifacts."""
    agents = agents_by_id(run)
    out: dict[str, dict[str, tuple[Any, int]]] = {}
    for e in run.get("events") or []:
        actor = e.get("actor")
        if actor not in agents:
            continue
        if e.get("kind") == "state_update" or (e.get("kind") == "artifact"):
            body = _record_body(e)
            if body is None:
                continue
            rec = out.setdefault(actor, {})
            for path, v in leaves(body):
                if path and v is not None:
                    rec[path] = (v, e["seq"])
    return out


def _party_names(run: Run, agent_id: str) -> set[str]:
    a = agents_by_id(run).get(agent_id) or {}
    names = {agent_id, a.get("principal")}
    for p in run.get("principals") or []:
        if p.get("id") == a.get("principal"):
            names.add(p.get("name"))
    return {norm_text(n) for n in names if n}


def _stated(run: Run, pair: set[str], key: str) -> Any:
    """The value last stated for `key` in a shared message between the pair (else an artifact)."""
    for kinds in (("message", "delegation"), ("artifact",)):
        for e in reversed(run.get("events") or []):
            if e.get("kind") not in kinds or not is_shared(e) or e.get("actor") not in pair \
                    or not pair & set(e.get("recipients") or []):
                continue
            if not isinstance(e.get("data"), dict):
                continue
            for path, v in leaves(e["data"]):
                if last_key(path) == key and v is not None and not isinstance(v, (dict, list)):
                    return v
    return None


def _show(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return repr(v) if isinstance(v, str) else str(v)


def detect(run: Run) -> list[Candidate]:
    agents = agents_by_id(run)
    records = final_records(run)
    ids = sorted(records)
    found: list[Candidate] = []
    for i, x in enumerate(ids):
        for y in ids[i + 1:]:
            if agents[x].get("principal") is not None and agents[x].get("principal") == agents[y].get("principal"):
                continue
            rx, ry = records[x], records[y]
            for path in sorted(set(rx) & set(ry)):
                (vx, sx), (vy, sy) = rx[path], ry[path]
                if same_value(vx, vy):
                    continue
                if norm_text(vx) in _party_names(run, y) and norm_text(vy) in _party_names(run, x):
                    continue  # each side names the other party
                stated = _stated(run, {x, y}, last_key(path))
                blamed = [a for a, v in ((x, vx), (y, vy)) if stated is None or not same_value(v, stated)]
                if len(blamed) == 0:
                    continue
                principals = tuple(p for p in (agents[x].get("principal"), agents[y].get("principal")) if p)
                for a in blamed:
                    found.append(Candidate(
                        agent=a, evidence=(sx, sy) if a == x else (sy, sx), principals=principals,
                        reason=f"final records disagree on {path}: {x}={_show(vx)}, {y}={_show(vy)}"))
    return merge(found)


DETECTOR = Detector(name=NAME, version=VERSION, key=KEY, detect=detect,
                    description="the parties' final records or artifacts disagree on a field both hold")
