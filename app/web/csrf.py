"""CSRF protection for cookie-authenticated requests (synchronizer token kept in the session)."""
from __future__ import annotations

import hmac
import secrets

from fastapi import HTTPException, Request

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class CSRFError(HTTPException):
    """403 for a missing or wrong CSRF token (an HTTPException, so the API still answers JSON)."""

    def __init__(self) -> None:
        super().__init__(403, "CSRF token missing or invalid: reload the page and try again")


def csrf_token(request: Request) -> str:
    """The session's CSRF token, created on first use ("" outside the session middleware, e.g. on
    the 500 page)."""
    if "session" not in request.scope:
        return ""
    token = request.session.get("csrf")
    if not token:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def check_csrf(request: Request, submitted: str | None) -> None:
    expected = request.session.get("csrf")
    if not expected or not submitted or not hmac.compare_digest(str(expected), str(submitted)):
        raise CSRFError()


async def verify_form_csrf(request: Request) -> None:
    """Dependency for form posts: the `csrf_token` field or the X-CSRF-Token header must match."""
    if request.method in SAFE_METHODS:
        return
    submitted = request.headers.get("x-csrf-token")
    if submitted is None:
        form = await request.form()
        submitted = form.get("csrf_token")
    check_csrf(request, submitted)
