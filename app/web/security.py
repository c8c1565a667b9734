"""Response headers every answer carries, and the request id.

* A Content-Security-Policy without inline scripts or styles (the templates keep all JavaScript
  and CSS in static/), `frame-ancestors 'none'` and `X-Frame-Options: DENY` (no page can be
  framed, e.g. /admin for clickjacking), `X-Content-Type-Options: nosniff`,
  `Referrer-Policy: same-origin`.
* `Cache-Control: no-store` on everything that is not a static asset: label pages, exports and
  API answers hold labels and run content that must not stay in shared or browser caches.
* `X-Request-ID`: a fresh id per request, logged with any unexpected error so that the 500 a
  user sees can be found in the log (app.web.errors).

The API documentation pages (/docs, /redoc) render FastAPI's own HTML, which starts Swagger UI
and ReDoc with an inline script; they alone get `script-src 'self' 'unsafe-inline'`.
"""
from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
            "form-action 'self'; frame-ancestors 'none'")
DOCS_PATHS = ("/docs", "/redoc")
STATIC_PREFIX = "/static/"


def header_pairs(path: str, rid: str | None) -> list[tuple[str, str]]:
    """The headers for a response to `path` (name, value)."""
    out = [("content-security-policy", DOCS_CSP if path.startswith(DOCS_PATHS) else CSP),
           ("x-content-type-options", "nosniff"), ("x-frame-options", "DENY"),
           ("referrer-policy", "same-origin"), ("cross-origin-opener-policy", "same-origin")]
    if rid:
        out.append(("x-request-id", rid))
    if not path.startswith(STATIC_PREFIX):
        out.append(("cache-control", "no-store"))
    return out


def request_id(scope: Scope) -> str | None:
    """The id `SecurityHeaders` gave the request (None outside it)."""
    return (scope.get("state") or {}).get("request_id")


class SecurityHeaders:
    """Pure ASGI middleware (streams pass through untouched) adding the headers above to every
    response that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = rid
        extra = [(k.encode(), v.encode()) for k, v in header_pairs(scope.get("path", ""), rid)]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in extra if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


#: routes whose bodies are uploads (MAX_UPLOAD_BYTES); every other body is limited to MAX_REQUEST_BYTES
UPLOAD_PATHS = ("/api/v1/imports", "/api/v1/annotations/import", "/import")
#: upload routes of web pages: a declared Content-Length over the limit is refused by the route
#: itself (the same 413, before the body is read) so that the page can show the reason in the form
PAGE_UPLOAD_PATHS = ("/import",)
UPLOAD_PREFIXES = ("/v1/",)  # OTLP (POST /v1/traces)


class BodyLimit:
    """Pure ASGI middleware bounding every request body while it is received: MAX_UPLOAD_BYTES
    on the upload routes (REST and the web upload page), OTLP_MAX_BODY_BYTES on OTLP (/v1/traces), MAX_REQUEST_BYTES (forms,
    JSON bodies) elsewhere. A declared
    Content-Length over the limit answers 413 at once; a chunked body is cut off the moment it
    passes the limit (413 from the route reading it). Nothing reads an unbounded body into
    memory, e.g. a 500 MB form posted to /login."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from app.core.config import get_settings

        s = get_settings()
        path = scope.get("path", "")
        if path.startswith(UPLOAD_PREFIXES):
            limit, name = s.otlp_max_body_bytes, "OTLP_MAX_BODY_BYTES"
        elif path in UPLOAD_PATHS:
            limit, name = s.max_upload_bytes, "MAX_UPLOAD_BYTES"
        else:
            limit, name = s.max_request_bytes, "MAX_REQUEST_BYTES"
        for k, v in scope.get("headers", []) if path not in PAGE_UPLOAD_PATHS else ():
            if k == b"content-length" and v.isdigit() and int(v) > limit:
                await _too_large(send, limit, name)
                return
        total = 0

        async def limited() -> Message:
            nonlocal total
            message = await receive()
            if message["type"] == "http.request":
                total += len(message.get("body", b""))
                if total > limit:
                    from fastapi import HTTPException

                    raise HTTPException(413, f"request body larger than {limit} bytes ({name})")
            return message

        await self.app(scope, limited, send)


async def _too_large(send: Send, limit: int, name: str) -> None:
    import json

    body = json.dumps({"detail": f"request body larger than {limit} bytes ({name})"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
