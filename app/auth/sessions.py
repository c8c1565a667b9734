"""Login sessions: a signed cookie (Starlette's SessionMiddleware) checked against the server.

The cookie holds the user id, the user's *session generation* when the session began (`gen`),
the login time (`iat`) and the last time it was used (`seen`, rewritten at most once a minute).
A session is refused, and cleared, when:

* the user's `session_generation` moved on: logout, a password reset, a role change or a
  deactivation bump it (`end_all_sessions`), which ends every session of that user at once;
* it is older than SESSION_MAX_AGE seconds since login (absolute lifetime), or
* it was not used for SESSION_IDLE_TIMEOUT seconds (idle lifetime).
"""
from __future__ import annotations

import secrets
import time

from fastapi import Request
from sqlalchemy import update
from sqlmodel import Session

from app.auth.models import User
from app.core.config import Settings, get_settings

#: `seen` is rewritten (a new cookie sent) at most this often, in seconds
SEEN_RESOLUTION = 60


def _settings(request: Request) -> Settings:
    return getattr(request.app.state, "settings", None) or get_settings()


def start_session(request: Request, user: User) -> None:
    """A fresh session for `user` (no fixation: everything from before is dropped)."""
    now = int(time.time())
    request.session.clear()
    request.session.update({"uid": user.id, "gen": user.session_generation or 0, "iat": now, "seen": now,
                            "sid": secrets.token_urlsafe(16), "csrf": secrets.token_urlsafe(32)})


def session_problem(request: Request, user: User | None, now: float | None = None) -> str | None:
    """Why the request's session may not be used for `user` (None when it may)."""
    data = request.session
    now = time.time() if now is None else now
    s = _settings(request)
    if user is None or not user.is_active:
        return "unknown or deactivated user"
    if data.get("gen") != (user.session_generation or 0):
        return "ended (logout, password reset or role change)"
    iat, seen = data.get("iat"), data.get("seen")
    if not isinstance(iat, (int, float)) or now - iat >= s.session_max_age:
        return "expired (absolute lifetime)"
    if not isinstance(seen, (int, float)) or now - seen >= s.session_idle_timeout:
        return "expired (idle)"
    return None


def session_user(request: Request, session: Session) -> User | None:
    """The user of the request's login session, or None (a refused session is cleared)."""
    if "session" not in request.scope:
        return None
    uid = request.session.get("uid")
    if uid is None:
        return None
    user = session.get(User, uid)
    now = time.time()
    if session_problem(request, user, now) is not None:
        request.session.clear()
        return None
    if now - request.session["seen"] >= SEEN_RESOLUTION:
        request.session["seen"] = int(now)
    return user


def end_all_sessions(session: Session, user: User) -> None:
    """End every login session of `user` (their cookies stop working at the next request)."""
    t = User.__table__
    session.execute(update(t).where(t.c.id == user.id).values(session_generation=t.c.session_generation + 1))
    session.refresh(user)


def end_session(request: Request, session: Session) -> None:
    """Logout: end every session of the request's user, and clear this one."""
    uid = request.session.get("uid") if "session" in request.scope else None
    user = session.get(User, uid) if uid is not None else None
    if user is not None:
        end_all_sessions(session, user)
    request.session.clear()
