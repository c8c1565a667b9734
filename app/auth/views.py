"""Login / logout pages."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.auth.service import authenticate
from app.auth.sessions import end_session, start_session
from app.auth.throttle import LoginGuard
from app.web.csrf import verify_form_csrf
from app.web.templating import render

router = APIRouter(include_in_schema=False)


def _safe_next(next_url: str | None) -> str:
    if next_url and next_url.startswith("/") and not next_url.startswith("//"):
        return next_url
    return "/"


@router.get("/login")
def login_page(request: Request, next: str | None = None):
    return render(request, "login.html", next=_safe_next(next), error=None)


def login_guard(request: Request) -> LoginGuard:
    """The app's login throttles and hash limiter (made on first use, one per app)."""
    guard = getattr(request.app.state, "login_guard", None)
    if guard is None:
        guard = request.app.state.login_guard = LoginGuard(request.app.state.settings)
    return guard


@router.post("/login", dependencies=[Depends(verify_form_csrf)])
async def login(request: Request, session: SessionDep, username: Annotated[str, Form()],
                password: Annotated[str, Form()], next: Annotated[str, Form()] = "/"):
    """Throttled per account and per address (429 + Retry-After); the password is checked on a
    bounded number of threads (see app.auth.throttle)."""
    guard = login_guard(request)
    address = request.client.host if request.client else "unknown"
    wait = guard.retry_after(username, address)
    if wait:
        res = render(request, "login.html", status_code=429, next=_safe_next(next),
                     error=f"Too many failed logins for this account or from this address: try again in {wait} s.")
        res.headers["Retry-After"] = str(wait)
        return res
    if guard.hashing.busy():
        res = render(request, "login.html", status_code=503, next=_safe_next(next),
                     error="The server is busy checking other logins: try again in a few seconds.")
        res.headers["Retry-After"] = "2"
        return res
    user = await guard.hashing.run(authenticate, session, username, password)
    if user is None:
        guard.failed(username, address)
        return render(request, "login.html", status_code=401, next=_safe_next(next),
                      error="Unknown user or wrong password.")
    guard.succeeded(username)
    start_session(request, user)  # a fresh session on login (no fixation)
    return RedirectResponse(_safe_next(next), status_code=303)


@router.post("/logout", dependencies=[Depends(verify_form_csrf)])
def logout(request: Request, session: SessionDep):
    """Ends every session of the user (all browsers and devices), not only this one."""
    end_session(request, session)
    return RedirectResponse("/login", status_code=303)
