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
    if user.role == "reviewer":  # the admin menu shows a study lead their study tools
        from app.studies.access import leads_any

        request.state.leads_study = leads_any(session, user)
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


def page_study(request: Request, session, user: User, action: str, ref: str | None):
    """The study a page works in, after the one permission rule (app.studies.access): returns
    (study or None, None), or (None, a redirect) when a study lead opens a study page without
    naming a study (to their first study). 404 unknown study, 403 refused."""
    from fastapi.responses import RedirectResponse

    from app.studies.access import allowed, study_for
    from app.studies.service import visible_studies

    if not (ref or "").strip() and not allowed(session, user, action, None):
        for study in visible_studies(session, user):
            if allowed(session, user, action, study):
                sep = "&" if request.url.query else ""
                return None, RedirectResponse(f"{request.url.path}?{request.url.query}{sep}study={quote(study.name)}",
                                              status_code=303)
    return study_for(session, user, action, ref), None


def study_switcher(session, user: User, action: str, current) -> dict:
    """What the study switcher of a page shows: the studies `user` may do `action` in, the
    current one, and whether "all runs" (no study) is open to them."""
    from app.studies.access import allowed
    from app.studies.service import visible_studies

    return {"studies": [s.name for s in visible_studies(session, user) if allowed(session, user, action, s)],
            "current": current.name if current is not None else "",
            "all_allowed": allowed(session, user, action, None)}


def upload_page_user(request: Request) -> User:
    """`page_user` for a page that receives an upload: the user is looked up in a database session
    of its own, closed again before the route reads the body (as `UploadUser` does for REST), so a
    slow upload holds no pooled connection."""
    from app.core.db import session_scope

    with session_scope(request.app.state.engine) as session:
        user = page_user(request, session)
        session.expunge(user)
    return user


UploadPageUser = Annotated[User, Depends(upload_page_user)]
