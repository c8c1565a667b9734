"""Dependencies for HTML pages: the logged-in user, role checks that redirect to the login page."""
from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request

from app.api.deps import SessionDep
from app.auth.models import User


class LoginRequired(Exception):
    def __init__(self, next_url: str):
        self.next_url = next_url


def page_user(request: Request, session: SessionDep) -> User:
    """The logged-in user (see app.auth.sessions: generation, absolute and idle lifetimes)."""
    from app.auth.sessions import session_user

    user = session_user(request, session)
    if user is None or user.kind != "human":
        request.session.pop("uid", None)
        raise LoginRequired(quote(str(request.url.path) + ("?" + request.url.query if request.url.query else "")))
    request.state.user = user
    return user


PageUser = Annotated[User, Depends(page_user)]


def page_role(*roles: str):
    def check(user: PageUser) -> User:
        if user.role not in roles:
            raise HTTPException(403, f"this page requires role {' or '.join(roles)}")
        return user

    return check


ReviewerPage = Annotated[User, Depends(page_role("admin", "reviewer"))]
AdminPage = Annotated[User, Depends(page_role("admin"))]
