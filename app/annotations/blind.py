"""Blind mode: annotators see only their own labels until an admin reveals them."""
from __future__ import annotations

from sqlmodel import Session

from app.annotations.models import AppSetting
from app.auth.models import User

REVEAL_KEY = "labels_revealed"


def labels_revealed(session: Session) -> bool:
    row = session.get(AppSetting, REVEAL_KEY)
    return bool(row and row.value)


def set_revealed(session: Session, revealed: bool) -> None:
    row = session.get(AppSetting, REVEAL_KEY) or AppSetting(key=REVEAL_KEY)
    row.value = bool(revealed)
    session.add(row)


def labels_visible_to(session: Session, user: User) -> bool:
    """True when `user` may see other annotators' labels (reviewers, admins, or after reveal)."""
    return user.role in ("admin", "reviewer") or labels_revealed(session)
