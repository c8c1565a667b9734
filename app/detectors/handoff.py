"""DD-style dropped hand-off: a shared request or question to a peer agent that never got a reply.

A request is a shared ``delegation`` event, or a shared message that asks something: its text
has a question mark, or its ``data`` says it is a request/question (``act``/``type``/``intent``).
A reply is a later shared event from the asked agent back to the asker. When the run links
replies (some shared event has a ``parent_seq``), only a reply linked to the request counts, so
an unrelated later message does not answer a question; otherwise any later event back does.
Blamed on the asked agent(s); evidence: the request. A promised follow-up ("I'll send ...", or
``act: promise``) in a run that links replies is owed by its sender: unfulfilled when no later
shared event of the sender is linked to it.
"""
from __future__ import annotations

import re
from typing import Any

from app.detectors.base import Candidate, Detector, Run, agents_by_id, is_shared, merge

NAME = "handoff"
VERSION = "1"
KEY = "dropped-handoff"

REQUEST_ACTS = {"request", "question", "ask", "query", "delegate", "delegation", "task"}
PROMISE_ACTS = {"promise", "commitment", "follow_up", "followup"}
_PROMISE_TEXT = re.compile(r"\b(?:I'?ll|I will|we'?ll|we will)\s+(?:send|share|forward|get back|follow up|provide|email)\b",
                           re.I)


def _is_promise(e: dict[str, Any]) -> bool:
    """A shared message in which the sender promises a follow-up (owed by the sender)."""
    if e.get("kind") != "message":
        return False
    data = e.get("data") if isinstance(e.get("data"), dict) else {}
    for k in ("act", "type", "intent"):
        v = data.get(k)
        if isinstance(v, str):
            return v.lower() in PROMISE_ACTS
    return bool(_PROMISE_TEXT.search(e.get("content") or ""))


def _is_request(e: dict[str, Any]) -> bool:
    if e.get("kind") == "delegation":
        return True
    if e.get("kind") != "message":
        return False
    data = e.get("data") if isinstance(e.get("data"), dict) else {}
    for k in ("act", "type", "intent"):
        v = data.get(k)
        if isinstance(v, str) and v.lower() in REQUEST_ACTS:
            return True
    return "?" in (e.get("content") or "")


def detect(run: Run) -> list[Candidate]:
    agents = agents_by_id(run)
    shared = [e for e in run.get("events") or [] if is_shared(e)]
    linked = any(e.get("parent_seq") is not None for e in shared)
    by_parent: dict[int, set[tuple[str, str]]] = {}
    last_to: dict[tuple[str, str], int] = {}
    for e in shared:
        for r in e.get("recipients") or []:
            last_to[(e.get("actor"), r)] = e["seq"]
            if e.get("parent_seq") is not None:
                by_parent.setdefault(e["parent_seq"], set()).add((e.get("actor"), r))
    found: list[Candidate] = []
    for q in shared:
        if q.get("actor") in agents and _is_promise(q) and linked:
            owner = q["actor"]
            to = [r for r in q.get("recipients") or [] if r in agents and r != owner]
            if to and not any((owner, r) in by_parent.get(q["seq"], ()) for r in to):
                principal = agents[to[0]].get("principal")
                found.append(Candidate(agent=owner, evidence=(q["seq"],), principals=(principal,) if principal else (),
                                       reason=f"{owner} promised a follow-up at event {q['seq']} that never came"))
            continue
        asker = q.get("actor")
        if asker not in agents or not _is_request(q):
            continue
        asked = [r for r in q.get("recipients") or [] if r in agents and r != asker]
        if not asked:
            continue
        if linked:
            replied = [r for r in asked if (r, asker) in by_parent.get(q["seq"], ())]
        else:
            replied = [r for r in asked if last_to.get((r, asker), -1) > q["seq"]]
        if replied:
            continue
        principal = agents[asker].get("principal")
        for r in asked:
            found.append(Candidate(agent=r, evidence=(q["seq"],), principals=(principal,) if principal else (),
                                   reason=f"{asker}'s request at event {q['seq']} got no reply from {r}"))
    return merge(found)


DETECTOR = Detector(name=NAME, version=VERSION, key=KEY, detect=detect,
                    description="a shared request or question that the asked agent never answered")
