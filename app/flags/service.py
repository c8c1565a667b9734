"""Skip and flag, as plain functions taking a session (the caller commits).

An open (unresolved) skip or flag takes the run out of the annotator's queue order: `next_in_queue`
passes over it. Flags are listed for reviewers (`list_flags`); a reviewer resolving one puts the
run back in the annotator's queue. Submitting the run later keeps the row as history.
"""
from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from app.auth.models import User
from app.flags.models import RunFlag
from app.runs.models import Run, utcnow
from app.taxonomies.models import Taxonomy

KINDS = ("skip", "flag")
#: reason code -> what the annotator reads
REASONS = {
    "unclear": "unclear: I cannot tell what happened",
    "broken_log": "broken log: events missing, garbled or out of order",
    "needs_expert": "needs an expert in this domain",
    "other": "other (say why in the note)",
}
MAX_NOTE = 2000


class FlagError(ValueError):
    """Bad input; the message names the field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def set_flag(session: Session, user: User, run: Run, taxonomy: Taxonomy, kind: str, reason: str,
             note: str | None = None) -> RunFlag:
    """Skip or flag `run` for `user` under `taxonomy` (replacing an earlier skip/flag of theirs)."""
    if kind not in KINDS:
        raise FlagError("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if reason not in REASONS:
        raise FlagError("reason", f"must be one of {', '.join(REASONS)}, got {reason!r}")
    note = (note or "").strip() or None
    if note is not None and len(note) > MAX_NOTE:
        raise FlagError("note", f"at most {MAX_NOTE} characters")
    if reason == "other" and not note:
        raise FlagError("note", "say why in a note when the reason is 'other'")
    row = session.exec(select(RunFlag).where(RunFlag.run_pk == run.id, RunFlag.user_id == user.id,
                                             RunFlag.taxonomy_pk == taxonomy.id)).first()
    if row is None:
        row = RunFlag(run_pk=run.id, user_id=user.id, taxonomy_pk=taxonomy.id, kind=kind, reason=reason)
    row.kind, row.reason, row.note = kind, reason, note
    row.created_at, row.resolved_at, row.resolved_by = utcnow(), None, None
    session.add(row)
    session.flush()
    return row


def clear_flag(session: Session, user: User, run: Run, taxonomy: Taxonomy) -> bool:
    """Take back `user`'s skip/flag of `run` (the run returns to its place in the queue)."""
    row = session.exec(select(RunFlag).where(RunFlag.run_pk == run.id, RunFlag.user_id == user.id,
                                             RunFlag.taxonomy_pk == taxonomy.id)).first()
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def open_flags_of(session: Session, user: User) -> dict[tuple[int, int], RunFlag]:
    """`user`'s open skips and flags by (run_pk, taxonomy_pk)."""
    rows = session.exec(select(RunFlag).where(RunFlag.user_id == user.id, RunFlag.resolved_at.is_(None))).all()
    return {(r.run_pk, r.taxonomy_pk): r for r in rows}


def flag_of(session: Session, user: User, run: Run, taxonomy: Taxonomy) -> RunFlag | None:
    """`user`'s open skip/flag of `run` under `taxonomy`, if any."""
    return session.exec(select(RunFlag).where(RunFlag.run_pk == run.id, RunFlag.user_id == user.id,
                                              RunFlag.taxonomy_pk == taxonomy.id,
                                              RunFlag.resolved_at.is_(None))).first()


def to_dict(row: RunFlag, run_id: str, username: str, tax: Taxonomy | None = None) -> dict[str, Any]:
    return {"id": row.id, "run_id": run_id, "annotator": username, "kind": row.kind, "reason": row.reason,
            "reason_text": REASONS.get(row.reason, row.reason), "note": row.note,
            "taxonomy": f"{tax.key}@{tax.version}" if tax is not None else None,
            "created_at": row.created_at, "resolved": row.resolved_at is not None}


def list_flags(session: Session, kinds: tuple[str, ...] = KINDS, include_resolved: bool = False,
               run_pk: int | None = None) -> list[dict[str, Any]]:
    """Skips and flags for reviewers, flags first, newest first within a kind."""
    q = (select(RunFlag, Run.run_id, User.username, Taxonomy).join(Run, Run.id == RunFlag.run_pk)
         .join(User, User.id == RunFlag.user_id).join(Taxonomy, Taxonomy.id == RunFlag.taxonomy_pk)
         .where(RunFlag.kind.in_(list(kinds))))
    if not include_resolved:
        q = q.where(RunFlag.resolved_at.is_(None))
    if run_pk is not None:
        q = q.where(RunFlag.run_pk == run_pk)
    rows = session.exec(q.order_by(RunFlag.created_at.desc(), RunFlag.id.desc())).all()
    out = [to_dict(f, rid, name, tax) for f, rid, name, tax in rows]
    out.sort(key=lambda d: 0 if d["kind"] == "flag" else 1)
    return out


def resolve_flag(session: Session, flag_id: int, reviewer: User) -> RunFlag | None:
    """Mark a skip/flag handled: the run goes back into the annotator's queue."""
    row = session.get(RunFlag, flag_id)
    if row is None:
        return None
    row.resolved_at, row.resolved_by = utcnow(), reviewer.id
    session.add(row)
    session.flush()
    return row
