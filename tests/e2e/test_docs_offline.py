"""/docs (Swagger UI) and /redoc (ReDoc) render in chromium with every request to another host
refused: the assets come from the installed package, never a CDN."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.e2e.live import LiveServer, launch_browser, make_database

pytestmark = pytest.mark.e2e


def test_docs_and_redoc_render_offline(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    engine = make_database(tmp_path / "docs.db")
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.set_default_timeout(15_000)
            elsewhere: list[str] = []
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            def gate(route):
                host = urlsplit(route.request.url).hostname
                if host == "127.0.0.1":
                    route.continue_()
                else:
                    elsewhere.append(route.request.url)
                    route.abort()

            page.route("**/*", gate)
            page.goto(f"{url}/docs")
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("a2annotate")
            expect(page.locator(".swagger-ui .opblock-summary-path").first).to_be_visible()
            assert page.locator(".swagger-ui .opblock").count() > 20
            page.goto(f"{url}/redoc")
            # Redoc renders the whole OpenAPI document before its first heading: allow a busy machine time
            expect(page.locator("h1").first).to_contain_text("a2annotate", timeout=60_000)
            expect(page.get_by_text("List runs with filters and pagination").first).to_be_attached()
            assert elsewhere == [], f"requests to other hosts: {elsewhere}"
            assert errors == []
        finally:
            browser.close()
    engine.dispose()
