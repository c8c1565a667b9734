"""The canonical run record: validation, normalization and content hashing.

`normalize_run(obj, location)` turns one raw record into the normalized canonical run that every
importer yields and everything downstream reads::

    {"run_id": str,
     "scenario": {"id", "family", "alignment", "title", "description", "metadata"},
     "status": "completed"|"failed"|"timeout"|"error", "aggregate_score": float|None,
     "started_at": str|None, "ended_at": str|None,
     "principals": [{"id", "name", "kind", "objective", "constraints": [str],
                     "outcome": {"success", "score", "metrics"}, "metadata"}],
     "agents": [{"id", "principal", "role", "model", "harness", "private_state", "metadata"}],
     "events": [{"seq", "ts", "kind", "actor", "recipients", "visibility", "content", "data",
                 "parent_seq", "hop", "metadata"}],
     "audits": [{"source", "level", "mode", "agent", "evidence": [int], "note", "metadata"}],
     "checks": [{"source", "level", "check_id", "passed", "agent", "evidence": [int], "detail",
                 "metadata"}],   # present only when the run has checks
     "metadata": {}}

Rules applied (the spec is /work/shared/spec/run-format.md):

* required: run_id, scenario.id, scenario.family, principals[].id, agents[].id, events[].kind,
  events[].actor, audits[].source, audits[].mode (or, for an attribution with mode null,
  audits[].agent and audits[].evidence); enums for status, scenario.alignment,
  principals[].kind, events[].kind and events[].visibility;
* defaults: status "completed", visibility "shared" when the event has recipients else "private",
  data {}, lists [] and metadata {};
* unknown fields: top-level ones are merged into the run's `metadata`, unknown fields of a nested
  object into that object's own `metadata` (of a principal's `outcome`: into `outcome.metrics`);
  a clash with a different value already in that metadata is an error, nothing is dropped;
* `seq` is dense 0..n-1 and events are returned ordered by it; when no event has a seq they get
  one by timestamp order (stable; an event without ts keeps its place after its predecessor);
* actors and recipients name an agent id, a principal id or "system"; an agent's `principal`
  names a principal; parent_seq and audit evidence name existing seqs; an audit's `agent` names
  an agent or principal;
* timestamps are ISO 8601 strings (kept verbatim); numeric epoch seconds become ISO strings;
* all free-form values (data, metadata, private_state, metrics) must be JSON values and are
  deep-copied.

Normalization is idempotent: ``normalize_run(normalize_run(x)) == normalize_run(x)``.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

EVENT_KINDS = ("message", "tool_call", "tool_result", "state_update", "artifact", "discovery",
               "delegation", "log")
STATUSES = ("completed", "failed", "timeout", "error")
ALIGNMENTS = ("cooperative", "mixed", "competitive")
VISIBILITIES = ("shared", "private")
PRINCIPAL_KINDS = ("person", "organization")
SYSTEM_ACTOR = "system"

RUN_KEYS = ("run_id", "scenario", "status", "aggregate_score", "started_at", "ended_at", "principals",
            "agents", "events", "audits", "checks", "metadata")
SCENARIO_KEYS = ("id", "family", "alignment", "title", "description", "metadata")
PRINCIPAL_KEYS = ("id", "name", "kind", "objective", "constraints", "outcome", "metadata")
OUTCOME_KEYS = ("success", "score", "metrics")
AGENT_KEYS = ("id", "principal", "role", "model", "harness", "private_state", "metadata")
EVENT_KEYS = ("seq", "ts", "kind", "actor", "recipients", "visibility", "content", "data", "parent_seq",
              "hop", "metadata")
AUDIT_KEYS = ("source", "level", "mode", "agent", "evidence", "note", "metadata")
CHECK_KEYS = ("source", "level", "check_id", "passed", "agent", "evidence", "detail", "metadata")
_EVENT_KEYSET, _EVENT_KINDSET, _VISIBILITYSET = frozenset(EVENT_KEYS), frozenset(EVENT_KINDS), frozenset(VISIBILITIES)


@dataclass(frozen=True)
class Location:
    """Where a record came from: file, 1-based line, and/or a pointer such as ``[3]``."""

    file: str | None = None
    line: int | None = None
    pointer: str | None = None

    def __str__(self) -> str:
        head = self.file or ""
        if self.line is not None:
            head = f"{head}:{self.line}" if head else f"line {self.line}"
        if self.pointer:
            head = f"{head}:{self.pointer}" if head else self.pointer
        return head


def as_location(location: Location | str | None) -> Location:
    """Return `location` as a `Location` (a plain string is taken as the file name)."""
    if isinstance(location, Location):
        return location
    return Location(file=str(location)) if location else Location()


class RunFormatError(ValueError):
    """A run (or a piece of input) that does not follow the canonical format.

    ``str(err)`` reads ``"FILE:LINE: run X: field Y: message"`` (parts that are unknown are left
    out); `location` is everything before the message, `message` the message itself.
    """

    def __init__(self, location: Location | str | None, message: str, *, run_id: str | None = None,
                 field: str | None = None) -> None:
        self.where = as_location(location)
        self.message = message
        self.run_id = run_id
        self.field = field
        super().__init__(self.__str__())

    @property
    def location(self) -> str:
        parts = [str(self.where)]
        if self.run_id is not None:
            parts.append(f"run {self.run_id}")
        if self.field:
            parts.append(f"field {self.field}")
        return ": ".join(p for p in parts if p)

    def __str__(self) -> str:
        loc = self.location
        return f"{loc}: {self.message}" if loc else self.message

    def to_dict(self) -> dict[str, str]:
        """Return ``{"location": ..., "message": ...}`` (the REST error shape)."""
        return {"location": self.location, "message": self.message}

    def __reduce__(self):  # pickled whole (attributes included): items cross processes (read_ahead)
        return _restore_error, (type(self), self.args, self.__dict__)


def _restore_error(cls: type, args: tuple, state: dict) -> RunFormatError:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


# --------------------------------------------------------------------------- helpers

def parse_ts(value: str) -> datetime:
    """Parse an ISO 8601 timestamp; a naive one is taken as UTC. Raises ValueError."""
    dt = datetime.fromisoformat(value.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt


def ts_key(value: str | None) -> float | None:
    """Return a sortable number (epoch seconds) for an ISO timestamp, None for None/unparseable."""
    if value is None:
        return None
    try:
        return parse_ts(value).timestamp()
    except (ValueError, TypeError):
        return None


def epoch_to_iso(seconds: float) -> str:
    """Format epoch seconds as an ISO 8601 UTC string ending in Z."""
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    text = dt.isoformat(timespec="microseconds" if dt.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def _tname(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "integer", float: "number"}.get(type(value), type(value).__name__)


def _carry_forward_keys(ts_values: list[str | None]) -> list[float]:
    """Sort keys for timestamps; a missing one inherits its predecessor's (the first: -inf)."""
    keys: list[float] = []
    prev = -math.inf
    for value in ts_values:
        k = ts_key(value)
        if k is None:
            k = prev
        keys.append(k)
        prev = k
    return keys


