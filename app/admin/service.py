"""User administration (beyond app.auth.service) and the choices shown on the admin forms."""
from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from app.auth.models import ROLES, User
from app.auth.service import AuthError
from app.runs.models import Agent, Run, Scenario


def list_users(session: Session) -> tuple[list[User], list[User]]:
    """Returns (human users, judge users), each sorted by name."""
    rows = session.exec(select(User).order_by(User.username)).all()
    return [u for u in rows if u.kind == "human"], [u for u in rows if u.kind != "human"]


def get_human(session: Session, user_id: int) -> User:
    """Returns the human user with this id; raises AuthError when there is none."""
    user = session.get(User, user_id)
    if user is None or user.kind != "human":
        raise AuthError(f"no user with id {user_id}")
    return user


def set_active(session: Session, actor: User, user: User, active: bool) -> None:
    """Deactivate (or reactivate) `user`; an admin cannot deactivate their own account."""
    if not active and user.id == actor.id:
        raise AuthError("you cannot deactivate your own account")
    if user.is_active and not active:
        user.session_generation = (user.session_generation or 0) + 1  # ends the user's sessions
    user.is_active = active
    session.add(user)


def set_role(session: Session, actor: User, user: User, role: str) -> None:
    """Change `user`'s role; an admin cannot take the admin role away from themselves."""
    if role not in ROLES:
        raise AuthError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if user.id == actor.id and role != "admin":
        raise AuthError("you cannot remove your own admin role")
    if user.role != role:
        user.session_generation = (user.session_generation or 0) + 1  # ends the user's sessions
    user.role = role
    session.add(user)


def filter_choices(session: Session) -> dict[str, list[Any]]:
    """Returns the distinct values offered by the run filters: families, alignments, scenarios,
    statuses, models, harnesses (sorted)."""
    def distinct(col, *where) -> list[Any]:
        q = select(col).distinct()
        for w in where:
            q = q.where(w)
        return sorted(v for v in session.exec(q).all() if v is not None)

    return {"family": distinct(Scenario.family), "alignment": distinct(Scenario.alignment),
            "scenario": distinct(Scenario.id), "status": distinct(Run.status),
            "model": distinct(Agent.model), "harness": distinct(Agent.harness)}
