"""Shared pieces of the JSON API routers written here (annotations, taxonomies, assignments).

- `JsonErrorRoute`: a route class whose request-validation errors answer 422 with
  `{"detail": "labels[1].confidence: Input should be less than or equal to 1"}` (one string
  naming the field) instead of FastAPI's list of error objects.
- `api_csrf`: a router dependency that makes cookie-authenticated unsafe requests carry a valid
  `X-CSRF-Token` header; requests with an `Authorization: Bearer` header (API tokens) are not affected.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from app.web.csrf import SAFE_METHODS, check_csrf


def format_location(loc: Sequence[Any]) -> str:
    """Returns `labels[1].confidence` for the pydantic location ("body", "labels", 1, "confidence")."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "body"


def _one_error(e: dict[str, Any]) -> str:
    loc = tuple(e.get("loc", ()))
    if e.get("type") == "json_invalid":  # loc is ("body", <character offset>)
        where = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
        reason = (e.get("ctx") or {}).get("error")
        return f"body: invalid JSON{where}" + (f" ({reason})" if reason else "")
    return f"{format_location(loc)}: {e.get('msg', 'invalid')}"


def validation_detail(errors: Sequence[dict[str, Any]]) -> str:
    """Returns one line naming each failing field: `field: message; field: message` (a body that
    is not JSON: `body: invalid JSON at character N (reason)`)."""
    return "; ".join(_one_error(e) for e in errors) or "invalid request"


class JsonErrorRoute(APIRoute):
    """APIRoute answering request-validation errors with a single-string `detail`."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def route_handler(request: Request):
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return JSONResponse({"detail": validation_detail(exc.errors())}, status_code=422)

        return route_handler


def api_csrf(request: Request) -> None:
    """Refuse (403) a cookie-authenticated POST/PUT/PATCH/DELETE without a valid X-CSRF-Token.

    Requests that send `Authorization: Bearer ...` (API tokens) or carry no logged-in session are
    left to the authentication dependency (401)."""
    auth = request.headers.get("authorization") or ""
    if request.method in SAFE_METHODS or auth[:7].lower() == "bearer ":
        return
    if "session" not in request.scope or request.session.get("uid") is None:
        return
    try:
        check_csrf(request, request.headers.get("x-csrf-token"))
    except HTTPException as exc:
        raise HTTPException(403, "CSRF token missing or invalid: cookie-authenticated requests must send the "
                                 "X-CSRF-Token header (the page's <meta name=\"csrf-token\">)") from exc
