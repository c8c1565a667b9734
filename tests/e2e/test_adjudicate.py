"""Adjudication beside the trace, by keyboard, in chromium: candidates light up their evidence in
the trace, accept / reject / finish without a full reload, and the annotator then sees the gold
beside their own labels on the locked run."""
from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.e2e.live import LiveServer, add_annotator, launch_browser, load_runs, log_in, make_database

pytestmark = pytest.mark.e2e


def test_adjudication_by_keyboard_beside_the_trace(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from app.annotations.service import save_annotation
    from app.auth.service import get_user
    from app.demo.generator import generate_runs
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    engine = make_database(tmp_path / "adj.db")
    run = next(iter(generate_runs(1, seed=11))).run
    load_runs(engine, [run])
    rid = run["run_id"]
    a0, a1 = run["agents"][0]["id"], run["agents"][1]["id"]
    add_annotator(engine, "ann1", [rid])
    add_annotator(engine, "ann2", [rid])
    add_annotator(engine, "rev", [], role="reviewer")
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        save_annotation(s, get_user(s, "ann1"), get_run(s, rid), tax,
                        [{"mode": "CF3", "agent": a0, "evidence": [2]}, {"mode": "GR1", "agent": a1, "evidence": [5]}],
                        status="submitted")
        save_annotation(s, get_user(s, "ann2"), get_run(s, rid), tax,
                        [{"mode": "CF3", "agent": a0, "evidence": [2, 3]}], status="submitted")
        s.commit()
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.set_default_timeout(10_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(page, url, "rev")
            page.goto(f"{url}/adjudicate/{rid}")
            expect(page.locator("#trace .ev").first).to_be_visible()  # the events beside the candidates
            page.evaluate("() => { window.__samePage = true; }")
            rows = page.locator("#candidates tbody tr[data-status]")
            texts = [rows.nth(i).inner_text() for i in range(rows.count())]
            gr1 = next(i for i, t in enumerate(texts) if t.startswith("GR1"))
            cf3 = next(i for i, t in enumerate(texts) if t.startswith("CF3"))
            kb = page.keyboard
            for _ in range(gr1 + 1):
                kb.press("j")
            expect(page.locator("#candidates tr.sel")).to_contain_text("GR1")
            expect(page.locator("#e-5.is-ev-active")).to_have_count(1)   # its evidence, marked in the trace
            kb.press("a")                                                # accept the minority label
            expect(page.locator("#gold-labels")).to_contain_text("GR1")
            expect(page.locator("#candidates tr.sel")).to_contain_text("in gold")
            for _ in range(abs(cf3 - gr1)):
                kb.press("j" if cf3 > gr1 else "k")
            expect(page.locator("#candidates tr.sel")).to_contain_text("CF3")
            expect(page.locator("#e-3.is-ev-active")).to_have_count(1)
            kb.press("r")                                                # reject: undo the pre-accepted label
            expect(page.locator('#gold-labels tr.undone')).to_contain_text("CF3")
            kb.press("F")
            kb.type("CF3 evidence is the offer, not a breach")
            kb.press("Control+Enter")
            expect(page.locator("#status")).to_contain_text("adjudicated")
            assert page.evaluate("() => window.__samePage === true"), "the page was reloaded"
            assert errors == []

            ann = browser.new_page(viewport={"width": 1280, "height": 720})
            log_in(ann, url, "ann2")
            ann.goto(f"{url}/runs/{rid}")
            expect(ann.locator("#gold-beside")).to_contain_text("GR1")
            expect(ann.locator("#gold-beside li")).to_have_count(1)  # the undone CF3 is not gold
            expect(ann.locator(".label-card")).to_contain_text("CF3")   # their own label, beside the gold
        finally:
            browser.close()
    engine.dispose()
