"""The Who&When failure-attribution dataset (`Algorithm-Generated/N.json`, `Hand-Crafted/N.json`).

Pure: records in, canonical runs out (no database).

A record: ``history: [{content, role, name?}]``, ``question``, ``ground_truth``, ``is_correct``
(or ``is_corrected``), ``question_ID``, ``mistake_agent``, ``mistake_step`` (a string holding a
0-based index into ``history``), ``mistake_reason``, optional ``level``, ``mistake_type``,
``system_prompt`` (agent -> prompt). One run per record, id ``whowhen/<subset>/<question_ID>``
(``subset`` is the folder, ``Algorithm-Generated`` or ``Hand-Crafted``, else ``who-and-when``;
the file name stands in for a missing question_ID).

Events get ``seq`` = the history index, so the mistake step is an event seq. The actor is the
entry's ``name``, else its ``role``; hand-crafted roles carry hand-offs and are parsed into actor
and recipient: ``Orchestrator (-> WebSurfer)`` is a message from Orchestrator to WebSurfer,
``Orchestrator (thought)`` a private log event of Orchestrator (the note in ``data.note``). A
``user``/``human`` entry without a name is said by the principal ``user``. The
Algorithm-Generated half was recorded in AG2 (AutoGen) group chats: a turn posted to the chat
is ``shared`` with every other member as recipients (``data.group_chat``); only what really is
private (a thought, a note) stays ``private``.

The label is an attribution without a mode (who, when, why): an audit of source
``who-and-when`` with ``mode: null``, ``agent`` = the mistake agent, ``evidence`` = [mistake
step], ``note`` = mistake reason, stored as an attribution label (agent, step, reason) of the
dataset source ``whowhen:annotators`` (kind "source") under the attribution taxonomy
``who-and-when``. The answers kept in ``metadata.whowhen`` (mistake agent/step/reason/type,
ground truth) are hidden from blind annotators (``app.annotations.blind.HIDDEN_KEYS``). A mistake step that is not a
history index, or a missing mistake agent, leaves the run without a label and is reported in
``metadata.import_warnings``. Everything else is kept in ``metadata``.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location
from app.ingest.items import ImportItem, error_item, item_from_raw
from app.ingest.readers import peek
from app.ingest.readers.base import Reader, Sniff
from app.ingest.readers.canonical import BOM
from app.ingest.readers.mad import parse_role
from app.ingest.safety import safejson

SOURCE = "who-and-when"
ANNOTATOR = "whowhen:annotators"
TAXONOMY = "who-and-when"
PRINCIPAL = "user"
SUBSETS = ("Algorithm-Generated", "Hand-Crafted")
KNOWN = ("history", "question", "ground_truth", "is_correct", "is_corrected", "question_ID", "mistake_agent",
         "mistake_step", "mistake_reason", "level", "mistake_type", "system_prompt")
_USER_ROLES = ("user", "human")


def looks_like_whowhen_keys(keys: set[str]) -> bool:
    """True when a record's top-level keys are Who&When's."""
    return "history" in keys and "run_id" not in keys and bool(
        keys & {"mistake_agent", "mistake_step", "question_ID", "ground_truth"})


def _subset(path: str | os.PathLike | None) -> str:
    if path is None:
        return "who-and-when"
    parent = Path(path).parent.name
    for s in SUBSETS:
        if parent.lower().replace("_", "-") == s.lower():
            return s
    return "who-and-when"


def _actor_of(entry: dict[str, Any]) -> tuple[str, list[str], str | None]:
    name = entry.get("name")
    role = entry.get("role")
    text = name if isinstance(name, str) and name.strip() else role
    if not isinstance(text, str) or not text.strip():
        return "system", [], None
    actor, to, note = parse_role(text)
    if actor.lower() in _USER_ROLES and not (isinstance(name, str) and name.strip()):
        actor = PRINCIPAL
    return actor[:200], [t[:200] for t in to], note


def _group_members(history: list, subset: str, prompts: dict) -> list[str]:
    """The members of the group chat a record was recorded in, in order of first appearance, or []
    when it was none. The Algorithm-Generated half is AG2 (AutoGen) group chats: every turn is
    posted to the chat, so every member (each named speaker, and the asker) reads it. The
    hand-crafted half (Magentic-One) names its recipients in the role (``A (-> B)``) and is read
    as written."""
    if subset == "Hand-Crafted":
        return []
    named = [e for e in history if isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"].strip()]
    if subset != "Algorithm-Generated" and not named:
        return []
    members: list[str] = []
    for e in history:
        if not isinstance(e, dict):
            continue
        actor, to, note = _actor_of(e)
        if actor != "system" and not to and actor not in members:
            members.append(actor)
    for name in prompts:
        if isinstance(name, str) and name not in members:
            members.append(name[:200])
    return members if len(members) > 1 else []


def record_to_run(obj: Any, subset: str, stem: str) -> tuple[dict | None, str | None, str | None]:
    """Returns (raw canonical run, None, None), or (None, field, message) when the record cannot be a run."""
    if not isinstance(obj, dict):
        return None, None, f"a Who&When record must be a JSON object, got {type(obj).__name__}"
    history = obj.get("history")
    if not isinstance(history, list) or not history:
        return None, "history", "required: a non-empty list of {content, role, name?} (a run needs events)"
    qid = obj.get("question_ID")
    rid = f"whowhen/{subset}/{qid if qid not in (None, '') else stem}"[:300]
    warnings: list[str] = []
    agents: dict[str, dict] = {}
    prompts = obj.get("system_prompt") if isinstance(obj.get("system_prompt"), dict) else {}

    def agent(name: str) -> None:
        if name not in agents and name not in (PRINCIPAL, "system"):
            agents[name] = {"id": name, "principal": PRINCIPAL, "role": name}
            if isinstance(prompts.get(name), str):
                agents[name]["metadata"] = {"system_prompt": prompts[name]}

    group = _group_members(history, subset, prompts)
    events = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            warnings.append(f"history[{i}]: expected an object, got {type(entry).__name__}; kept as a log event")
            events.append({"seq": i, "kind": "log", "actor": "system", "content": json.dumps(entry), "data": {}})
            continue
        actor, to, note = _actor_of(entry)
        agent(actor)
        for t in to:
            agent(t)
        content = entry.get("content")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        data = {k: v for k, v in entry.items() if k not in ("content",)}
        if note:
            data["note"] = note
        if not to and not note and group and actor in group:
            # a turn posted to the AG2 group chat reaches every member
            to = [m for m in group if m != actor]
            data["group_chat"] = True
        events.append({"seq": i, "kind": "log" if note else "message", "actor": actor, "recipients": to,
                       "visibility": "shared" if to else "private", "content": content, "data": data})
    audits = []
    mistake_agent = obj.get("mistake_agent")
    step_raw = obj.get("mistake_step")
    step = None
    if isinstance(step_raw, int) and not isinstance(step_raw, bool):
        step = step_raw
    elif isinstance(step_raw, str) and re.fullmatch(r"\s*\d+\s*", step_raw):
        step = int(step_raw)
    if step is None or not 0 <= step < len(history):
        warnings.append(f"mistake_step: {step_raw!r} is not an index into history (0..{len(history) - 1}); no label")
    elif not isinstance(mistake_agent, str) or not mistake_agent.strip():
        warnings.append(f"mistake_agent: {mistake_agent!r} is not an agent name; no label")
    else:
        who, _, _ = parse_role(mistake_agent)
        if who not in agents and who != PRINCIPAL:
            warnings.append(f"mistake_agent: {who!r} says nothing in history; added as an agent")
            agent(who)
        audits.append({"source": SOURCE, "mode": None, "agent": who[:200], "evidence": [step],
                       "note": obj.get("mistake_reason") if isinstance(obj.get("mistake_reason"), str) else None,
                       "metadata": {"taxonomy": TAXONOMY, "annotator_kind": "human", "annotator": ANNOTATOR,
                                    "mistake_type": obj.get("mistake_type")}})
    correct = obj.get("is_correct", obj.get("is_corrected"))
    question = obj.get("question") if isinstance(obj.get("question"), str) else None
    metadata: dict[str, Any] = {"whowhen": {k: obj.get(k) for k in KNOWN if k != "history" and k in obj},
                                "audited_by": []}
    metadata["whowhen"]["subset"] = subset
    for k, v in obj.items():
        if k not in KNOWN:
            metadata.setdefault("whowhen_extra", {})[k] = v
    if warnings:
        metadata["import_warnings"] = warnings
    scenario = {"id": f"whowhen/{subset}/{qid if qid not in (None, '') else stem}"[:300], "family": "who-and-when",
                "title": (question or "")[:200] or None, "description": question}
    return {"run_id": rid, "scenario": scenario, "status": "completed",
            "aggregate_score": (1.0 if correct else 0.0) if isinstance(correct, bool) else None,
            "principals": [{"id": PRINCIPAL, "name": "The asker", "kind": "person", "objective": question,
                            "outcome": {"success": correct if isinstance(correct, bool) else None}}],
            "agents": list(agents.values()), "events": events, "audits": audits, "metadata": metadata}, None, None


def iter_whowhen_file(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield the run of a Who&When file (one JSON object; a JSON array or JSON Lines of records too)."""
    name = display if display is not None else os.fspath(path)
    subset = _subset(display if display is not None else path)
    if subset == "who-and-when":
        subset = _subset(path)
    stem = Path(name).stem
    try:
        raw = Path(path).read_bytes()
        text = (raw[3:] if raw.startswith(BOM) else raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        yield error_item(Location(name), f"not UTF-8 text: {exc.reason}")
        return
    try:
        obj = safejson.loads(text)
        records = [(obj, Location(name), stem)] if not isinstance(obj, list) else [
            (r, Location(name, pointer=f"[{i}]"), f"{stem}-{i}") for i, r in enumerate(obj)]
    except json.JSONDecodeError as exc:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) < 2:
            yield error_item(Location(name, exc.lineno), f"not valid JSON: {exc.msg} (column {exc.colno})")
            return
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append((safejson.loads(line), Location(name, n), f"{stem}-{n}"))
            except json.JSONDecodeError as e:
                records.append((None, Location(name, n), f"not valid JSON: {e.msg} (column {e.colno})"))
    for rec, loc, st in records:
        if rec is None:
            yield error_item(loc, st)
            continue
        run, fld, message = record_to_run(rec, subset, st)
        yield error_item(loc, message, field=fld) if run is None else item_from_raw(run, loc)


class WhoWhenReader(Reader):
    """The Who&When failure-attribution dataset."""

    name = "whowhen"
    description = "Who&When records (history + mistake_agent / mistake_step / question_ID)"

    def sniff(self, path: Path) -> Sniff:
        if not peek.is_json_like(path):
            return Sniff(0.0, "not JSON")
        keys = set(peek.record_keys(path))
        if looks_like_whowhen_keys(keys):
            return Sniff(0.96, "records with Who&When's keys (history, mistake_agent, ...)")
        return Sniff(0.0, "no Who&When keys (history + mistake_agent / mistake_step / question_ID)")

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        return iter_whowhen_file(path, shown)
