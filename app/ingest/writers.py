"""Writers: normalized canonical runs -> each input shape the readers accept.

Every writer takes any iterable of normalized runs, holds one run at a time, and returns the
number of runs written. Reading the output back with `app.ingest.iter_path` yields runs equal to
the input (the tree reader yields them in directory order).

* `write_json_array` / `write_jsonl` / `write_files` (one ``NNNNNNNN_<run_id>.json`` per run);
* `write_tree`: ``<family>/<scenario path>/<run_id>/`` holding ``run.json`` (run_id, status,
  times, metadata), ``scenario.json`` (+ ``scenario.md`` for the description),
  ``principals.json`` (without outcomes), ``agents.json``, ``metrics.json`` (aggregate_score and
  per-principal outcomes), ``conversation.jsonl`` (shared messages), ``trajectories/<agent>.jsonl``
  (an agent's private events), ``events.jsonl`` (all other events), ``hops.jsonl``, artifact
  contents under ``artifacts/`` (referenced by ``content_file``), ``audits.jsonl`` and
  ``checks.jsonl`` (when the run has checks);
* `write_wire`: per run, a ``run_context`` sidecar line, then each shared message as a JSON-RPC
  ``SendMessage`` (1.0) / ``message/send`` (0.3) request in an envelope; a message answered by the
  very next shared message (from its recipient back to its sender) becomes that request's
  response. The sidecar holds the rest of the run, with ``{"wire_message": id, ...}`` placeholders
  marking where each wire message goes and overriding whatever the wire cannot say (parent_seq,
  hop, ...).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from app.ingest.a2a import build_message, build_message_response, build_send_request
from app.ingest.canonical import EVENT_KEYS, Location
from app.ingest.readers.wire import ContextBuilder

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


def _dumps(obj: Any, indent: int | None = None) -> str:
    if indent is None:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=indent)


def safe_name(name: str) -> str:
    """A file-system-safe version of `name` (ASCII, no separators); a hash keeps altered names apart."""
    if _SAFE.fullmatch(name) and name.lower() not in ("con", "nul", "aux", "prn"):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:60] or "_"
    return f"{cleaned}-{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def _write_lines(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(_dumps(row) + "\n" for row in rows)


def write_json_array(runs: Iterable[dict], path: str | os.PathLike) -> int:
    """Write runs as one JSON array (one run per line inside it); returns the run count."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("[")
        for run in runs:
            f.write(",\n" if n else "\n")
            f.write(_dumps(run))
            n += 1
        f.write("\n]\n" if n else "]\n")
    return n


def write_jsonl(runs: Iterable[dict], path: str | os.PathLike) -> int:
    """Write runs as JSON Lines; returns the run count."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for run in runs:
            f.write(_dumps(run) + "\n")
            n += 1
    return n


def write_files(runs: Iterable[dict], directory: str | os.PathLike) -> int:
    """Write one pretty-printed JSON file per run, named ``NNNNNNNN_<run_id>.json`` (input order)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    n = 0
    for run in runs:
        _write_text(d / f"{n:08d}_{safe_name(run['run_id'])}.json", _dumps(run, indent=2) + "\n")
        n += 1
    return n


# --------------------------------------------------------------------------- tree

class _TreePlacer:
    """Chooses run directories so that none sits inside another."""

    def __init__(self) -> None:
        self.run_dirs: set[tuple[str, ...]] = set()
        self.ancestors: set[tuple[str, ...]] = set()

    def place(self, run: dict) -> tuple[str, ...]:
        sc = run["scenario"]
        parts = [safe_name(p) for p in sc["id"].split("/") if p]
        family = safe_name(sc["family"])
        if not parts or parts[0] != family:
            parts.insert(0, family)
        name = safe_name(run["run_id"])
        candidate = (*parts, name)
        if self.clashes(candidate):
            digest = hashlib.sha1(run["run_id"].encode("utf-8")).hexdigest()
            candidate = (*parts, f"{name}~{digest[:10]}")
            k = 0
            while self.clashes(candidate):
                k += 1
                candidate = (*parts, f"{name}~{digest[:10]}-{k}")
        self.run_dirs.add(candidate)
        self.ancestors.update(candidate[:i] for i in range(1, len(candidate)))
        return candidate

    def clashes(self, candidate: tuple[str, ...]) -> bool:
        if candidate in self.run_dirs or candidate in self.ancestors:
            return True
        return any(candidate[:i] in self.run_dirs for i in range(1, len(candidate)))


def _write_run_dir(run: dict, d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    _write_text(d / "run.json", _dumps({"run_id": run["run_id"], "status": run["status"],
                                        "started_at": run["started_at"], "ended_at": run["ended_at"],
                                        "metadata": run["metadata"]}, indent=2) + "\n")
    sc = dict(run["scenario"])
    description = sc.pop("description")
    _write_text(d / "scenario.json", _dumps(sc, indent=2) + "\n")
    if description is not None:
        _write_text(d / "scenario.md", description)
    principals = [{k: v for k, v in p.items() if k != "outcome"} for p in run["principals"]]
    _write_text(d / "principals.json", _dumps(principals, indent=2) + "\n")
    _write_text(d / "agents.json", _dumps(run["agents"], indent=2) + "\n")
    _write_text(d / "metrics.json", _dumps({"aggregate_score": run["aggregate_score"],
                                            "outcomes": {p["id"]: p["outcome"] for p in run["principals"]}},
                                           indent=2) + "\n")
    trajectory_names = {a["id"]: a["id"] for a in run["agents"] if _SAFE.fullmatch(a["id"])}
    lowered = [n.lower() for n in trajectory_names]
    trajectory_names = {k: v for k, v in trajectory_names.items() if lowered.count(k.lower()) == 1}
    conversation: list[dict] = []
    other: list[dict] = []
    trajectories: dict[str, list[dict]] = {}
    hops: list[dict] = []
    for e in run["events"]:
        line = dict(e)
        hop = line.pop("hop")
        if hop is not None:
            hops.append({"seq": e["seq"], "hop": hop})
        if e["kind"] == "artifact" and isinstance(e["content"], str):
            rel = f"artifacts/{e['seq']:06d}.txt"
            _write_text(d / rel, line.pop("content"))
            line["content_file"] = rel
        if e["kind"] == "message" and e["visibility"] == "shared":
            conversation.append(line)
        elif e["visibility"] == "private" and e["actor"] in trajectory_names:
            trajectories.setdefault(trajectory_names[e["actor"]], []).append(line)
        else:
            other.append(line)
    if conversation:
        _write_lines(d / "conversation.jsonl", conversation)
    for name, rows in trajectories.items():
        _write_lines(d / "trajectories" / f"{name}.jsonl", rows)
    if other or not run["events"]:  # an empty events.jsonl says "this run has no events"
        _write_lines(d / "events.jsonl", other)
    if hops:
        _write_lines(d / "hops.jsonl", hops)
    if run["audits"]:
        _write_lines(d / "audits.jsonl", run["audits"])
    if run.get("checks"):
        _write_lines(d / "checks.jsonl", run["checks"])


def write_tree(runs: Iterable[dict], directory: str | os.PathLike) -> int:
    """Write each run as a run directory ``<family>/<scenario path>/<run_id>/`` (see module doc)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    placer = _TreePlacer()
    n = 0
    for run in runs:
        _write_run_dir(run, root.joinpath(*placer.place(run)))
        n += 1
    return n


# --------------------------------------------------------------------------- wire

def _envelope(ts: str | None, direction: str, frm: str, recipients: list[str], body: dict) -> dict:
    to: Any = recipients[0] if len(recipients) == 1 else list(recipients)
    return {"ts": ts, "direction": direction, "from_agent": frm, "to_agent": to, "body": body}


def _message_id(run_id: str, seq: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"a2annotate:{run_id}#{seq}"))


def wire_records(run: dict, protocol: str = "1.0", ids: Iterator[int] | None = None) -> list[dict]:
    """The wire-log records for one run: the run_context sidecar first, then the envelopes."""
    if protocol not in ("1.0", "0.3"):
        raise ValueError(f"unknown A2A protocol {protocol!r}; expected '1.0' or '0.3'")
    ids = ids if ids is not None else itertools.count(1)
    ctx = run["run_id"]
    events = run["events"]
    wire = [i for i, e in enumerate(events) if e["kind"] == "message" and e["visibility"] == "shared"]
    mids = {i: _message_id(ctx, events[i]["seq"]) for i in wire}
    records: list[dict] = []
    k = 0
    while k < len(wire):
        e = events[wire[k]]
        rid = next(ids)
        msg = build_message(protocol, mids[wire[k]], ctx, "user", e["content"], e["data"], e["metadata"])
        records.append(_envelope(e["ts"], "request", e["actor"], e["recipients"],
                                 build_send_request(protocol, rid, msg)))
        if k + 1 < len(wire):
            f = events[wire[k + 1]]
            if e["recipients"] == [f["actor"]] and f["recipients"] == [e["actor"]]:
                reply = build_message(protocol, mids[wire[k + 1]], ctx, "agent", f["content"], f["data"],
                                      f["metadata"])
                records.append(_envelope(f["ts"], "response", f["actor"], f["recipients"],
                                         build_message_response(protocol, rid, reply)))
                k += 2
                continue
        k += 1
    # read the envelopes back as the reader will, and keep in the sidecar what they cannot say
    builder = ContextBuilder(ctx)
    for rec in records:
        builder.add(rec, Location("<write_wire>"))
    side_events: list[dict] = []
    for i, e in enumerate(events):
        if i in mids:
            natural = builder.events[builder.mids[mids[i]]]
            placeholder = {"wire_message": mids[i]}
            placeholder.update({key: e[key] for key in EVENT_KEYS
                                if key != "seq" and natural.get(key) != e[key]})
            side_events.append(placeholder)
        else:
            side_events.append({k: v for k, v in e.items() if k != "seq"})
    side_run = {k: v for k, v in run.items() if k != "events"}
    side_run["events"] = side_events
    return [{"type": "run_context", "context_id": ctx, "run": side_run}, *records]


def write_wire(runs: Iterable[dict], path: str | os.PathLike, protocol: str = "1.0") -> int:
    """Write runs as an A2A JSON-RPC wire log (JSON Lines of envelopes + run_context sidecars)."""
    if protocol not in ("1.0", "0.3"):
        raise ValueError(f"unknown A2A protocol {protocol!r}; expected '1.0' or '0.3'")
    ids = itertools.count(1)
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for run in runs:
            f.writelines(_dumps(rec) + "\n" for rec in wire_records(run, protocol, ids))
            n += 1
    return n