class _NotJSON(Exception):
    pass


_SCALARS = (str, int, bool, type(None))


def _copy_json(value: Any) -> Any:
    """Deep copy of a JSON value; raises _NotJSON for anything else (or NaN/inf)."""
    t = type(value)
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotJSON
            out[k] = v if type(v) in _SCALARS else _copy_json(v)
        return out
    if t is list:
        return [v if type(v) in _SCALARS else _copy_json(v) for v in value]
    if t in _SCALARS:
        return value
    if t is float:
        if not math.isfinite(value) or (value and not 1e-4 <= abs(value) < 1e16):
            raise _NotJSON  # NaN / infinity (refused), or a float json and orjson write apart (noted)
        return value
    raise _NotJSON


def ts_order(ts_values: list[str | None]) -> list[int]:
    """Indices of `ts_values` in timestamp order (stable; a missing ts follows its predecessor)."""
    keys = _carry_forward_keys(ts_values)
    return sorted(range(len(keys)), key=keys.__getitem__)


def _odd_float(value: float) -> bool:
    """Whether `json` writes `value` with an exponent (below 1e-4 or from 1e16 up), where orjson
    writes it otherwise (see `canonical_json_bytes`)."""
    return bool(value) and not 1e-4 <= abs(value) < 1e16


class _Normalizer:
    def __init__(self, location: Location | str | None) -> None:
        self.loc = as_location(location)
        self.run_id: str | None = None
        #: a float of the run that json and orjson write differently (see `_odd_float`)
        self.odd_floats = False

    def fail(self, field: str | None, message: str) -> None:
        raise RunFormatError(self.loc, message, run_id=self.run_id, field=field)

    # -- scalar checks
    def req_str(self, obj: dict, key: str, path: str) -> str:
        if key not in obj or obj[key] is None:
            self.fail(path, "required field is missing")
        value = obj[key]
        if not isinstance(value, str) or not value.strip():
            self.fail(path, f"must be a non-empty string, got {_tname(value)} {value!r}"[:200])
        return value

    def opt_str(self, value: Any, path: str) -> str | None:
        if value is None or isinstance(value, str):
            return value
        self.fail(path, f"must be a string or null, got {_tname(value)}")
        return None

    def opt_enum(self, value: Any, allowed: tuple[str, ...], path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or value not in allowed:
            self.fail(path, f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    def opt_num(self, value: Any, path: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"must be a number or null, got {_tname(value)}")
        if not math.isfinite(value):
            self.fail(path, "must be a finite number")
        value = float(value)
        if _odd_float(value):
            self.odd_floats = True
        return value

    def opt_int(self, value: Any, path: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"must be an integer or null, got {_tname(value)}")
        return value

    def opt_bool(self, value: Any, path: str) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        self.fail(path, f"must be true, false or null, got {_tname(value)}")
        return None

    def opt_ts(self, value: Any, path: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                self.fail(path, "timestamp must be finite")
            try:
                return epoch_to_iso(float(value))
            except (OverflowError, OSError, ValueError):
                self.fail(path, f"epoch timestamp {value!r} is out of range"[:200])
        if not isinstance(value, str):
            self.fail(path, f"must be an ISO 8601 timestamp string, got {_tname(value)}")
        try:
            parse_ts(value)
        except ValueError:
            self.fail(path, f"not an ISO 8601 timestamp: {value!r}"[:200])
        return value

    def str_list(self, value: Any, path: str) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list):
            self.fail(path, f"must be an array of strings, got {_tname(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{path}[{i}]", f"must be a string, got {_tname(item)}")
        return list(value)

    def json_value(self, value: Any, path: str) -> Any:
        """Deep-copy `value`, checking that it is made of JSON values only."""
        try:
            return _copy_json(value)
        except _NotJSON:
            return self.json_value_slow(value, path)

    def json_value_slow(self, value: Any, path: str) -> Any:
        """Like `json_value`, tracking the path so that the error can name the bad spot."""
        if value is None or isinstance(value, (str, bool, int)):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.fail(path, "must not contain NaN or infinite numbers")
            if _odd_float(value):
                self.odd_floats = True
            return value
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    self.fail(path, f"object keys must be strings, got {_tname(k)}")
                out[k] = self.json_value_slow(v, f"{path}.{k}")
            return out
        if isinstance(value, list):
            return [self.json_value_slow(v, f"{path}[{i}]") for i, v in enumerate(value)]
        self.fail(path, f"must be a JSON value, got {type(value).__name__}")
        return None

    def obj(self, value: Any, path: str, default_none: bool = False) -> dict | None:
        if value is None:
            return None if default_none else {}
        if not isinstance(value, dict):
            self.fail(path, f"must be an object, got {_tname(value)}")
        return self.json_value(value, path)

    def merge_unknown(self, target: dict, source: dict, known: tuple[str, ...], path: str) -> dict:
        for key, value in source.items():
            if key in known:
                continue
            value = self.json_value(value, f"{path}.{key}" if path else key)
            if key in target and target[key] != value:
                self.fail(f"{path}.{key}" if path else key,
                          f"unknown field {key!r} would go to {path or 'metadata'} but "
                          f"{path or 'metadata'} already holds a different {key!r}")
            target[key] = value
        return target

    def list_of_objects(self, value: Any, path: str) -> list[dict]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"must be an array, got {_tname(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                self.fail(f"{path}[{i}]", f"must be an object, got {_tname(item)}")
        return value

    # -- objects
    def run(self, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            self.fail(None, f"a run must be a JSON object, got {_tname(raw)}")
        rid = raw.get("run_id")
        if isinstance(rid, str) and rid.strip():
            self.run_id = rid
        run_id = self.req_str(raw, "run_id", "run_id")
        scenario = self.scenario(raw.get("scenario"))
        metadata = self.obj(raw.get("metadata"), "metadata")
        self.merge_unknown(metadata, raw, RUN_KEYS, "")
        status = raw.get("status")
        status = "completed" if status is None else self.opt_enum(status, STATUSES, "status")
        principals = [self.principal(p, f"principals[{i}]")
                      for i, p in enumerate(self.list_of_objects(raw.get("principals"), "principals"))]
        principal_ids = self.unique_ids(principals, "principals")
        agents = [self.agent(a, f"agents[{i}]", principal_ids)
                  for i, a in enumerate(self.list_of_objects(raw.get("agents"), "agents"))]
        agent_ids = self.unique_ids(agents, "agents")
        events = self.events(raw.get("events"), agent_ids | principal_ids | {SYSTEM_ACTOR})
        n_events = len(events)
        audits = [self.audit(a, f"audits[{i}]", agent_ids | principal_ids, n_events)
                  for i, a in enumerate(self.list_of_objects(raw.get("audits"), "audits"))]
        checks = [self.check(c, f"checks[{i}]", agent_ids | principal_ids, n_events)
                  for i, c in enumerate(self.list_of_objects(raw.get("checks"), "checks"))]
        out = {
            "run_id": run_id,
            "scenario": scenario,
            "status": status,
            "aggregate_score": self.opt_num(raw.get("aggregate_score"), "aggregate_score"),
            "started_at": self.opt_ts(raw.get("started_at"), "started_at"),
            "ended_at": self.opt_ts(raw.get("ended_at"), "ended_at"),
            "principals": principals,
            "agents": agents,
            "events": events,
            "audits": audits,
            "metadata": metadata,
        }
        if checks:  # only when present, so that runs without checks keep their content hash
            out["checks"] = checks
        return out

    def unique_ids(self, items: list[dict], path: str) -> set[str]:
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            if item["id"] in seen:
                self.fail(f"{path}[{i}].id", f"duplicate id {item['id']!r} (also {path}[{seen[item['id']]}])")
            seen[item["id"]] = i
        return set(seen)

    def scenario(self, raw: Any) -> dict[str, Any]:
        if raw is None:
            self.fail("scenario", "required field is missing")
        if not isinstance(raw, dict):
            self.fail("scenario", f"must be an object, got {_tname(raw)}")
        metadata = self.obj(raw.get("metadata"), "scenario.metadata")
        self.merge_unknown(metadata, raw, SCENARIO_KEYS, "scenario.metadata")
        return {
            "id": self.req_str(raw, "id", "scenario.id"),
            "family": self.req_str(raw, "family", "scenario.family"),
            "alignment": self.opt_enum(raw.get("alignment"), ALIGNMENTS, "scenario.alignment"),
            "title": self.opt_str(raw.get("title"), "scenario.title"),
            "description": self.opt_str(raw.get("description"), "scenario.description"),
            "metadata": metadata,
        }

    def principal(self, raw: dict, path: str) -> dict[str, Any]:
        metadata = self.obj(raw.get("metadata"), f"{path}.metadata")
        self.merge_unknown(metadata, raw, PRINCIPAL_KEYS, f"{path}.metadata")
        outcome_raw = raw.get("outcome")
        if outcome_raw is None:
            outcome_raw = {}
        if not isinstance(outcome_raw, dict):
            self.fail(f"{path}.outcome", f"must be an object, got {_tname(outcome_raw)}")
        metrics = self.obj(outcome_raw.get("metrics"), f"{path}.outcome.metrics")
        self.merge_unknown(metrics, outcome_raw, OUTCOME_KEYS, f"{path}.outcome.metrics")
        return {
            "id": self.req_str(raw, "id", f"{path}.id"),
            "name": self.opt_str(raw.get("name"), f"{path}.name"),
            "kind": self.opt_enum(raw.get("kind"), PRINCIPAL_KINDS, f"{path}.kind"),
            "objective": self.opt_str(raw.get("objective"), f"{path}.objective"),
            "constraints": self.str_list(raw.get("constraints"), f"{path}.constraints"),
            "outcome": {
                "success": self.opt_bool(outcome_raw.get("success"), f"{path}.outcome.success"),
                "score": self.opt_num(outcome_raw.get("score"), f"{path}.outcome.score"),
                "metrics": metrics,
            },
            "metadata": metadata,
        }

    def agent(self, raw: dict, path: str, principal_ids: set[str]) -> dict[str, Any]:
        metadata = self.obj(raw.get("metadata"), f"{path}.metadata")
        self.merge_unknown(metadata, raw, AGENT_KEYS, f"{path}.metadata")
        principal = self.opt_str(raw.get("principal"), f"{path}.principal")
        if principal is not None and principal not in principal_ids:
            self.fail(f"{path}.principal", f"{principal!r} is not the id of a principal of this run")
        return {
            "id": self.req_str(raw, "id", f"{path}.id"),
            "principal": principal,
            "role": self.opt_str(raw.get("role"), f"{path}.role"),
            "model": self.opt_str(raw.get("model"), f"{path}.model"),
            "harness": self.opt_str(raw.get("harness"), f"{path}.harness"),
            "private_state": self.obj(raw.get("private_state"), f"{path}.private_state"),
            "metadata": metadata,
        }

    def events(self, raw: Any, actors: set[str]) -> list[dict[str, Any]]:
        items = self.list_of_objects(raw, "events")
        from app.ingest.safety.limits import input_limits

        most = input_limits().max_events_per_run
        if len(items) > most:
            self.fail("events", f"{len(items)} events, at most {most} per run (limit MAX_EVENTS_PER_RUN)")
        events = [self.event(e, f"events[{i}]") for i, e in enumerate(items)]
        n = len(events)
        given = [e["seq"] for e in events]
        if all(s is None for s in given):
            order = ts_order([e["ts"] for e in events])
            for seq, i in enumerate(order):
                events[i]["seq"] = seq
            events = [events[i] for i in order]
        else:
            first_at: dict[int, int] = {}
            for i, s in enumerate(given):
                if s is None:
                    self.fail(f"events[{i}].seq", "missing while other events have a seq "
                                                  "(give every event a seq, or none)")
                if s in first_at:
                    self.fail(f"events[{i}].seq", f"duplicate seq {s} (also events[{first_at[s]}])")
                if s < 0 or s >= n:
                    self.fail(f"events[{i}].seq", f"seq {s} out of range: seqs must be dense 0..{n - 1}")
                first_at[s] = i
            events = sorted(events, key=lambda e: e["seq"])
        for i, e in enumerate(events):
            path = f"events[{i}]"
            if e["actor"] not in actors:
                self.fail(f"{path}.actor", f"{e['actor']!r} is not an agent id, a principal id or 'system'")
            for j, r in enumerate(e["recipients"]):
                if r not in actors:
                    self.fail(f"{path}.recipients[{j}]",
                              f"{r!r} is not an agent id, a principal id or 'system'")
            p = e["parent_seq"]
            if p is not None and not (0 <= p < n and p != e["seq"]):
                self.fail(f"{path}.parent_seq", f"{p} is not the seq of another event of this run")
        return events

    def event(self, raw: dict, path: str) -> dict[str, Any]:
        fast = self.event_fast(raw)
        return fast if fast is not None else self.event_checked(raw, path)

    def event_fast(self, raw: dict) -> dict[str, Any] | None:
        """`event_checked` for the common event (known keys only, values of the usual types),
        with the same result; None for anything else, which `event_checked` then handles (and
        names the problem of)."""
        if not raw.keys() <= _EVENT_KEYSET:
            return None
        get = raw.get
        kind, actor, recipients, visibility = get("kind"), get("actor"), get("recipients"), get("visibility")
        content, ts, seq, parent, hop = get("content"), get("ts"), get("seq"), get("parent_seq"), get("hop")
        if (type(kind) is not str or kind not in _EVENT_KINDSET or type(actor) is not str or not actor.strip()
                or (content is not None and type(content) is not str)
                or (seq is not None and type(seq) is not int) or (parent is not None and type(parent) is not int)
                or (hop is not None and type(hop) is not int)):
            return None
        if recipients is None:
            recipients = []
        elif type(recipients) is str:
            recipients = [recipients]
        elif type(recipients) is list and all(type(r) is str for r in recipients):
            recipients = list(recipients)
        else:
            return None
        if visibility is None:
            visibility = "shared" if recipients else "private"
        elif type(visibility) is not str or visibility not in _VISIBILITYSET:
            return None
        if ts is not None:
            if type(ts) is not str:
                return None
            try:
                parse_ts(ts)
            except ValueError:
                return None
        metadata = get("metadata")
        if metadata is None:
            metadata = {}
        elif type(metadata) is dict:
            try:
                metadata = _copy_json(metadata)
            except _NotJSON:
                return None
        else:
            return None
        if "data" in raw:
            try:
                data = _copy_json(raw["data"])
            except _NotJSON:
                return None
        else:
            data = {}
        return {"seq": seq, "ts": ts, "kind": kind, "actor": actor, "recipients": recipients,
                "visibility": visibility, "content": content, "data": data, "parent_seq": parent, "hop": hop,
                "metadata": metadata}

    def event_checked(self, raw: dict, path: str) -> dict[str, Any]:
        metadata = self.obj(raw.get("metadata"), f"{path}.metadata")
        self.merge_unknown(metadata, raw, EVENT_KEYS, f"{path}.metadata")
        kind = self.req_str(raw, "kind", f"{path}.kind")
        if kind not in EVENT_KINDS:
            self.fail(f"{path}.kind", f"must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        recipients = self.str_list(raw.get("recipients"), f"{path}.recipients")
        visibility = raw.get("visibility")
        if visibility is None:
            visibility = "shared" if recipients else "private"
        visibility = self.opt_enum(visibility, VISIBILITIES, f"{path}.visibility")
        content = raw.get("content")
        if content is not None and not isinstance(content, str):
            self.fail(f"{path}.content", f"must be a string or null, got {_tname(content)}")
        return {
            "seq": self.opt_int(raw.get("seq"), f"{path}.seq"),
            "ts": self.opt_ts(raw.get("ts"), f"{path}.ts"),
            "kind": kind,
            "actor": self.req_str(raw, "actor", f"{path}.actor"),
            "recipients": recipients,
            "visibility": visibility,
            "content": content,
            "data": self.json_value(raw["data"], f"{path}.data") if "data" in raw else {},
            "parent_seq": self.opt_int(raw.get("parent_seq"), f"{path}.parent_seq"),
            "hop": self.opt_int(raw.get("hop"), f"{path}.hop"),
            "metadata": metadata,
        }

    def known_agent(self, raw: dict, path: str, known: set[str]) -> str | None:
        """The record's optional `agent`, which must name an agent or principal of this run."""
        agent = self.opt_str(raw.get("agent"), f"{path}.agent")
        if agent is not None and agent not in known:
            self.fail(f"{path}.agent", f"{agent!r} is not an agent id or principal id of this run")
        return agent

    def audit(self, raw: dict, path: str, known: set[str], n_events: int) -> dict[str, Any]:
        metadata = self.obj(raw.get("metadata"), f"{path}.metadata")
        self.merge_unknown(metadata, raw, AUDIT_KEYS, f"{path}.metadata")
        agent = self.known_agent(raw, path, known)
        evidence = self.evidence(raw.get("evidence"), path, n_events)
        mode = raw.get("mode")
        if mode is None:  # an attribution (who and when, no mode) needs both
            if agent is None or not evidence:
                self.fail(f"{path}.mode", "required field is missing (an audit without a mode is an "
                                          "attribution and needs an agent and evidence)")
        else:
            mode = self.req_str(raw, "mode", f"{path}.mode")
        return {
            "source": self.req_str(raw, "source", f"{path}.source"),
            "level": self.opt_str(raw.get("level"), f"{path}.level"),
            "mode": mode,
            "agent": agent,
            "evidence": evidence,
            "note": self.opt_str(raw.get("note"), f"{path}.note"),
            "metadata": metadata,
        }

    def check(self, raw: dict, path: str, known: set[str], n_events: int) -> dict[str, Any]:
        metadata = self.obj(raw.get("metadata"), f"{path}.metadata")
        self.merge_unknown(metadata, raw, CHECK_KEYS, f"{path}.metadata")
        agent = self.known_agent(raw, path, known)
        return {
            "source": self.req_str(raw, "source", f"{path}.source"),
            "level": self.opt_str(raw.get("level"), f"{path}.level"),
            "check_id": self.req_str(raw, "check_id", f"{path}.check_id"),
            "passed": self.opt_bool(raw.get("passed"), f"{path}.passed"),
            "agent": agent,
            "evidence": self.evidence(raw.get("evidence"), path, n_events),
            "detail": self.opt_str(raw.get("detail"), f"{path}.detail"),
            "metadata": metadata,
        }

    def evidence(self, evidence_raw: Any, path: str, n_events: int) -> list[int]:
        if evidence_raw is None:
            evidence_raw = []
        if isinstance(evidence_raw, int) and not isinstance(evidence_raw, bool):
            evidence_raw = [evidence_raw]
        if not isinstance(evidence_raw, list):
            self.fail(f"{path}.evidence", f"must be an array of event seqs, got {_tname(evidence_raw)}")
        evidence = []
        for j, s in enumerate(evidence_raw):
            s = self.opt_int(s, f"{path}.evidence[{j}]")
            if s is None or not 0 <= s < n_events:
                self.fail(f"{path}.evidence[{j}]", f"{s} is not the seq of an event of this run")
            evidence.append(s)
        return evidence


def normalize_run(obj: Any, location: Location | str | None = None) -> dict[str, Any]:
    """Validate one raw run record and return it in normalized canonical form.

    `location` (a file name or a `Location`) is only used in error messages. Raises
    `RunFormatError` naming the location, the run id (when known) and the offending field.
    """
    return _Normalizer(location).run(obj)


def normalize_run_checked(obj: Any, location: Location | str | None = None) -> tuple[dict[str, Any], bool]:
    """`normalize_run`, and whether every float of the run is one that json and orjson write the
    same (no float below 1e-4 or from 1e16 up): then `canonical_json_bytes(run, plain=True)`
    and `compact_json(value, plain=True)` of its values skip their check."""
    n = _Normalizer(location)
    run = n.run(obj)
    return run, not n.odd_floats


def canonical_json(run: dict[str, Any]) -> str:
    """Serialize a run with sorted keys and compact separators (the hashed form)."""
    return json.dumps(run, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(run: dict[str, Any]) -> str:
    """Return the hex sha256 of `canonical_json(run)` (pass a normalized run)."""
    return hashlib.sha256(canonical_json(run).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- fast encoding
#
# orjson writes the same bytes as `json.dumps(..., separators=(",", ":"), ensure_ascii=False)`
# (with `sort_keys` as OPT_SORT_KEYS: both order keys by code point) for every value a
# normalized run holds, except three cases, each of which falls back to `json` here:
# * floats below 1e-4 or from 1e16 up: Python writes `1e-05` / `1e+16`, orjson `0.00001` / `1e16`.
#   `_RISKY` finds every number orjson wrote as `0.0000...` or with an exponent (a string that
#   happens to look like one only costs the fallback). That search costs as much as the
#   encoding, so it is skipped (`plain=True`) for a run that `normalize_run_checked` found
#   to have no such float;
# * integers beyond 64 bits and lone surrogates: orjson refuses them (TypeError);
# * NaN and infinities, which orjson writes as `null`: a normalized run has none (normalize_run
#   refuses them), which is why these functions are for normalized runs only.
# tests/ingest/test_fast_json.py checks the equality on the demo corpus, the fixtures and edge values.

try:  # pragma: no cover - orjson is a declared dependency; json alone gives the same bytes
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

_RISKY = re.compile(rb"(?:^|[:,\[])-?(?:0\.0000|\d(?:\.\d+)?e)")
_SORT_KEYS = _orjson.OPT_SORT_KEYS if _orjson is not None else 0


def _orjson_bytes(value: Any, option: int, plain: bool) -> bytes | None:
    """orjson's bytes for `value`, or None where they may differ from `json`'s (see above)."""
    if _orjson is None:
        return None
    try:
        data = _orjson.dumps(value, option=option)
    except TypeError:
        return None
    return data if plain or _RISKY.search(data) is None else None


def canonical_json_bytes(run: dict[str, Any], plain: bool = False) -> bytes:
    """`canonical_json(run)` encoded as UTF-8, made by orjson when that gives the same bytes
    (`plain`: the run holds no float below 1e-4 or from 1e16 up, see `normalize_run_checked`)."""
    data = _orjson_bytes(run, _SORT_KEYS, plain)
    return data if data is not None else canonical_json(run).encode("utf-8")


def compact_json(value: Any, plain: bool = False) -> str:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"))` (key order kept), the text of
    a JSON column (app.core.db.json_dumps), made by orjson when that gives the same text
    (`plain`: as in `canonical_json_bytes`)."""
    if not value and (type(value) is dict or type(value) is list):
        return "{}" if type(value) is dict else "[]"
    data = _orjson_bytes(value, 0, plain)
    return data.decode("utf-8") if data is not None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
