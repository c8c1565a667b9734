"""Readable error pages for people using the app in a browser.

A browser asking for a page (Accept: text/html, not under /api/) gets an HTML page with the reason
and a way back instead of `{"detail": ...}` or a traceback; API clients and the page scripts (which
ask for JSON) keep the JSON errors of the REST contract. A form posted after the session ended
(the CSRF check fails and nobody is logged in) goes to the login page, which says the session
expired and returns to the page afterwards.
"""
from __future__ import annotations

import logging
from types import SimpleNamespace
from urllib.parse import urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.web.csrf import CSRFError

log = logging.getLogger("a2annotate.web")

#: paths that always answer JSON (the REST API and its documentation)
JSON_PREFIXES = ("/api/", "/openapi.json", "/docs", "/redoc", "/healthz", "/static/")

FALLBACK_500 = ("<!doctype html><title>Something went wrong · a2annotate</title><h1>Something went wrong</h1>"
                "<p>The server could not complete this request; the error was logged.</p>"
                '<p><a href="/">Back to your queue</a></p>')

TITLES = {
    400: "Bad request",
    401: "Please log in",
    403: "You cannot open this page",
    404: "Not found",
    405: "This address does not take that request",
    409: "Conflict",
    413: "Too large",
    422: "Some of the input is not valid",
    500: "Something went wrong",
}


def wants_html(request: Request) -> bool:
    """True when the request is a browser asking for a page (not the API, not a script's fetch)."""
    path = request.url.path
    if path.startswith(JSON_PREFIXES):
        return False
    return "text/html" in request.headers.get("accept", "")


def back_url(request: Request) -> str | None:
    """The same-site page the request came from (path and query), or None."""
    ref = request.headers.get("referer")
    if not ref:
        return None
    parts = urlsplit(ref)
    if parts.netloc and parts.netloc != request.url.netloc:
        return None
    path = parts.path or "/"
    if not path.startswith("/") or path.startswith("//"):
        return None
    return path + ("?" + parts.query if parts.query else "")


def _current_user(request: Request) -> SimpleNamespace | None:
    """The logged-in user as plain data (username, role), read afresh: the request's own database
    session is closed by the time an error handler runs."""
    if "session" not in request.scope:
        return None
    uid = request.session.get("uid")
    if uid is None:
        return None
    from sqlmodel import Session

    from app.auth.models import User

    try:
        with Session(request.app.state.engine) as s:
            from app.auth.sessions import session_problem

            found = s.get(User, uid)
            if found is not None and found.kind == "human" and session_problem(request, found) is None:
                return SimpleNamespace(id=found.id, username=found.username, role=found.role)
    except Exception:  # the error page must not fail because the database did
        log.exception("could not load the user for an error page")
    return None


def error_page(request: Request, status: int, message: str, *, title: str | None = None,
               hint: str | None = None, headers: dict[str, str] | None = None):
    """Returns the HTML error page: title, the reason, a hint and links back."""
    from app.web.templating import render

    user = _current_user(request)
    back = back_url(request)
    if back == str(request.url.path):
        back = None
    response = render(request, "error.html", status_code=status, user=user, status=status,
                      title=title or TITLES.get(status, "Error"), message=message, hint=hint, back=back)
    for k, v in (headers or {}).items():
        if k.lower() != "www-authenticate":
            response.headers[k] = v
    return response


def _login_again(request: Request) -> RedirectResponse:
    back = back_url(request) or "/"
    if urlsplit(back).path == "/login":  # a stale login form: keep where it was going
        from urllib.parse import parse_qs

        back = (parse_qs(urlsplit(back).query).get("next") or ["/"])[0]
    if not back.startswith("/") or back.startswith("//"):
        back = "/"
    return RedirectResponse("/login?" + urlencode({"expired": 1, "next": back}), status_code=303)


def _hint(request: Request, status: int, detail: str) -> str | None:
    if status == 403 and "requires role" in detail:
        return "Ask an admin if you need this page."
    if status == 404 and "taxonomy" in detail:
        return "The Taxonomies page lists the registered versions."
    if status == 404 and request.url.path.startswith(("/runs/", "/adjudicate/")):
        return "The run may have been removed or its id mistyped. The Runs page lists every run."
    return None


