"""Annotation services. Plain functions that take a session."""
from __future__ import annotations

from sqlalchemy import delete, select as sa_select
from sqlmodel import Session, select

from app.annotations.models import Annotation, Label
from app.auth.service import judge_user
from app.runs.models import Run, utcnow


def sync_audit_annotations(session: Session, run_row: Run, run: dict, tax_cache: dict | None = None) -> None:
    """Turn the run's audits into submitted annotations by `judge:<source>` users.

    One annotation per (source, taxonomy). A source listed in `metadata.audited_by` that flagged
    nothing in this run gets an explicit "no failure found" annotation (its silence is data).
    Audits whose mode is in no known taxonomy are kept in the audit table only.
    """
    from app.taxonomies.service import latest, taxonomy_for_mode, canonical_mode

    tax_cache = tax_cache if tax_cache is not None else {}
    old = session.exec(select(Annotation.id).where(Annotation.run_pk == run_row.id,
                                                   Annotation.origin == "audit")).all()
    if old:
        session.execute(delete(Label).where(Label.annotation_id.in_(old)))
        session.execute(delete(Annotation).where(Annotation.id.in_(old)))
    groups: dict[tuple[str, int], list[dict]] = {}
    taxes = {}
    for audit in run.get("audits") or []:
        tax = taxonomy_for_mode(session, audit["mode"], tax_cache)
        if tax is None:
            continue
        taxes[tax.id] = tax
        groups.setdefault((audit["source"], tax.id), []).append(audit)
    audited_by = (run.get("metadata") or {}).get("audited_by") or []
    default_tax = latest(session, "a2-failures")
    if default_tax is not None:
        taxes.setdefault(default_tax.id, default_tax)
        for source in audited_by if isinstance(audited_by, list) else []:
            if isinstance(source, str) and not any(k[0] == source for k in groups):
                groups[(source, default_tax.id)] = []
    now = utcnow()
    for (source, tax_id), audits in groups.items():
        user = judge_user(session, source)
        ann = Annotation(run_pk=run_row.id, user_id=user.id, taxonomy_pk=tax_id, status="submitted",
                         no_failure=not audits, origin="audit", submitted_at=now)
        session.add(ann)
        session.flush()
        tax = taxes[tax_id]
        for a in audits:
            session.add(Label(annotation_id=ann.id, mode=canonical_mode(tax, a["mode"]) or a["mode"],
                              agent=a.get("agent") or "", evidence=list(a.get("evidence") or []),
                              note=a.get("note")))
    session.flush()
