"""Blind mode: annotators see only their own labels until an admin reveals them.

The one rule for every place that shows labels: run pages, the REST API and exports all ask
`labels_visible_to` (other annotators' labels and machine audits), `visible_annotation_filter`
(which annotations to list) and `demo_truth_visible_to` (the demo's seeded truth)."""
from __future__ import annotations

from sqlmodel import Session

from app.annotations.models import AppSetting
from app.auth.models import User

REVEAL_KEY = "labels_revealed"


def labels_revealed(session: Session) -> bool:
    """True when an admin has revealed all labels to annotators (blind mode off)."""
    row = session.get(AppSetting, REVEAL_KEY)
    return bool(row and row.value)


def set_revealed(session: Session, revealed: bool) -> None:
    """Turn blind mode off (`revealed=True`) or back on; the caller commits."""
    row = session.get(AppSetting, REVEAL_KEY) or AppSetting(key=REVEAL_KEY)
    row.value = bool(revealed)
    session.add(row)


def labels_visible_to(session: Session, user: User) -> bool:
    """True when `user` may see other annotators' labels (reviewers, admins, or after reveal)."""
    return user.role in ("admin", "reviewer") or labels_revealed(session)


def demo_truth_visible_to(user: User) -> bool:
    """True when `user` may see the demo corpus's seeded truth (`metadata.demo_truth`): admins only."""
    return user.role == "admin"


def visible_annotation_filter(session: Session, user: User):
    """Returns a SQL condition on `Annotation` selecting the annotations `user` may see.

    Reviewers, admins, and everyone once labels are revealed: all annotations (humans and
    `judge:*`); otherwise (blind mode) only the user's own. Use it as
    `select(Annotation).where(visible_annotation_filter(session, user))`.
    """
    from sqlalchemy import true

    from app.annotations.models import Annotation

    if labels_visible_to(session, user):
        return true()
    return Annotation.user_id == user.id
