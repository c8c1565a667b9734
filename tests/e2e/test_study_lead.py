"""The study lead in chromium: an assignment made after its live preview, then undone; an export
downloaded from the export page."""
from __future__ import annotations

import pytest
from sqlmodel import Session, select

from tests.e2e.live import LiveServer, add_annotator, launch_browser, load_runs, log_in, make_database

pytestmark = pytest.mark.e2e


def test_assignment_with_preview_undo_and_export_download(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from app.annotations.models import Assignment
    from app.demo.generator import generate_runs

    engine = make_database(tmp_path / "lead.db")
    runs = [d.run for d in generate_runs(6, seed=3)]
    load_runs(engine, runs)
    add_annotator(engine, "lead", [], role="admin")
    add_annotator(engine, "ann1", [])
    add_annotator(engine, "ann2", [])
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720}, accept_downloads=True)
            page.set_default_timeout(10_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(page, url, "lead")
            page.goto(f"{url}/admin/assignments")
            page.check('input[name="annotators"][value="ann1"]')
            expect(page.locator("#preview-summary")).to_contain_text("k=2 annotators per run, but only 1")
            page.check('input[name="annotators"][value="ann2"]')
            expect(page.locator("#preview-summary")).to_contain_text("6 run(s) match, 6 sampled; 12 new")
            page.fill('input[name="sample_size"]', "4")
            page.fill('input[name="k"]', "2")
            page.fill('input[name="batch"]', "week-1")
            expect(page.locator("#preview-summary")).to_contain_text("6 run(s) match, 4 sampled; 8 new")
            with Session(engine) as s:
                assert s.exec(select(Assignment)).all() == []  # the preview wrote nothing
            page.click("#assign-submit")
            expect(page.locator("#result")).to_contain_text("8 assignment(s) created")
            expect(page.locator("#batches tr.batch-row")).to_contain_text("week-1")
            page.locator("#batches tr.batch-row", has_text="week-1").get_by_role("button", name="Undo").click()
            expect(page.locator("#flash")).to_contain_text("8 assignment(s) removed")
            with Session(engine) as s:
                assert s.exec(select(Assignment)).all() == []

            page.goto(f"{url}/exports")
            with page.expect_download() as dl:
                page.locator("#export-runs a", has_text="csv").click()
            path = dl.value.path()
            text = open(path, encoding="utf-8").read()
            assert text.splitlines()[0].startswith("run_id") and len(text.splitlines()) == 7
            with page.expect_download() as dl2:  # a report table, with its options
                form = page.locator("form.export-form").first
                form.locator('select[name="source"]').select_option("majority")
                form.locator('select[name="fmt"]').select_option("jsonl")
                form.get_by_role("button", name="Download").click()
            assert dl2.value.suggested_filename.endswith(".jsonl")
            assert errors == []
        finally:
            browser.close()
    engine.dispose()
