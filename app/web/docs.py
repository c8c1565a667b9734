"""/docs (Swagger UI) and /redoc (ReDoc) served from this machine: no CDN.

The Swagger UI and ReDoc bundles come from the `fastapi-offline` package installed from PyPI
(its `static/` folder, mounted at /docs-assets); the pages themselves carry no inline script or
style: Swagger UI is started by static/js/swagger-init.js, which reads the OpenAPI address from a
data attribute. Nothing is fetched from another host (no web fonts, no online spec validator).
"""
from __future__ import annotations

from functools import lru_cache
from html import escape
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
REDOC_JS_URL = "/redoc/redoc.standalone.js"
#: the one remote address inside the ReDoc bundle (the "API docs by Redocly" logo), and ours
REDOC_REMOTE_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
LOCAL_LOGO = b"/static/favicon.svg"


def assets_dir() -> Path:
    """The folder of the installed Swagger UI / ReDoc bundles (package `fastapi-offline`)."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


@lru_cache(maxsize=1)
def redoc_bundle() -> bytes:
    """The installed ReDoc bundle with its remote logo pointed at a local file, read once."""
    return (assets_dir() / "redoc.standalone.js").read_bytes().replace(REDOC_REMOTE_LOGO, LOCAL_LOGO)


def _page(title: str, head: str, body: str) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
            f"<link rel=\"icon\" type=\"image/png\" href=\"{ASSETS_URL}/favicon.png\">{head}</head>"
            f"<body>{body}</body></html>\n")


def swagger_html(openapi_url: str, title: str) -> str:
    return _page(
        f"{title} - Swagger UI",
        f"<link rel=\"stylesheet\" href=\"{ASSETS_URL}/swagger-ui.css\">",
        f"<div id=\"swagger-ui\" data-openapi-url=\"{escape(openapi_url)}\"></div>"
        f"<script src=\"{ASSETS_URL}/swagger-ui-bundle.js\"></script>"
        "<script src=\"/static/js/swagger-init.js\"></script>")


def redoc_html(openapi_url: str, title: str) -> str:
    return _page(
        f"{title} - ReDoc", "",
        f"<redoc spec-url=\"{escape(openapi_url)}\"></redoc>"
        f"<script src=\"{REDOC_JS_URL}\"></script>")


def install_docs(app: FastAPI) -> None:
    """Add /docs, /redoc and the /docs-assets mount to `app` (created with docs_url=redoc_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(assets_dir())), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return HTMLResponse(swagger_html(f"{root}{app.openapi_url}", app.title))

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return HTMLResponse(redoc_html(f"{root}{app.openapi_url}", app.title))

    @app.get(REDOC_JS_URL, include_in_schema=False)
    def redoc_js() -> Response:
        return Response(redoc_bundle(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})
