"""VF-style unchecked claim: a peer's claim contradicts what the recipient holds, and the recipient
relied on it without a check.

A claim is a fact (a number, a date, an identifier) in a field of the structured payload (``data``) of a shared message a peer agent sent to
the recipient. It contradicts the recipient when the recipient's private state, or a record it
wrote before the claim, holds a field of the same name (the last key of the path, any case) with
a different value (numbers with units as numbers, dates as dates, text ignoring case and
whitespace). The recipient relied on it when a later event of its own (a shared message, a
record write) carries the claimed value (in its payload, or the number or text in its content),
and it made no tool call between the claim and that event. Blamed on the recipient; evidence:
the claim and the event that relied on it.
"""
from __future__ import annotations

from typing import Any

from app.detectors.base import Candidate, Detector, Run, agents_by_id, is_shared, merge
from app.detectors.divergence import _show
from app.detectors.text import (
    last_key,
    leaves,
    norm_text,
    numbers_in_text,
    parse_date,
    parse_number,
    same_number,
    same_value,
)

NAME = "unchecked_claim"
VERSION = "1"
KEY = "unchecked-peer-claim"
#: payload fields that say what a message is, not what it claims
SKIP_KEYS = {"act", "kind", "type", "intent", "role", "action", "status", "artifact_type", "record_type", "op"}


def _is_fact(v: Any) -> bool:
    """Numbers, dates and identifiers (text with a digit, no spaces) are checkable facts; free
    text such as a topic or a name is not."""
    if v is None or isinstance(v, bool):
        return False
    if parse_number(v) is not None or parse_date(v) is not None:
        return True
    return isinstance(v, str) and any(ch.isdigit() for ch in v) and " " not in v.strip() and len(v) <= 64


def _fields(value: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for path, v in leaves(value):
        if path and _is_fact(v):
            out.setdefault(last_key(path), []).append(v)
    return out


def _carries(e: dict[str, Any], value: Any) -> bool:
    for _, v in leaves(e.get("data")):
        if v is not None and not isinstance(v, bool) and same_value(v, value):
            return True
    n = parse_number(value)
    if n is not None:
        return any(same_number(n, x) for x in numbers_in_text(e.get("content")))
    return isinstance(value, str) and len(value) >= 4 and norm_text(value) in norm_text(e.get("content") or "")


def detect(run: Run) -> list[Candidate]:
    agents = agents_by_id(run)
    events = run.get("events") or []
    held: dict[str, dict[str, list[Any]]] = {aid: _fields(a.get("private_state") or {}) for aid, a in agents.items()}
    found: list[Candidate] = []
    for i, claim in enumerate(events):
        peer = claim.get("actor")
        if claim.get("kind") == "state_update" and peer in held:
            for k, vs in _fields(claim.get("data")).items():  # the agent's own records so far
                held[peer].setdefault(k, []).extend(vs)
            continue
        if claim.get("kind") != "message" or not is_shared(claim) or peer not in agents \
                or not isinstance(claim.get("data"), dict):
            continue
        claimed = {k: vs for k, vs in _fields(claim["data"]).items() if k not in SKIP_KEYS}
        if not claimed:
            continue
        for rec in claim.get("recipients") or []:
            if rec not in agents or rec == peer:
                continue
            mine = held[rec]
            contradicted = [(k, v, mine[k][-1]) for k, vs in claimed.items() if k in mine for v in vs
                            if not any(same_value(v, x) for x in mine[k])]
            if not contradicted:
                continue
            for e in events[i + 1:]:
                if e.get("actor") != rec:
                    continue
                if e.get("kind") == "tool_call":
                    break  # it checked
                if not ((e.get("kind") in ("message", "artifact", "delegation") and is_shared(e))
                        or e.get("kind") == "state_update"):
                    continue
                hit = next(((k, v, h) for k, v, h in contradicted if _carries(e, v)), None)
                if hit is not None:
                    k, v, h = hit
                    principal = agents[rec].get("principal")
                    found.append(Candidate(
                        agent=rec, evidence=(claim["seq"], e["seq"]), principals=(principal,) if principal else (),
                        reason=f"{rec} relied on {peer}'s claim {k}={_show(v)} (its own state says {_show(h)}) "
                               "without a check"))
                    break
    return merge(found)


DETECTOR = Detector(name=NAME, version=VERSION, key=KEY, detect=detect,
                    description="a peer's claim contradicts the recipient's state or records and the recipient "
                                "relied on it without a tool call")
