"""Reading runs back: canonical shape, listing with filters. Plain functions taking a session."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from app.runs.models import Agent, Audit, Check, Event, Principal, Run, Scenario


def scenario_dict(sc: Scenario) -> dict[str, Any]:
    return {"id": sc.id, "family": sc.family, "alignment": sc.alignment, "title": sc.title,
            "description": sc.description, "metadata": dict(sc.extra or {})}


def get_run(session: Session, run_id: str) -> Run | None:
    return session.exec(select(Run).where(Run.run_id == run_id)).first()


def to_canonical(session: Session, run: Run) -> dict[str, Any]:
    """Rebuild the normalized canonical record of `run` (the inverse of the loader)."""
    if run.scenario_override is not None:
        scenario = dict(run.scenario_override)
    else:
        scenario = scenario_dict(session.get(Scenario, run.scenario_id))
    principals = session.exec(select(Principal).where(Principal.run_pk == run.id).order_by(Principal.position)).all()
    agents = session.exec(select(Agent).where(Agent.run_pk == run.id).order_by(Agent.position)).all()
    events = session.exec(select(Event).where(Event.run_pk == run.id).order_by(Event.seq)).all()
    audits = session.exec(select(Audit).where(Audit.run_pk == run.id).order_by(Audit.position)).all()
    checks = session.exec(select(Check).where(Check.run_pk == run.id).order_by(Check.position)).all()
    out = {
        "run_id": run.run_id,
        "scenario": scenario,
        "status": run.status,
        "aggregate_score": run.aggregate_score,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "principals": [
            {"id": p.principal_id, "name": p.name, "kind": p.kind, "objective": p.objective,
             "constraints": list(p.constraints or []),
             "outcome": {"success": p.success, "score": p.score, "metrics": dict(p.metrics or {})},
             "metadata": dict(p.extra or {})}
            for p in principals
        ],
        "agents": [
            {"id": a.agent_id, "principal": a.principal_id, "role": a.role, "model": a.model,
             "harness": a.harness, "private_state": dict(a.private_state or {}), "metadata": dict(a.extra or {})}
            for a in agents
        ],
        "events": [
            {"seq": e.seq, "ts": e.ts, "kind": e.kind, "actor": e.actor, "recipients": list(e.recipients or []),
             "visibility": e.visibility, "content": e.content, "data": e.data, "parent_seq": e.parent_seq,
             "hop": e.hop, "metadata": dict(e.extra or {})}
            for e in events
        ],
        "audits": [
            {"source": a.source, "level": a.level, "mode": a.mode, "agent": a.agent,
             "evidence": list(a.evidence or []), "note": a.note, "metadata": dict(a.extra or {})}
            for a in audits
        ],
        "metadata": dict(run.extra or {}),
    }
    if checks:
        out["checks"] = [
            {"source": c.source, "level": c.level, "check_id": c.check_id, "passed": c.passed, "agent": c.agent,
             "evidence": list(c.evidence or []), "detail": c.detail, "metadata": dict(c.extra or {})}
            for c in checks
        ]
    return out


@dataclass
class RunFilter:
    family: str | None = None
    scenario: str | None = None
    model: str | None = None
    harness: str | None = None
    status: str | None = None
    alignment: str | None = None
    annotated_by: str | None = None


def filtered_runs_query(f: RunFilter):
    """A select() of Run rows matching the filter (no ordering or paging applied)."""
    from app.annotations.models import Annotation
    from app.auth.models import User

    q = select(Run).join(Scenario, Scenario.id == Run.scenario_id)
    if f.family:
        q = q.where(Scenario.family == f.family)
    if f.alignment:
        q = q.where(Scenario.alignment == f.alignment)
    if f.scenario:
        q = q.where(Run.scenario_id == f.scenario)
    if f.status:
        q = q.where(Run.status == f.status)
    if f.model:
        q = q.where(Run.id.in_(select(Agent.run_pk).where(Agent.model == f.model)))
    if f.harness:
        q = q.where(Run.id.in_(select(Agent.run_pk).where(Agent.harness == f.harness)))
    if f.annotated_by:
        q = q.where(Run.id.in_(
            select(Annotation.run_pk).join(User, User.id == Annotation.user_id)
            .where(User.username == f.annotated_by, Annotation.status == "submitted")))
    return q


def list_runs(session: Session, f: RunFilter, page: int = 1, page_size: int = 50) -> tuple[int, list[Run]]:
    q = filtered_runs_query(f)
    total = session.exec(select(func.count()).select_from(q.subquery())).one()
    rows = session.exec(q.order_by(Run.run_id).offset((page - 1) * page_size).limit(page_size)).all()
    return total, list(rows)


def run_summaries(session: Session, runs: list[Run]) -> list[dict[str, Any]]:
    """List-view summaries of `runs`: scenario title/family/alignment and agents, read in one query each."""
    pks = [r.id for r in runs]
    agents: dict[int, list[Agent]] = {pk: [] for pk in pks}
    if pks:
        for a in session.exec(select(Agent).where(Agent.run_pk.in_(pks)).order_by(Agent.run_pk, Agent.position)):
            agents[a.run_pk].append(a)
    ids = {r.scenario_id for r in runs if r.scenario_override is None}
    scenarios = {sc.id: scenario_dict(sc) for sc in session.exec(select(Scenario).where(Scenario.id.in_(ids)))} \
        if ids else {}
    out = []
    for run in runs:
        sc = dict(run.scenario_override) if run.scenario_override is not None else scenarios.get(run.scenario_id, {})
        out.append({
            "run_id": run.run_id, "scenario_id": run.scenario_id, "family": sc.get("family"),
            "alignment": sc.get("alignment"), "title": sc.get("title"),
            "status": run.status, "aggregate_score": run.aggregate_score, "n_events": run.n_events,
            "agents": [{"id": a.agent_id, "principal": a.principal_id, "model": a.model, "harness": a.harness}
                       for a in agents[run.id]],
            "started_at": run.started_at,
            "imported_at": run.imported_at.isoformat() if run.imported_at else None,
        })
    return out
