"""In a real browser (Debian's chromium via Playwright): no page of the app breaks the strict
CSP (no inline script or style was left behind), and none can be framed."""
from __future__ import annotations

import pytest

from tests.e2e.live import LiveServer, add_annotator, launch_browser, load_runs, log_in, make_database

pytestmark = pytest.mark.e2e

PAGES = ["/", "/runs", "/runs/{run}", "/taxonomies", "/agreement", "/reports", "/admin", "/admin/progress",
         "/admin/assignments", "/adjudicate/{run}", "/no-such-page"]


def test_no_csp_violation_on_any_page(tmp_path):
    from playwright.sync_api import sync_playwright

    from app.demo.generator import generate_runs

    engine = make_database(tmp_path / "csp.db")
    runs = [d.run for d in generate_runs(2, seed=3)]
    load_runs(engine, runs)
    add_annotator(engine, "csp-admin", [r["run_id"] for r in runs], role="admin")
    violations: list[str] = []
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page()
        page.on("console", lambda m: violations.append(f"{page.url}: {m.text}")
                if "Content Security Policy" in m.text or "Refused to" in m.text else None)
        log_in(page, url, "csp-admin")
        for path in PAGES:
            page.goto(url + path.format(run=runs[0]["run_id"]))
            page.wait_for_load_state("load")
        on_pages = list(violations)
        violations.clear()
        page.set_content(f'<iframe id="f" src="{url}/admin"></iframe>')
        page.wait_for_timeout(500)
        framed = page.frames[1].content() if len(page.frames) > 1 else ""
        browser.close()
    engine.dispose()
    assert on_pages == []
    assert any("frame-ancestors 'none'" in v for v in violations)  # /admin refused to render in a frame
    assert "csp-admin" not in framed
