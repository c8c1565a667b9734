"""The detector interface (pure: a canonical run dict in, candidate labels out; no database).

A detector is a `Detector`: a ``name`` (its annotations are stored by the user
``detector:<name>``), a ``version`` (stored with its annotations; bump it when its output
changes), a taxonomy ``key`` and a ``detect(run) -> list[Candidate]`` function over one
normalized canonical run (the shape of `app.ingest.canonical.normalize_run` and of
`app.runs.service.to_canonical`).

Modes are not hard-coded: a taxonomy file maps detector keys to its modes with a
``detectors: [key, ...]`` list on the mode (part of the file schema, `app.taxonomies.schema`; see
``taxonomy/a2-failures.yaml``). A candidate may name a ``mode`` itself (a user detector that knows its taxonomy); otherwise the mode comes from
that mapping.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Run = dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    """One candidate label: who is responsible, which events show it, and why (one line)."""

    agent: str
    evidence: tuple[int, ...]
    reason: str
    principals: tuple[str, ...] = ()
    #: a mode code; None means "the mode the taxonomy maps this detector's key to"
    mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "agent": self.agent, "evidence": list(self.evidence), "reason": self.reason,
                "principals": list(self.principals)}


@dataclass(frozen=True)
class Detector:
    name: str
    version: str
    key: str
    description: str
    detect: Callable[[Run], list[Candidate]] = field(compare=False)
    #: where it came from: "builtin", "entry point <name>", "settings <path>"
    origin: str = "builtin"

    @property
    def username(self) -> str:
        return f"detector:{self.name}"


def agents_by_id(run: Run) -> dict[str, dict[str, Any]]:
    return {a["id"]: a for a in run.get("agents") or []}


def is_shared(event: dict[str, Any]) -> bool:
    return event.get("visibility") == "shared"


def principal_of(run: Run, agent_id: str) -> str | None:
    a = agents_by_id(run).get(agent_id)
    return a.get("principal") if a else None


def merge(cands: list[Candidate]) -> list[Candidate]:
    """One candidate per (mode, agent): evidence united (sorted), reasons joined with "; "."""
    out: dict[tuple[str | None, str], Candidate] = {}
    for c in cands:
        key = (c.mode, c.agent)
        if key not in out:
            out[key] = c
            continue
        old = out[key]
        reason = old.reason if c.reason in old.reason else f"{old.reason}; {c.reason}"
        out[key] = Candidate(agent=c.agent, evidence=tuple(sorted(set(old.evidence) | set(c.evidence))),
                             reason=reason, principals=tuple(dict.fromkeys(old.principals + c.principals)),
                             mode=c.mode)
    return [Candidate(agent=c.agent, evidence=tuple(sorted(set(c.evidence))), reason=c.reason,
                      principals=c.principals, mode=c.mode) for c in out.values()]
