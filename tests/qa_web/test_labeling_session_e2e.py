"""In a real browser: a fresh run page logs no console errors; when the session ends while labeling,
the panel says so, and after logging in again in another tab Submit saves (the stale CSRF token is
refreshed); an adjudicated run is read-only."""
from __future__ import annotations

import pytest
from sqlmodel import Session, select

from tests.e2e.live import (
    PASSWORD,
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
    from app.agreement import adjudication
    from app.annotations.service import save_annotation
    from app.auth.models import User
    from app.demo.generator import generate_runs
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    engine = make_database(tmp_path_factory.mktemp("qa-e2e") / "qa.db")
    runs = [d.run for d in generate_runs(2, seed=11)]
    load_runs(engine, runs)
    ids = [r["run_id"] for r in runs]
    add_annotator(engine, "una", ids)
    add_annotator(engine, "rex", [], role="reviewer")
    with Session(engine) as s:  # una submitted the second run; rex adjudicated it
        una = s.exec(select(User).where(User.username == "una")).one()
        rex = s.exec(select(User).where(User.username == "rex")).one()
        tax, run = latest(s, "a2-failures"), get_run(s, ids[1])
        agent = runs[1]["agents"][0]["id"]
        save_annotation(s, una, run, tax, [{"mode": "CF1", "agent": agent, "evidence": [1]}], status="submitted")
        adjudication.open_adjudication(s, run, tax, rex)
        adjudication.apply_action(s, run, tax, rex, "finish", {"rationale": "checked"})
        s.commit()
    with LiveServer(engine) as url:
        yield url, engine, ids
    engine.dispose()


def test_session_end_relogin_then_submit_and_locked_run(live):
    from playwright.sync_api import expect, sync_playwright

    from app.annotations.models import Annotation
    from app.auth.models import User
    from app.runs.service import get_run

    url, engine, (first, locked) = live
    with sync_playwright() as p:
        browser = launch_browser(p)
        try:
            ctx = browser.new_context(viewport={"width": 1440, "height": 900})
            page = ctx.new_page()
            page.set_default_timeout(10_000)
            console: list[str] = []
            page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: console.append(str(exc)))
            log_in(page, url, "una")
            page.goto(f"{url}/runs/{first}")
            wait_labels_loaded(page)
            expect(page.locator("#save-state")).to_have_text("not started")
            assert console == []  # no 404 for "no annotation yet", no missing favicon

            # the session ends, then una labels: nothing is lost, she is told to log in again
            ctx.clear_cookies()
            page.locator("#no-failure").check()
            expect(page.locator("#save-state")).to_have_text("not saved: logged out")
            expect(page.locator("#lp-errors")).to_contain_text("You are logged out")
            relogin = page.locator("#lp-errors a")
            expect(relogin).to_have_attribute("target", "_blank")

            other = ctx.new_page()
            other.goto(url + relogin.get_attribute("href"))
            other.fill('input[name="username"]', "una")
            other.fill('input[name="password"]', PASSWORD)
            other.press('input[name="password"]', "Enter")
            other.wait_for_url(f"{url}/runs/{first}")
            other.close()

            page.click("#btn-submit")  # the page's CSRF token is stale: refreshed, then saved
            expect(page.locator("#save-state")).to_contain_text("submitted")
            with Session(engine) as s:
                una = s.exec(select(User).where(User.username == "una")).one()
                ann = s.exec(select(Annotation).where(Annotation.run_pk == get_run(s, first).id,
                                                      Annotation.user_id == una.id)).one()
                assert ann.status == "submitted" and ann.no_failure

            # an adjudicated run says so up front and refuses changes
            page.goto(f"{url}/runs/{locked}")
            wait_labels_loaded(page)
            expect(page.locator("#lp-locked")).to_be_visible()
            expect(page.locator("#save-state")).to_contain_text("read-only")
            expect(page.locator("#btn-submit")).to_be_disabled()
            page.keyboard.press("n")
            expect(page.locator("#mode-picker")).to_be_hidden()
            expect(page.locator("#lp-errors")).to_contain_text("adjudicated")
            assert page.locator(".label-card select:not([disabled])").count() == 0
        finally:
            browser.close()
