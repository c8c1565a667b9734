"""The view model of one run for the trace page. Pure: a canonical run dict in, plain data out.

`build_trace(run)` answers the annotator's first questions about a run: who acted for whom
(principals, their agents, each one's own outcome beside the aggregate score), who said what to
whom (one lane per agent; shared messages span from the actor's lane to the recipients' lanes),
what each agent privately knew and recorded (private events in the owner's lane, private state),
and who *could* have talked to whom (reachability from discovery events and agent cards) versus
who actually did.

Placement of an event (``placement``):

* ``shared``    an agent's event that crossed the boundary to one or more other agents: the row
                spans from the actor's lane to the recipients' lanes;
* ``private``   an event inside one agent's environment (tool calls/results, state updates,
                records, or anything not addressed to another agent): in the owner's lane;
* ``principal`` an exchange between an agent and a principal: in the agent's lane, marked;
* ``system``    events of "system" (and of actors that are not agents of the run without an
                agent to attach to): full width.

Nothing here touches the web or the database; the result is made of dicts, lists, str, int,
float, bool and None only, so the template and the tests read the same structure.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from app.ingest.canonical import ts_key

SYSTEM = "system"
#: Metadata key holding the demo corpus's seeded truth; shown to admins only.
DEMO_TRUTH_KEY = "demo_truth"
#: Keys (in an agent's metadata or its `agent_card`) listing peers the agent can reach.
REACH_KEYS = ("reachable_peers", "reachable", "peers", "can_reach", "contacts", "known_peers",
              "discovered_peers", "directory")
#: Private event kinds listed among an agent's records in the side panel.
RECORD_KINDS = ("state_update", "artifact", "tool_result", "tool_call", "delegation")
MAX_RECORDS_PER_AGENT = 300
PALETTE_SIZE = 6


class TraceInputError(ValueError):
    """The run dict lacks something the trace view needs; the message names the field."""


# --------------------------------------------------------------------------- small helpers

def pretty_json(value: Any) -> str:
    """Return `value` as indented JSON text (non-JSON values are stringified)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def is_empty(value: Any) -> bool:
    """True for None, "" and empty containers."""
    return value is None or (isinstance(value, (str, list, dict, tuple)) and len(value) == 0)


DATA_FOLD_LINES = 8


def should_fold(text: str | None, max_chars: int, max_lines: int) -> bool:
    """True when `text` is longer than `max_chars` characters or `max_lines` lines."""
    if not text:
        return False
    return len(text) > max_chars or text.count("\n") + 1 > max_lines


def summarize(value: Any, limit: int = 90) -> str:
    """A one-line summary of an event payload: text shortened, or the keys of an object."""
    if isinstance(value, str):
        line = " ".join(value.split())
        return line if len(line) <= limit else line[: limit - 1] + "…"
    if isinstance(value, dict):
        keys = list(value)
        head = ", ".join(keys[:5]) + (f", … (+{len(keys) - 5})" if len(keys) > 5 else "")
        return "{" + head + "}"
    if isinstance(value, list):
        return f"[{len(value)} items]"
    return "" if value is None else str(value)


