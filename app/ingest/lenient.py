"""Lenient normalization for the non-canonical input shapes (trees, other datasets, traces).

`normalize_lenient(raw, location)` runs the strict canonical normalizer and, each time it fails
on a field, *repairs* that field instead of rejecting the run: the value that cannot be mapped
is kept (in the object's ``metadata`` under ``original_<key>``, in run ``metadata.unmapped``, or
as a ``log`` event) and a warning names where it was. It loops until the run normalizes, so every
problem of a run is reported, not only the first. A run is rejected only when it cannot be a run
at all: no run id, or no events.

Pure: a dict in, ``(run, warnings)`` out, or `RunFormatError` for a run that cannot be one.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from app.ingest.canonical import (
    EVENT_KINDS,
    SYSTEM_ACTOR,
    VISIBILITIES,
    Location,
    RunFormatError,
    epoch_to_iso,
    normalize_run,
    parse_ts,
    ts_order,
)
from app.ingest.safety.limits import storage_problem

#: values the database cannot hold that can be kept aside (ids cannot: the run is rejected)
_MOVABLE = re.compile(r"^(events\[\d+\]\.(hop|parent_seq|ts)|agents\[\d+\]\.(model|harness|role)|"
                      r"(audits|checks)\[\d+\]\.level|started_at|ended_at)$")
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
MAX_REPAIRS = 5000
#: list fields whose items are objects with an `id`
_ID_LISTS = ("principals", "agents")


@dataclass(frozen=True)
class Problem:
    """One thing that could not be mapped: `field` (canonical path, e.g. ``events[3].kind``),
    `message`, and where it came from (`location`, set by the reader)."""

    field: str | None
    message: str
    location: str = ""

    def to_dict(self, run_id: str | None = None) -> dict[str, Any]:
        out = {"location": self.location, "message": self.message}
        if self.field:
            out["field"] = self.field
        if run_id is not None:
            out["run_id"] = run_id
        return out


def _parse(path: str) -> list[str | int]:
    return [m[1] if m[1] is not None else int(m[2]) for m in _TOKEN.finditer(path)]


def _get(root: Any, tokens: list[str | int]) -> Any:
    cur = root
    for t in tokens:
        if isinstance(t, int):
            if not isinstance(cur, list) or t >= len(cur):
                return None
            cur = cur[t]
        else:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(t)
    return cur


def _meta(obj: dict) -> dict:
    m = obj.get("metadata")
    if not isinstance(m, dict):
        if m is not None:
            obj["original_metadata"] = m
        m = obj["metadata"] = {}
    return m


def _keep(meta: dict, key: str, value: Any) -> str:
    """Put `value` under `key` in `meta` without overwriting anything; returns the key used."""
    k, n = key, 1
    while k in meta and meta[k] != value:
        n += 1
        k = f"{key}_{n}"
    meta[k] = value
    return k


def _ts_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return epoch_to_iso(float(value))
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Repairer:
    def __init__(self, raw: dict) -> None:
        self.raw = raw
        self.warnings: list[Problem] = []

    def warn(self, field: str | None, message: str) -> None:
        self.warnings.append(Problem(field, message))

    def unmapped(self, key: str, value: Any) -> str:
        meta = _meta(self.raw)
        um = meta.setdefault("unmapped", {})
        if not isinstance(um, dict):
            um = meta["unmapped"] = {}
        return "metadata.unmapped." + _keep(um, key, value)

    def prepass(self) -> None:
        """Repair the common event problems of every event in one pass (so that a long run with
        many of them does not cost one normalization per problem); the rest is left to `repair`."""
        raw = self.raw
        known = {SYSTEM_ACTOR}
        for key in ("agents", "principals"):
            items = raw.get(key)
            if isinstance(items, list):
                known |= {x["id"] for x in items if isinstance(x, dict) and isinstance(x.get("id"), str)}
        agents = raw.get("agents")
        if isinstance(agents, list):  # principals that agents name are added by `repair`
            known |= {a["principal"] for a in agents if isinstance(a, dict) and isinstance(a.get("principal"), str)}
        self.prepass_audits(known - {SYSTEM_ACTOR})
        for i, ev in enumerate(raw.get("events") or []):
            if not isinstance(ev, dict):
                continue
            path = f"events[{i}]"
            kind = ev.get("kind")
            if kind is None:
                ev["kind"] = "log"
                self.warn(f"{path}.kind", "event has no kind; stored as a log event")
            elif not (isinstance(kind, str) and kind in EVENT_KINDS):
                _keep(_meta(ev), "original_kind", ev.pop("kind"))
                ev["kind"] = "log"
                self.warn(f"{path}.kind", f"must be one of {', '.join(EVENT_KINDS)}, got {_short(kind)}; "
                                          "stored as a log event (kept in metadata.original_kind)")
            vis = ev.get("visibility")
            if vis is not None and vis not in VISIBILITIES:
                _keep(_meta(ev), "original_visibility", ev.pop("visibility"))
                self.warn(f"{path}.visibility", f"must be one of {', '.join(VISIBILITIES)}, got {_short(vis)}; "
                                                "kept in metadata.original_visibility")
            content = ev.get("content")
            if content is not None and not isinstance(content, str):
                _keep(_meta(ev), "original_content", ev.pop("content"))
                self.warn(f"{path}.content", "must be a string or null; kept in metadata.original_content")
            ts = ev.get("ts")
            if isinstance(ts, str):
                try:
                    parse_ts(ts)
                except ValueError:
                    _keep(_meta(ev), "original_ts", ev.pop("ts"))
                    self.warn(f"{path}.ts", f"not an ISO 8601 timestamp: {_short(ts)}; kept in metadata.original_ts")
            actor = ev.get("actor")
            if actor is None:
                ev["actor"] = SYSTEM_ACTOR
                self.warn(f"{path}.actor", "event names no actor; attributed to 'system' (the harness)")
            elif not (isinstance(actor, str) and actor in known):
                _keep(_meta(ev), "original_actor", ev.pop("actor"))
                ev["actor"] = SYSTEM_ACTOR
                self.warn(f"{path}.actor", f"{_short(actor)} is not an agent id, a principal id or 'system'; "
                                           "attributed to 'system' (kept in metadata.original_actor)")
            rec = ev.get("recipients")
            if isinstance(rec, list) and any(not (isinstance(r, str) and r in known) for r in rec):
                bad = [r for r in rec if not (isinstance(r, str) and r in known)]
                ev["recipients"] = [r for r in rec if isinstance(r, str) and r in known]
                _meta(ev).setdefault("unknown_recipients", []).extend(bad)
                self.warn(f"{path}.recipients", f"{', '.join(_short(b) for b in bad)} not an agent id, a principal "
                                                "id or 'system'; dropped from recipients (kept in "
                                                "metadata.unknown_recipients)")

    def prepass_audits(self, known: set[str]) -> None:
        """Audits and checks: agents that are no agent and evidence that is no seq, in one pass."""
        n = len(self.raw.get("events") or [])
        for head in ("audits", "checks"):
            items = self.raw.get(head)
            if not isinstance(items, list):
                continue
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    continue
                agent = item.get("agent")
                if agent is not None and not (isinstance(agent, str) and agent in known):
                    _keep(_meta(item), "original_agent", item.pop("agent"))
                    self.warn(f"{head}[{i}].agent", f"{_short(agent)} is not an agent id or principal id of this "
                                                    "run; kept in metadata.original_agent")
                ev = item.get("evidence")
                if isinstance(ev, list):
                    bad = [s for s in ev if not (isinstance(s, int) and not isinstance(s, bool) and 0 <= s < n)]
                    if bad:
                        item["evidence"] = [s for s in ev if s not in bad]
                        _meta(item).setdefault("unresolved_evidence", []).extend(bad)
                        self.warn(f"{head}[{i}].evidence", f"{', '.join(_short(b) for b in bad)} not the seq of an "
                                                           "event of this run; kept in metadata.unresolved_evidence")

    def align(self) -> None:
        """Put the events in the order the normalizer returns them (by seq, or by time when none
        has a seq) and give them explicit seqs, so that the index in an error names the same event
        in this list; parent_seqs that cannot name another event are kept aside."""
        events = self.raw.get("events")
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            return
        n = len(events)
        seqs = [e.get("seq") for e in events]
        if all(isinstance(s, int) and not isinstance(s, bool) for s in seqs) and sorted(seqs) == list(range(n)):
            events.sort(key=lambda e: e["seq"])
        elif all(s is None for s in seqs):
            order = ts_order([_ts_text(e.get("ts")) for e in events])
            events[:] = [events[i] for i in order]
            for pos, e in enumerate(events):
                e["seq"] = pos
        for i, ev in enumerate(events):
            p = ev.get("parent_seq")
            if p is None:
                continue
            ok = isinstance(p, int) and not isinstance(p, bool) and 0 <= p < n and p != i
            if isinstance(p, float) and p.is_integer():
                ok = 0 <= p < n and int(p) != i
            if not ok:
                _keep(_meta(ev), "original_parent_seq", ev.pop("parent_seq"))
                self.warn(f"events[{i}].parent_seq", f"{_short(p)} is not the seq of another event of this run; "
                                                     "kept in metadata.original_parent_seq")

    def repair(self, err: RunFormatError) -> bool:
        """Fix the field `err` names; False when the run cannot be a run (or nothing to fix)."""
        field = err.field
        if not field:
            return False
        tokens = _parse(field)
        raw = self.raw
        head = tokens[0]
        if head == "run_id":
            return False
        if head == "events" and len(tokens) == 1:
            return False
        # --- whole list items that are unusable
        if len(tokens) == 2 and isinstance(tokens[1], int) and head in ("events", "principals", "agents",
                                                                           "audits", "checks"):
            return self.drop_item(head, tokens[1], err.message, field)
        if len(tokens) == 1 and head in ("principals", "agents", "audits", "checks"):
            where = self.unmapped(head, raw.pop(head, None))
            self.warn(field, f"{err.message}; kept in {where}")
            return True
        if head == "events" and len(tokens) >= 3:
            return self.event(tokens, err)
        if head in ("principals", "agents") and len(tokens) >= 3 and tokens[2] == "id":
            return self.drop_item(head, tokens[1], err.message, field)
        if head in ("audits", "checks") and len(tokens) >= 3:
            return self.audit(head, tokens, err)
        if head == "agents" and len(tokens) == 3 and tokens[2] == "principal":
            agent = _get(raw, tokens[:2])
            pid = agent.get("principal") if isinstance(agent, dict) else None
            if isinstance(pid, str) and pid.strip():
                principals = raw.get("principals")
                if not isinstance(principals, list):
                    principals = raw["principals"] = []
                principals.append({"id": pid})
                self.warn(field, f"principal {pid!r} named by agent {agent.get('id')!r} is not described "
                                 "anywhere; added with that id only")
                return True
        if head == "scenario":
            return self.scenario(tokens, err)
        # --- a scalar of the run, or a field of a nested object: move the value aside
        return self.move_aside(tokens, err)

    def drop_item(self, head: str, index: int, message: str, field: str | None = None) -> bool:
        items = self.raw.get(head)
        if not isinstance(items, list) or index >= len(items):
            return False
        item = items.pop(index)
        if head == "events" and not items:
            return False
        where = self.unmapped(head, item)
        self.warn(field or f"{head}[{index}]", f"{message}; the record is kept in {where}")
        return True

    def event(self, tokens: list, err: RunFormatError) -> bool:
        events = self.raw["events"]
        key = tokens[2]
        ev = _get(self.raw, tokens[:2])
        if not isinstance(ev, dict):
            return False
        field = err.field
        if key == "seq":
            for pos, e in enumerate(events):
                if isinstance(e, dict):
                    if "seq" in e:
                        _meta(e)["original_seq"] = e.pop("seq")
                    e["seq"] = pos
            self.warn(field, f"{err.message}; the run's seqs are reassigned in file order "
                             "(each original kept in metadata.original_seq)")
            return True
        if key == "kind":
            value = ev.get("kind")
            if value is None:
                ev["kind"] = "log"
                self.warn(field, "event has no kind; stored as a log event")
            else:
                _keep(_meta(ev), "original_kind", ev.pop("kind"))
                ev["kind"] = "log"
                self.warn(field, f"{err.message}; stored as a log event (kept in metadata.original_kind)")
            return True
        if key == "actor":
            value = ev.pop("actor", None)
            ev["actor"] = "system"
            if value is None:
                self.warn(field, "event names no actor; attributed to 'system' (the harness)")
            else:
                _keep(_meta(ev), "original_actor", value)
                self.warn(field, f"{err.message}; attributed to 'system' (kept in metadata.original_actor)")
            return True
        if key == "recipients" and len(tokens) >= 4:
            rec = ev.get("recipients")
            if isinstance(rec, list) and tokens[3] < len(rec):
                value = rec.pop(tokens[3])
                _meta(ev).setdefault("unknown_recipients", []).append(value)
                self.warn(field, f"{err.message}; dropped from recipients (kept in metadata.unknown_recipients)")
                return True
            return False
        if key in ev:
            value = ev.pop(key)
            _keep(_meta(ev), f"original_{key}", value)
            self.warn(field, f"{err.message}; kept in metadata.original_{key}")
            return True
        return self.move_aside(tokens, err)

    def audit(self, head: str, tokens: list, err: RunFormatError) -> bool:
        item = _get(self.raw, tokens[:2])
        if not isinstance(item, dict):
            return False
        key = tokens[2]
        field = err.field
        if key in ("mode", "check_id") and item.get(key) is None:
            return self.drop_item(head, tokens[1], err.message, field)
        if key == "source" and item.get("source") is None:
            item["source"] = "unknown"
            self.warn(field, "no source given; stored as source 'unknown'")
            return True
        if key == "evidence" and len(tokens) >= 4:
            ev = item.get("evidence")
            if isinstance(ev, list) and tokens[3] < len(ev):
                _meta(item).setdefault("unresolved_evidence", []).append(ev.pop(tokens[3]))
                self.warn(field, f"{err.message}; kept in metadata.unresolved_evidence")
                return True
            return False
        if key in item:
            _keep(_meta(item), f"original_{key}", item.pop(key))
            self.warn(field, f"{err.message}; kept in metadata.original_{key}")
            return True
        return self.move_aside(tokens, err)

    def scenario(self, tokens: list, err: RunFormatError) -> bool:
        raw = self.raw
        sc = raw.get("scenario")
        if len(tokens) == 1:
            if sc is not None:
                self.unmapped("scenario", sc)
            raw["scenario"] = {"id": "unknown", "family": "unknown"}
            self.warn("scenario", f"{err.message}; stored under scenario 'unknown' (family 'unknown')")
            return True
        key = tokens[1]
        if not isinstance(sc, dict):
            return False
        if key in ("id", "family") and not (isinstance(sc.get(key), str) and sc[key].strip()):
            if sc.get(key) is not None:
                _keep(_meta(sc), f"original_{key}", sc[key])
            sc[key] = "unknown"
            self.warn(err.field, f"{err.message}; stored as 'unknown'")
            return True
        if key in sc and key != "metadata":
            _keep(_meta(sc), f"original_{key}", sc.pop(key))
            self.warn(err.field, f"{err.message}; kept in scenario.metadata.original_{key}")
            return True
        return self.move_aside(tokens, err)

    def move_aside(self, tokens: list, err: RunFormatError) -> bool:
        """Generic: take the value at the failing path out of its object and keep it."""
        # metadata clashes name the key of the *source* object: path.metadata.key -> object.key
        if "metadata" in tokens:
            j = len(tokens) - 1 - tokens[::-1].index("metadata")
            owner_tokens = tokens[:j]
            owner = _get(self.raw, owner_tokens) if owner_tokens else self.raw
            key = tokens[j + 1] if j + 1 < len(tokens) else None
            if isinstance(owner, dict) and isinstance(key, str) and key in owner:
                value = owner.pop(key)
                where = self.unmapped(".".join(str(t) for t in tokens), value)
                self.warn(err.field, f"{err.message}; kept in {where}")
                return True
        owner = _get(self.raw, tokens[:-1]) if len(tokens) > 1 else self.raw
        key = tokens[-1]
        if isinstance(owner, dict) and key in owner:
            value = owner.pop(key)
            if owner is self.raw:
                where = "metadata." + _keep(_meta(self.raw), f"original_{key}", value)
            elif len(tokens) >= 2 and tokens[-2] == "outcome":
                metrics = owner.setdefault("metrics", {})
                if not isinstance(metrics, dict):
                    return False
                where = f"{'.'.join(map(str, tokens[:-1]))}.metrics." + _keep(metrics, f"original_{key}", value)
            else:
                where = self.unmapped(".".join(str(t) for t in tokens), value)
            self.warn(err.field, f"{err.message}; kept in {where}")
            return True
        if isinstance(owner, list) and isinstance(key, int) and key < len(owner):
            value = owner.pop(key)
            where = self.unmapped(".".join(str(t) for t in tokens), value)
            self.warn(err.field, f"{err.message}; kept in {where}")
            return True
        return False


def normalize_lenient(raw: Any, location: Location | str | None = None, *, require_events: bool = True,
                      max_repairs: int = MAX_REPAIRS) -> tuple[dict[str, Any], list[Problem]]:
    """Normalize `raw`, repairing what does not map; returns ``(run, warnings)``.

    Raises `RunFormatError` when the record cannot be a run: not an object, no run id, no events
    (an explicitly empty ``events`` list is accepted when not `require_events`, as the canonical
    shape does), or a problem nothing can repair."""
    if not isinstance(raw, dict):
        return normalize_run(raw, location), []
    rid = raw.get("run_id")
    early: list[Problem] = []
    if isinstance(rid, int) and not isinstance(rid, bool):
        raw = {**raw, "run_id": str(rid)}
        rid = raw["run_id"]
        early.append(Problem("run_id", f"run id {rid} is a number; stored as the text {rid!r}"))
    if not (isinstance(rid, str) and rid.strip()):
        raise RunFormatError(location, "no run id: this cannot be a run", field="run_id")
    events = raw.get("events")
    if not isinstance(events, list) or (require_events and not events):
        raise RunFormatError(location, "no events: this cannot be a run", run_id=rid, field="events")
    work = copy.copy(raw)  # nested objects are repaired in place: pass a record built for this
    fixer = _Repairer(work)
    fixer.warnings.extend(early)
    fixer.prepass()
    fixer.align()
    seen: dict[str, int] = {}
    for _ in range(max_repairs):
        try:
            run = normalize_run(work, location)
            problem = storage_problem(run)
            if problem is not None and _MOVABLE.match(problem[0]):
                raise RunFormatError(location, f"{problem[1]} (the database cannot hold it)", field=problem[0])
            return run, fixer.warnings
        except RunFormatError as err:
            # the same problem of the same object twice over means the repair made no progress; the
            # object is part of the key because a repair that drops a record moves the next one
            # into its place (the third mode-less check of a run is checks[0] again, but not the same)
            tokens = _parse(err.field) if err.field else []
            owner = _get(work, tokens[:-1]) if len(tokens) > 1 else work
            key = f"{err.field}|{err.message}|{id(owner)}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 2 or not fixer.repair(err):
                if fixer.warnings:
                    fatal = RunFormatError(err.where, f"{err.message} (after {len(fixer.warnings)} other "
                                           "problem(s) were worked around)", run_id=err.run_id, field=err.field)
                    fatal.problems = list(fixer.warnings)  # every problem of the run is reported
                    raise fatal from None
                raise
    raise RunFormatError(location, f"more than {max_repairs} problems; giving up on this run")