def allowed_methods(request: Request) -> list[str]:
    """Every method the app takes at the request's path, as its OpenAPI document lists them
    (the routes take no HEAD). Starlette's 405 names the methods of the first route whose path
    matches only, so a path served by several routes (GET, POST and DELETE /api/v1/flags)
    answered an incomplete `Allow`. Empty for a path the document does not describe."""
    import re

    table = getattr(request.app.state, "allow_table", None)
    if table is None:
        table = []
        for template, ops in (request.app.openapi().get("paths") or {}).items():
            rx = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")
            methods = {m.upper() for m in ops if m.lower() in ("get", "put", "post", "delete", "patch", "options")}
            table.append((rx, methods))
        request.app.state.allow_table = table
    found: set[str] = set()
    for rx, methods in table:
        if rx.match(request.url.path):
            found |= methods
    return sorted(found)


async def http_error(request: Request, exc: StarletteHTTPException):
    if exc.status_code == 405 and isinstance(getattr(exc, "headers", None), dict) and "Allow" in exc.headers:
        methods = allowed_methods(request)
        if methods:
            exc = StarletteHTTPException(405, exc.detail, headers={**exc.headers, "Allow": ", ".join(methods)})
    if not wants_html(request):
        return await http_exception_handler(request, exc)
    if isinstance(exc, CSRFError):
        if "session" not in request.scope or request.session.get("uid") is None:
            return _login_again(request)
        return error_page(
            request, 403, "This form was out of date, so it was not sent.", title="Please reload the page",
            hint="This happens when you logged in again in another tab or the page was open for a long time. "
                 "Go back, reload the page and send the form again.")
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"There is no page at {request.url.path}."
    if exc.status_code == 405:
        detail = f"{request.method} {request.url.path} is not something a link can open."
    sentence = detail[:1].upper() + detail[1:]
    if sentence and sentence[-1] not in ".!?":
        sentence += "."
    return error_page(request, exc.status_code, sentence,
                      hint=_hint(request, exc.status_code, detail), headers=getattr(exc, "headers", None))


def _validation_lines(exc: RequestValidationError) -> list[str]:
    out = []
    for e in exc.errors():
        loc = [str(x) for x in e.get("loc", ()) if x not in ("query", "path", "body")]
        out.append((".".join(loc) + ": " if loc else "") + str(e.get("msg", "invalid")))
    return out


async def validation_error(request: Request, exc: RequestValidationError):
    if not wants_html(request):
        return await request_validation_exception_handler(request, exc)
    return error_page(request, 422, "; ".join(_validation_lines(exc)) or "invalid input",
                      hint="Check the address or the form and try again.")


async def server_error(request: Request, exc: Exception):
    """Anything unexpected: logged with the request id (also sent as X-Request-ID), answered 500
    (JSON for the API, a page for browsers); the process keeps serving."""
    from app.web.security import header_pairs, request_id

    rid = request_id(request.scope) or "-"
    # this answer is sent by Starlette's outermost middleware, around SecurityHeaders: add them here
    headers = dict(header_pairs(request.url.path, rid))
    log.error("unhandled error on %s %s (request id %s)", request.method, request.url.path, rid, exc_info=exc)
    if not wants_html(request):
        return JSONResponse({"detail": f"internal server error (request id {rid})", "request_id": rid},
                            status_code=500, headers=headers)
    try:
        return error_page(request, 500, f"The server could not complete this request; the error was logged "
                                        f"(request id {rid}).",
                          hint="Try again in a moment. If it keeps happening, tell your admin what you were doing "
                               "and the request id.", headers=headers)
    except Exception:  # never answer an error with another traceback
        log.exception("the error page itself failed")
        return HTMLResponse(FALLBACK_500, status_code=500, headers=headers)


def install_error_pages(app: FastAPI) -> None:
    """Register the HTML error pages on `app` (JSON stays the answer for API requests)."""
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, server_error)