def format_offset(seconds: float | None) -> str | None:
    """``+M:SS`` (or ``+H:MM:SS``) for a non-negative offset in seconds; None stays None."""
    if seconds is None:
        return None
    sign = "-" if seconds < 0 else "+"
    s = round(abs(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{sign}{h}:{m:02d}:{sec:02d}" if h else f"{sign}{m}:{sec:02d}"


def strip_demo_truth(meta: Any) -> Any:
    """A copy of a metadata dict without the demo truth key (other values are returned as is)."""
    if isinstance(meta, dict) and DEMO_TRUTH_KEY in meta:
        return {k: v for k, v in meta.items() if k != DEMO_TRUTH_KEY}
    return meta


def _require(obj: Mapping, key: str, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise TraceInputError(f"{where}: must be an object, got {type(obj).__name__}")
    if key not in obj:
        raise TraceInputError(f"{where}.{key}: required field is missing")
    return obj[key]


def _strings_in(value: Any, depth: int = 0, budget: list[int] | None = None) -> Iterable[str]:
    """Every string value (not key) inside `value`, depth- and count-bounded."""
    budget = budget if budget is not None else [2000]
    if budget[0] <= 0 or depth > 8:
        return
    if isinstance(value, str):
        budget[0] -= 1
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings_in(v, depth + 1, budget)
    elif isinstance(value, list):
        for v in value:
            yield from _strings_in(v, depth + 1, budget)


# --------------------------------------------------------------------------- lanes and placement

def build_lanes(agents: list[dict], principals: list[dict]) -> list[dict]:
    """One lane per agent, in the run's agent order.

    Returns ``[{"index", "agent", "principal", "principal_name", "role", "model", "harness",
    "color"}]``; agents of the same principal share a color index (0..PALETTE_SIZE-1).
    """
    p_index = {p["id"]: i for i, p in enumerate(principals)}
    p_name = {p["id"]: (p.get("name") or p["id"]) for p in principals}
    lanes = []
    for i, a in enumerate(agents):
        pid = a.get("principal")
        color = (p_index[pid] if pid in p_index else len(principals) + i) % PALETTE_SIZE
        lanes.append({"index": i, "agent": a["id"], "principal": pid,
                      "principal_name": p_name.get(pid) if pid else None,
                      "role": a.get("role"), "model": a.get("model"), "harness": a.get("harness"),
                      "color": color})
    return lanes


def placement_of(event: Mapping, lane_of: Mapping[str, int], principal_agents: Mapping[str, list[str]]) -> tuple:
    """The kind of row one event makes, without its geometry: ``(placement, principal_dir)``, with
    `placement` "shared" | "private" | "principal" | "system" and `principal_dir` "to_principal",
    "from_principal" or None. The rules of `place_event` (which gives the geometry too), for
    readers that need only these two (a judge's prompt lines)."""
    actor = event["actor"]
    recipients = event.get("recipients") or ()
    if actor in lane_of:
        to_principal = False
        for r in recipients:  # (a loop: any() over a generator costs more on these short lists)
            if r != actor and r in lane_of:  # to another agent: shared, or private to the actor
                return ("shared", None) if event.get("visibility", "shared") == "shared" else ("private", None)
            to_principal = to_principal or r in principal_agents
        return ("principal", "to_principal") if to_principal else ("private", None)
    if actor in principal_agents:
        return "principal", "from_principal"
    return "system", None


def place_event(event: Mapping, lane_of: Mapping[str, int], principal_agents: Mapping[str, list[str]],
                n_lanes: int) -> dict:
    """Where one event goes in the lane grid.

    Returns ``{"placement", "lane", "col_start", "col_end", "direction", "cells", "principal",
    "principal_dir"}``: `lane` is the owning lane (None for full-width rows), `col_start` and
    `col_end` the 1-based inclusive lane columns the row spans (1..n_lanes for full width),
    `direction` "right" | "left" | "both" for shared messages, `cells` one entry per spanned lane
    ``{"lane", "role": "from"|"to"|"pass"}`` for shared messages (else []), `principal` the
    principal id at the other end of a principal exchange and `principal_dir` "to_principal" or
    "from_principal".
    """
    actor = event["actor"]
    recipients = list(event.get("recipients") or [])
    agent_recips = [r for r in recipients if r in lane_of and r != actor]
    placement, principal_dir = placement_of(event, lane_of, principal_agents)
    out: dict[str, Any] = {"placement": placement, "lane": None, "col_start": 1, "col_end": max(n_lanes, 1),
                           "direction": None, "cells": [], "principal": None, "principal_dir": principal_dir}
    if principal_dir == "from_principal":  # a principal speaking: over its agents' lanes
        targets = sorted({lane_of[r] for r in agent_recips}) or sorted(
            lane_of[a] for a in principal_agents[actor] if a in lane_of)
        out["principal"] = actor
        if targets:  # (a principal without agents: full width, still marked)
            out.update(lane=targets[0], col_start=targets[0] + 1, col_end=targets[-1] + 1)
        return out
    if placement == "system":
        return out
    lane = lane_of[actor]
    out.update(lane=lane, col_start=lane + 1, col_end=lane + 1)
    if placement == "shared":
        targets = sorted({lane_of[r] for r in agent_recips})
        lo, hi = min(targets + [lane]), max(targets + [lane])
        right = any(t > lane for t in targets)
        left = any(t < lane for t in targets)
        out.update(col_start=lo + 1, col_end=hi + 1,
                   direction="both" if left and right else ("right" if right else "left"),
                   cells=[{"lane": i, "role": "from" if i == lane else ("to" if i in targets else "pass")}
                          for i in range(lo, hi + 1)])
    elif placement == "principal":
        out["principal"] = next(r for r in recipients if r in principal_agents)
    return out  # "system" or an actor the run does not declare


def build_event(event: Mapping, placement: dict, t0: float | None, *, fold_chars: int, fold_lines: int,
                show_demo_truth: bool, names: Mapping[str, str] | None = None) -> dict:
    """The display record of one event (placement fields merged in).

    `names` maps principal ids to display names (agents and "system" keep their ids).
    Returns ``{"seq", "anchor", "kind", "actor", "actor_name", "recipients", "recipient_names",
    "visibility", "ts", "t_rel",
    "content", "content_folded", "content_lines", "data_json", "data_summary", "data_open",
    "data_folded", "data_lines", "metadata_json", "parent_seq", "hop", **placement}``.
    """
    seq = _require(event, "seq", "event")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise TraceInputError(f"events[seq={seq!r}].seq: must be an integer")
    content = event.get("content")
    data = event.get("data")
    data_json = None if is_empty(data) else pretty_json(data)
    meta = event.get("metadata") or {}
    if not show_demo_truth:
        meta = strip_demo_truth(meta)
    t = ts_key(event.get("ts"))
    kind = event.get("kind") or "log"
    names = names or {}
    recipients = list(event.get("recipients") or [])
    return {
        "seq": seq, "anchor": f"e-{seq}", "kind": kind, "actor": event["actor"],
        "actor_name": names.get(event["actor"], event["actor"]),
        "recipients": recipients, "recipient_names": [names.get(r, r) for r in recipients],
        "visibility": event.get("visibility") or "private",
        "ts": event.get("ts"), "t_rel": format_offset(t - t0) if t is not None and t0 is not None else None,
        "content": content, "content_folded": should_fold(content, fold_chars, fold_lines),
        "content_lines": content.count("\n") + 1 if content else 0,
        "data_json": data_json, "data_summary": summarize(data) if data_json else "",
        "data_open": bool(data_json) and (not content or kind in ("artifact", "tool_result", "state_update")),
        # a tool result or any payload longer than a few lines opens as a compact block with
        # "expand" (not a 500 px JSON block)
        "data_folded": should_fold(data_json, fold_chars, DATA_FOLD_LINES),
        "data_lines": data_json.count("\n") + 1 if data_json else 0,
        "metadata_json": None if is_empty(meta) else pretty_json(meta),
        "parent_seq": event.get("parent_seq"), "hop": event.get("hop"),
        **placement,
    }


# --------------------------------------------------------------------------- reachability

def _alias_map(agents: list[dict]) -> dict[str, str]:
    """Names that designate an agent in discovery payloads: its id, card name and url."""
    alias: dict[str, str] = {}
    for a in agents:
        alias[a["id"]] = a["id"]
        meta = a.get("metadata") or {}
        for card in (meta.get("agent_card"), meta.get("card"), meta):
            if isinstance(card, dict):
                for key in ("name", "url", "agent_id"):
                    v = card.get(key)
                    if isinstance(v, str) and v and v not in alias:
                        alias[v] = a["id"]
    return alias


def _listed_peers(agent: Mapping, alias: Mapping[str, str]) -> set[str]:
    meta = agent.get("metadata") or {}
    found: set[str] = set()
    for holder in (meta, meta.get("agent_card") if isinstance(meta.get("agent_card"), dict) else None):
        if not holder:
            continue
        for key in REACH_KEYS:
            if key in holder:
                for s in _strings_in(holder[key]):
                    if s in alias:
                        found.add(alias[s])
    found.discard(agent["id"])
    return found


def build_reach(agents: list[dict], events: list[dict]) -> dict:
    """Who could talk to whom (reachable) versus who did (contacted), agent by agent.

    Reachable: agent A can reach B when a discovery event of A names B (in its recipients or
    anywhere in its data), when a discovery event of "system"/a principal addressed to A (or to
    nobody: a public registry) names B, or when A's metadata / agent card lists B under one of
    REACH_KEYS, or when B contacted A first (A can answer: "reply to #seq"). Contacted: count of
    shared non-discovery events from A with B among the recipients.

    Returns ``{"agents": [ids], "known": bool (any discovery or card information at all; replies
    do not count),
    "discovery_seqs": [int], "rows": [{"agent", "cells": [{"to", "self", "reachable",
    "contacted", "sources": [str], "state"}]}], "unused": [{"from", "to"}]}`` where `state` is
    "self", "both" (reachable and contacted), "reachable" (never contacted), "contacted" (no record
    that it was discoverable) or "none"; `unused` lists reachable pairs never contacted.
    """
    ids = [a["id"] for a in agents]
    idset = set(ids)
    alias = _alias_map(agents)
    sources: dict[tuple[str, str], list[str]] = {}
    contacted: dict[tuple[str, str], int] = {}
    first_contact: dict[tuple[str, str], int] = {}
    discovery_seqs: list[int] = []

    def add(a: str, b: str, why: str) -> None:
        if a != b and a in idset and b in idset:
            lst = sources.setdefault((a, b), [])
            if why not in lst:
                lst.append(why)

    for a in agents:
        for b in sorted(_listed_peers(a, alias)):
            add(a["id"], b, "agent card")
    for e in events:
        actor = e["actor"]
        recips = list(e.get("recipients") or [])
        if e.get("kind") == "discovery":
            discovery_seqs.append(e["seq"])
            named = {alias[s] for s in _strings_in(e.get("data")) if s in alias}
            if actor in idset:  # the agent looked peers up (or fetched a peer's card)
                finders = [actor]
                named |= {r for r in recips if r in idset}
            else:  # a registry / principal told its recipients (or everybody) about peers
                finders = [r for r in recips if r in idset] or ids
            for f in finders:
                for b in sorted(named):
                    add(f, b, f"discovery #{e['seq']}")
            continue
        if actor in idset and (e.get("visibility") or "shared") == "shared":
            for r in recips:
                if r in idset and r != actor:
                    contacted[(actor, r)] = contacted.get((actor, r), 0) + 1
                    first_contact.setdefault((actor, r), e["seq"])
    known = bool(sources)
    for (b, a), s in sorted(first_contact.items(), key=lambda kv: kv[1]):
        if (a, b) not in first_contact or first_contact[(a, b)] > s:
            add(a, b, f"reply to #{s}")
    rows = []
    unused = []
    for a in ids:
        cells = []
        for b in ids:
            src = sources.get((a, b), [])
            n = contacted.get((a, b), 0)
            if a == b:
                state = "self"
            elif src and n:
                state = "both"
            elif src:
                state = "reachable"
                unused.append({"from": a, "to": b})
            elif n:
                state = "contacted"
            else:
                state = "none"
            cells.append({"to": b, "self": a == b, "reachable": bool(src), "contacted": n, "sources": src,
                          "state": state})
        rows.append({"agent": a, "cells": cells})
    return {"agents": ids, "known": known, "discovery_seqs": discovery_seqs, "rows": rows,
            "unused": unused}


# --------------------------------------------------------------------------- principals and outcomes

def principal_failed(outcome: Mapping, threshold: float) -> bool | None:
    """True/False from an outcome's `success` (or its score against `threshold`); None if unknown."""
    success = outcome.get("success")
    if success is not None:
        return not success
    score = outcome.get("score")
    if score is None:
        return None
    return score < threshold


def build_principals(principals: list[dict], agents: list[dict], aggregate_score: float | None,
                     threshold: float) -> tuple[list[dict], list[str]]:
    """Principal cards and the blind-spot reasons.

    Returns ``(cards, blind_spots)``: cards ``[{"id", "name", "kind", "objective", "constraints",
    "success", "score", "metrics", "metrics_json", "failed", "agents": [agent ids]}]``;
    blind_spots are sentences naming each principal whose own outcome failed while the aggregate
    score counts as success (score >= threshold).
    """
    cards = []
    spots = []
    agg_success = aggregate_score is not None and aggregate_score >= threshold
    for i, p in enumerate(principals):
        pid = _require(p, "id", f"principals[{i}]")
        outcome = p.get("outcome") or {}
        failed = principal_failed(outcome, threshold)
        metrics = outcome.get("metrics") or {}
        name = p.get("name") or pid
        cards.append({"id": pid, "name": name, "kind": p.get("kind"), "objective": p.get("objective"),
                      "constraints": list(p.get("constraints") or []), "success": outcome.get("success"),
                      "score": outcome.get("score"), "metrics": metrics,
                      "metrics_json": None if is_empty(metrics) else pretty_json(metrics), "failed": failed,
                      "agents": [a["id"] for a in agents if a.get("principal") == pid]})
        if agg_success and failed:
            score = outcome.get("score")
            tail = f" (own score {score:.2f})" if isinstance(score, (int, float)) else ""
            spots.append(f"The aggregate score {aggregate_score:.2f} counts as success, "
                         f"but {name}'s own outcome failed{tail}.")
    return cards, spots


# --------------------------------------------------------------------------- the whole view

def build_trace(run: Mapping[str, Any], *, show_demo_truth: bool = False, success_threshold: float = 0.5,
                fold_chars: int = 700, fold_lines: int = 14) -> dict[str, Any]:
    """The complete view model of a canonical run.

    Returns ``{"run_id", "status", "aggregate_score", "aggregate_success", "started_at",
    "ended_at", "scenario", "principals", "blind_spots", "agents", "lanes", "n_lanes", "events",
    "counts", "reach", "audits", "checks", "metadata_json", "demo_truth"}``. `events` are display records
    (see `build_event`) in seq order; `agents` carry ``private_state_json`` and ``records``
    (their private record-like events: ``[{"seq", "kind", "summary"}]``). `demo_truth` (and the
    key in any metadata) is present only when `show_demo_truth` is true. Raises TraceInputError
    naming the field when the run lacks a required part.
    """
    run_id = _require(run, "run_id", "run")
    scenario = _require(run, "scenario", "run")
    if not isinstance(scenario, Mapping):
        raise TraceInputError("run.scenario: must be an object")
    principals = list(run.get("principals") or [])
    agents = list(run.get("agents") or [])
    events = list(run.get("events") or [])
    for i, a in enumerate(agents):
        _require(a, "id", f"agents[{i}]")
    for i, e in enumerate(events):
        _require(e, "actor", f"events[{i}]")
        _require(e, "seq", f"events[{i}]")
    events.sort(key=lambda e: e["seq"])

    lanes = build_lanes(agents, principals)
    lane_of = {lane["agent"]: lane["index"] for lane in lanes}
    principal_agents: dict[str, list[str]] = {p["id"]: [] for p in principals}
    for a in agents:
        if a.get("principal") in principal_agents:
            principal_agents[a["principal"]].append(a["id"])
    n_lanes = len(lanes)

    starts = [ts_key(run.get("started_at"))] + [ts_key(e.get("ts")) for e in events[:1]]
    t0 = next((t for t in starts if t is not None), None)

    names = {p["id"]: (p.get("name") or p["id"]) for p in principals}
    views = []
    counts = {"total": len(events), "shared": 0, "private": 0, "principal": 0, "system": 0}
    records: dict[str, list[dict]] = {a["id"]: [] for a in agents}
    for e in events:
        placement = place_event(e, lane_of, principal_agents, n_lanes)
        view = build_event(e, placement, t0, fold_chars=fold_chars, fold_lines=fold_lines,
                           show_demo_truth=show_demo_truth, names=names)
        counts[view["placement"]] += 1
        views.append(view)
        if view["placement"] == "private" and view["kind"] in RECORD_KINDS:
            bucket = records[view["actor"]]
            if len(bucket) < MAX_RECORDS_PER_AGENT:
                bucket.append({"seq": view["seq"], "kind": view["kind"],
                               "summary": summarize(e.get("content") or e.get("data"), 70)})

    cards, spots = build_principals(principals, agents, run.get("aggregate_score"), success_threshold)
    p_name = {c["id"]: c["name"] for c in cards}
    agent_views = []
    for a, lane in zip(agents, lanes):
        meta = a.get("metadata") or {}
        if not show_demo_truth:
            meta = strip_demo_truth(meta)
        state = a.get("private_state") or {}
        agent_views.append({
            "id": a["id"], "lane": lane["index"], "color": lane["color"], "principal": a.get("principal"),
            "principal_name": p_name.get(a.get("principal")) if a.get("principal") else None,
            "role": a.get("role"), "model": a.get("model"), "harness": a.get("harness"),
            "private_state": state, "private_state_json": None if is_empty(state) else pretty_json(state),
            "metadata_json": None if is_empty(meta) else pretty_json(meta),
            "records": records[a["id"]],
            "n_private": sum(1 for v in views if v["placement"] == "private" and v["actor"] == a["id"]),
        })

    meta = dict(run.get("metadata") or {})
    truth = meta.pop(DEMO_TRUTH_KEY, None)
    sc_meta = scenario.get("metadata") or {}
    if not show_demo_truth:
        sc_meta = strip_demo_truth(sc_meta)
    agg = run.get("aggregate_score")
    return {
        "run_id": run_id, "status": run.get("status"), "aggregate_score": agg,
        "aggregate_success": None if agg is None else agg >= success_threshold,
        "started_at": run.get("started_at"), "ended_at": run.get("ended_at"),
        "scenario": {"id": scenario.get("id"), "family": scenario.get("family"),
                     "alignment": scenario.get("alignment"), "title": scenario.get("title"),
                     "description": scenario.get("description"),
                     "metadata_json": None if is_empty(sc_meta) else pretty_json(sc_meta)},
        "principals": cards, "blind_spots": spots,
        "agents": agent_views, "lanes": lanes, "n_lanes": n_lanes,
        "events": views, "counts": counts,
        "reach": build_reach(agents, events),
        "audits": list(run.get("audits") or []),
        "checks": list(run.get("checks") or []),
        "metadata_json": None if is_empty(meta) else pretty_json(meta),
        "demo_truth": truth if show_demo_truth else None,
    }
