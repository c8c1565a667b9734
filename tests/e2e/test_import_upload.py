"""The web upload page in a real browser: choose a JSON Lines file of runs on /import, submit,
land on the import job's page and see it done with the counts; the runs are stored."""
from __future__ import annotations

import json

import pytest

from tests.e2e.live import LiveServer, add_annotator, launch_browser, log_in, make_database

pytestmark = pytest.mark.e2e


def test_upload_through_the_page_reaches_the_done_job(tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright
    from sqlmodel import Session, select

    from app.core.config import get_settings
    from app.runs.models import Run
    from tests.web.helpers import page_run

    monkeypatch.setenv("UPLOAD_DIR", str(tmp_path / "uploads"))
    get_settings.cache_clear()
    engine = make_database(tmp_path / "upload.db")
    add_annotator(engine, "lead", [], role="admin")
    logs = tmp_path / "runs.jsonl"
    logs.write_text("".join(json.dumps(page_run(f"e2e-up-{i}")) + "\n" for i in range(3)))
    try:
        with LiveServer(engine) as url, sync_playwright() as p:
            browser = launch_browser(p)
            try:
                page = browser.new_page()
                page.set_default_timeout(10_000)
                log_in(page, url, "lead")
                page.click('nav.mainnav a[href="/import"]')
                page.wait_for_url(f"{url}/import")
                page.set_input_files("#import-file", str(logs))
                page.click("#btn-import")
                page.wait_for_url(f"{url}/jobs/*")
                expect(page.locator("#job-state")).to_have_text("done", timeout=15_000)
                expect(page.locator("#result-imported")).to_have_text("3")
                expect(page.locator("#result-rejected")).to_have_text("0")
            finally:
                browser.close()
        with Session(engine) as s:
            assert sorted(s.exec(select(Run.run_id)).all()) == ["e2e-up-0", "e2e-up-1", "e2e-up-2"]
    finally:
        engine.dispose()
        get_settings.cache_clear()
