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

        declares_body = self.body_field is not None  # upload routes stream their raw body instead

        async def route_handler(request: Request):
            refused = await _parse_json_body(request) if declares_body else None
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return JSONResponse({"detail": validation_detail(exc.errors())}, status_code=422)

        return route_handler


async def _parse_json_body(request: Request) -> JSONResponse | None:
    """Parse a JSON request body within the input limits (app.ingest.safety.safejson) before FastAPI
    does: nesting deeper than MAX_JSON_DEPTH, a too-long string or integer answer 422 naming the
    field, instead of FastAPI's 400 after a RecursionError (or a ValueError from int())."""
    if request.method in SAFE_METHODS:
        return None
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not (ctype == "application/json" or ctype.endswith("+json")):
        return None
    from app.ingest.safety import safejson

    body = await request.body()
    if not body:
        return None
    try:
        request._json = safejson.loads(body)  # Request.json() returns it; FastAPI reads it from there
    except safejson.JSONLimitError as exc:
        return JSONResponse({"detail": f"body: {exc.msg}"}, status_code=422)
    except UnicodeDecodeError as exc:
        return JSONResponse({"detail": f"body: not UTF-8 text ({exc.reason} at byte {exc.start})"}, status_code=422)
    except ValueError:
        return None  # not JSON: FastAPI answers 422 json_invalid with the position
    return None


async def api_csrf(request: Request) -> None:
    """Refuse (403) a cookie-authenticated POST/PUT/PATCH/DELETE without a valid X-CSRF-Token.

    Requests that send `Authorization: Bearer ...` (API tokens) or carry no logged-in session are
    left to the authentication dependency (401). Async (it does no I/O): it runs on the event
    loop instead of taking a trip through the threadpool on every API request."""
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
