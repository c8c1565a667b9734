"""Login / logout pages."""
from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.auth.service import authenticate
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


@router.post("/login", dependencies=[Depends(verify_form_csrf)])
def login(request: Request, session: SessionDep, username: Annotated[str, Form()],
          password: Annotated[str, Form()], next: Annotated[str, Form()] = "/"):
    user = authenticate(session, username, password)
    if user is None:
        return render(request, "login.html", status_code=401, next=_safe_next(next),
                      error="Unknown user or wrong password.")
    request.session.clear()  # a fresh session on login (no fixation)
    request.session.update({"uid": user.id, "sid": secrets.token_urlsafe(16), "csrf": secrets.token_urlsafe(32)})
    return RedirectResponse(_safe_next(next), status_code=303)


@router.post("/logout", dependencies=[Depends(verify_form_csrf)])
def logout(request: Request):
    request.session.clear()
    return RedirectResponse("/login", status_code=303)
