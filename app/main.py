"""The FastAPI application: `create_app()` wires routers, sessions, static files and the schema check."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.engine import Engine
from starlette.middleware.sessions import SessionMiddleware

from app.core.config import Settings, get_settings
from app.core.db import get_engine
from app.core.migrate import check_schema
from app.web.deps import LoginRequired

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"

DESCRIPTION = """
Label recorded agent-to-agent (A2A) runs against a failure taxonomy, measure inter-annotator
agreement, and report each agent's outcome for its own principal.

Authenticate with `Authorization: Bearer <token>` (create one with `a2annotate tokens create NAME`).
Errors are JSON `{"detail": ...}`.
"""


def create_app(engine: Engine | None = None, settings: Settings | None = None, check: bool = True) -> FastAPI:
    """Build the app on `engine` (default: DATABASE_URL). Refuses to start on an out-of-date schema."""
    settings = settings or get_settings()
    engine = engine or get_engine()
    if check:
        check_schema(engine)
    app = FastAPI(title="a2annotate", version="0.1.0", description=DESCRIPTION,
                  docs_url=None, redoc_url=None)  # served offline by app.web.docs
    app.state.engine = engine
    app.state.settings = settings
    app.add_middleware(SessionMiddleware, secret_key=settings.secret_key, session_cookie="a2a_session",
                       max_age=settings.session_max_age, same_site="lax", https_only=settings.cookie_secure)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    from starlette.middleware.gzip import GZipMiddleware

    from app.core.scratch import clean_upload_dirs
    from app.web.security import BodyLimit, SecurityHeaders

    app.add_middleware(GZipMiddleware, minimum_size=1024)  # long run pages: 3 MB of HTML, a tenth gzipped
    app.add_middleware(BodyLimit)  # every request body bounded while it is received
    app.add_middleware(SecurityHeaders)  # CSP, nosniff, no framing, no-store, X-Request-ID
    if settings.forwarded_allow_ips.strip():
        # outermost: X-Forwarded-For only from the proxies in FORWARDED_ALLOW_IPS (uvicorn's own
        # middleware and meaning); `a2annotate serve` turns uvicorn's default trust of 127.0.0.1 off
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.forwarded_allow_ips.strip())
    clean_upload_dirs()  # upload folders left by a process that died mid-upload

    @app.exception_handler(LoginRequired)
    async def _login_required(request: Request, exc: LoginRequired):
        return RedirectResponse(f"/login?next={exc.next_url}", status_code=303)

    @app.get("/healthz", tags=["meta"], summary="Liveness (no auth)")
    def healthz() -> dict:
        return {"status": "ok"}

    from app.web.errors import install_error_pages
    from app.web.routes import include_routers

    include_routers(app)
    from app.web.docs import install_docs

    install_docs(app)  # /docs and /redoc from installed assets, no CDN
    install_error_pages(app)  # HTML error pages for browsers; the API keeps JSON {"detail": ...}
    from app.api.openapi import install_error_schemas

    install_error_schemas(app)  # OpenAPI error bodies as sent: {"detail": "..."}; 401 documented
    return app


