"""Zero silent loss: every text-bearing key of a fixture is stored in a canonical text field, or
is structure stored verbatim (an id, a role, a tool name: listed per reader), or was warned."""
from __future__ import annotations

import json
import re
from typing import Any

from sqlmodel import Session

from app.ingest.loader import load_items
from app.ingest.readers.builder import text_leaves
from app.runs.service import get_run, to_canonical


def _leaves(value: Any) -> list[tuple[str, str]]:
    """Text leaves of `value`; a string holding a JSON object or array counts by its own leaves."""
    out = []
    for path, text in text_leaves(value):
        s = text.strip()
        if s[:1] in "[{":
            try:
                inner = json.loads(s)
            except ValueError:
                inner = None
            if isinstance(inner, (dict, list)):
                out.extend((f"{path}<json>{p}", t) for p, t in _leaves(inner))
                continue
        out.append((path, text))
    return out


def canonical_texts(run: dict[str, Any]) -> list[str]:
    """The strings of a stored run that annotators see as text (never `data` or `metadata`)."""
    sc = run["scenario"]
    out = [run["run_id"], sc["id"], sc.get("title") or "", sc.get("description") or ""]
    for p in run["principals"]:
        out += [p["id"], p.get("name") or "", p.get("objective") or "", *p.get("constraints", [])]
    for a in run["agents"]:
        out += [a["id"], a.get("role") or "", a.get("model") or ""]
        out += [t for _, t in text_leaves(a.get("private_state") or {})]
    for e in run["events"]:
        out += [e["actor"], *e["recipients"], e.get("content") or ""]
    for a in run.get("audits", []):
        out += [a.get("note") or "", a.get("agent") or ""]
    for c in run.get("checks", []):
        out += [c.get("check_id") or "", c.get("detail") or ""]
    return [t for t in out if t]


def all_strings(run: dict[str, Any]) -> list[str]:
    return [t for _, t in _leaves(run)]


def store_and_reload(engine, items) -> tuple[list[dict], list[str], Any]:
    items = list(items)
    summary = load_items(engine, items)
    ids = [i.run["run_id"] for i in items if i.ok]
    with Session(engine) as s:
        runs = [to_canonical(s, get_run(s, rid)) for rid in ids]
    return runs, [w["message"] for w in summary.warnings], summary


def assert_no_silent_loss(doc: Any, runs: list[dict], warnings: list[str], *, structural: tuple[str, ...] = (),
                          kept: tuple[str, ...] = (), consumed: tuple[str, ...] = ()) -> None:
    """`structural`: path regexes whose strings are structure (ids, roles, names): stored
    somewhere in a run. `kept`: path regexes of values deliberately kept in named metadata.
    `consumed`: path regexes of format markers the reader reads and need not store (e.g. an
    item's ``object: trace.span``).
    Every other text leaf must be in a canonical text field of some run or named by a warning."""
    texts = "\x00".join(t for r in runs for t in canonical_texts(r))
    anywhere = "\x00".join(t for r in runs for t in all_strings(r))
    missing = []
    for path, text in _leaves(doc):
        s = text.strip()
        if any(re.search(p, path) for p in consumed):
            continue
        if any(re.search(p, path) for p in structural + kept):
            if s not in anywhere:
                missing.append(f"{path}: {s[:60]!r} not stored anywhere")
            continue
        if s in texts:
            continue
        key = re.split(r"[.\[]", path.split("<json>")[0])[-1] if path else ""
        parts = [p for p in re.split(r"<json>|\.|\[\d+\]", path) if p]
        if any(any(f".{p}:" in w or w.startswith(f"{p}:") or f"{p}: " in w for p in parts[-2:] or [key])
               for w in warnings):
            if s not in anywhere:
                missing.append(f"{path}: {s[:60]!r} warned but not kept")
            continue
        missing.append(f"{path}: {s[:60]!r} neither in a text field nor warned")
    assert not missing, "\n".join(missing)
