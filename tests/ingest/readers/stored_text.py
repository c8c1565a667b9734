"""Zero silent loss, checked through the loader: every text-bearing value of a fixture is in what
the database holds (an event's content, a principal's or agent's fields, the scenario) or is named
by an import warning."""
from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from app.ingest import ReadSummary, iter_path
from app.ingest.loader import load_items
from app.ingest.readers.builder import text_leaves
from app.runs.models import Agent, Event, Principal, Run, Scenario


def prose(text: str) -> bool:
    """A value that carries text: a blank and a letter (ids, enums, model names and numbers have none)."""
    return bool(re.search(r"\s", text.strip())) and bool(re.search(r"[^\W\d_]", text))


def prose_leaves(obj: Any) -> list[tuple[str, str]]:
    out = []
    for path, text in text_leaves(obj):
        if text.strip()[:1] in ("{", "["):  # JSON inside a string: its own leaves
            try:
                inner = json.loads(text)
            except ValueError:
                inner = None
            if isinstance(inner, (dict, list)):
                out.extend((f"{path}.{p}" if p else path, t) for p, t in prose_leaves(inner))
                continue
        if prose(text):
            out.append((path, text))
    return out


def _literal(text: str) -> str | None:
    """A Python literal (``{'a': 1}``, as LangChain writes tool inputs) as the JSON a reader stores."""
    if text.strip()[:1] not in ("{", "["):
        return None
    try:
        return json.dumps(ast.literal_eval(text.strip()), ensure_ascii=False, sort_keys=True)
    except (ValueError, SyntaxError, TypeError):
        return None


def _squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _norm_path(p: str) -> str:
    return re.sub(r"[_\s]", "", p).lower()


def import_file(engine, path: Path, fmt: str | None = None) -> tuple[Any, ReadSummary]:
    """Import `path` through `iter_path` (the registry picks the reader) and the loader."""
    read = ReadSummary()
    summary = load_items(engine, iter_path(path, format=fmt, summary=read))
    return summary, read


def stored_texts(engine, run_ids: Iterable[str]) -> str:
    parts: list[str] = []
    with Session(engine) as s:
        for rid in run_ids:
            run = s.exec(select(Run).where(Run.run_id == rid)).one()
            parts += [e.content or "" for e in s.exec(select(Event).where(Event.run_pk == run.id))]
            for p in s.exec(select(Principal).where(Principal.run_pk == run.id)):
                parts += [p.principal_id, p.name or "", p.objective or "", *p.constraints]
            for a in s.exec(select(Agent).where(Agent.run_pk == run.id)):
                parts += [a.agent_id, a.role or "", json.dumps(a.extra, ensure_ascii=False)]
            sc = s.get(Scenario, run.scenario_id)
            if sc is not None:
                parts += [sc.title or "", sc.description or ""]
    return "\n".join(_squash(p) for p in parts)


def missing_texts(fixture: Any, engine, run_ids: Iterable[str], warnings: list[dict[str, Any]],
                  kept: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The prose leaves of `fixture` neither stored nor named by a warning (`kept`: path prefixes the
    reader documents as kept in data / metadata)."""
    stored = stored_texts(engine, run_ids)
    # a warning names its field (``field``, or its message's "path: ..." start; the loader keeps messages)
    fields = [_norm_path(w.get("field") or w.get("message", "").split(": ", 1)[0]) for w in warnings]
    messages = [w.get("message", "") for w in warnings]
    quoted = {q for w in warnings for q in re.findall(r"'([^']+)'", w.get("message", ""))}
    kept_n = [_norm_path(k) for k in kept]
    out = []
    for path, text in prose_leaves(fixture):
        t = _squash(text).removesuffix("...").strip()  # "...": a summary cut from a stored text
        if t in stored or _squash(json.dumps(text, ensure_ascii=False)[1:-1]) in stored:
            continue
        if _literal(text) is not None and _squash(_literal(text)) in stored:  # a Python repr of stored JSON
            continue
        if any(text.strip()[:40] in m for m in messages):  # the warning quotes it
            continue
        np = _norm_path(path)
        if any(np.startswith(f) or ("[]." in f and re.search(r"(^|[.\]])" + re.escape(f.split("[].", 1)[1])
                                                               + r"($|[.\[])", np)) for f in fields) or any(path == q or path.startswith((q + ".", q + "["))
                                                        for q in quoted):
            continue
        if any(np.startswith(k) or re.sub(r"\[\d+\]", "[]", np).startswith(k) for k in kept_n):
            continue
        out.append((path, text))
    return out
