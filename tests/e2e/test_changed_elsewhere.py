"""End to end in a real browser: two tabs of one annotator on one run. Tab B saves first; tab A's
autosave then gets 409 and the panel says "Changed elsewhere" with Reload / Overwrite; Overwrite
saves tab A's text over B's, Reload shows what is stored. Nothing is overwritten silently."""
from __future__ import annotations

import pytest
from sqlmodel import Session, select

from tests.e2e.live import (
    LiveServer,
    add_annotator,
    launch_browser,
    load_runs,
    log_in,
    make_database,
    wait_labels_loaded,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from app.demo.generator import generate_runs

    engine = make_database(tmp_path_factory.mktemp("e2e_conflict") / "e2e.db")
    runs = [d.run for d in generate_runs(1, seed=11)]
    load_runs(engine, runs)
    add_annotator(engine, "tab", [runs[0]["run_id"]])
    with LiveServer(engine) as url:
        yield url, engine, runs[0]["run_id"]
    engine.dispose()


def _stored(engine):
    from app.annotations.models import Annotation

    with Session(engine) as s:
        a = s.exec(select(Annotation).where(Annotation.origin == "human")).one()
        return a.note, a.version


def test_two_tabs_changed_elsewhere_overwrite_and_reload(live):
    from playwright.sync_api import expect, sync_playwright

    url, engine, run_id = live
    with sync_playwright() as p:
        browser = launch_browser(p)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            a = ctx.new_page()
            a.set_default_timeout(10_000)
            a.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(a, url, "tab")
            a.goto(f"{url}/runs/{run_id}")
            wait_labels_loaded(a)
            b = ctx.new_page()
            b.set_default_timeout(10_000)
            b.goto(f"{url}/runs/{run_id}")
            wait_labels_loaded(b)

            b.fill("#run-note", "written in tab B")
            expect(b.locator("#save-state")).to_contain_text("draft saved")
            assert _stored(engine) == ("written in tab B", 1)

            a.fill("#run-note", "written in tab A")
            expect(a.locator("#lp-errors")).to_contain_text("Changed elsewhere")
            expect(a.locator("#save-state")).to_contain_text("changed elsewhere")
            assert _stored(engine) == ("written in tab B", 1)  # nothing overwritten

            a.click(".btn-conflict-overwrite")
            expect(a.locator("#save-state")).to_contain_text("draft saved")
            assert _stored(engine) == ("written in tab A", 2)

            b.fill("#run-note", "tab B again")
            expect(b.locator("#lp-errors")).to_contain_text("Changed elsewhere")
            b.click(".btn-conflict-reload")
            wait_labels_loaded(b)
            expect(b.locator("#run-note")).to_have_value("written in tab A")
            assert _stored(engine) == ("written in tab A", 2)
            assert errors == []
        finally:
            browser.close()
