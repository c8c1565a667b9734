"""End to end in a real browser: log in, open the first run of the queue, label two modes with
evidence using the keyboard only, submit, and move on to the second run of the queue.

Runs Debian's chromium (/usr/bin/chromium) through the Python playwright package against the app
served by uvicorn on 127.0.0.1 and a free port, on a SQLite database made for the test.
"""
from __future__ import annotations

import re

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

    engine = make_database(tmp_path_factory.mktemp("e2e") / "e2e.db")
    runs = [d.run for d in generate_runs(3, seed=7)]
    load_runs(engine, runs)
    queue = [runs[1]["run_id"], runs[0]["run_id"]]
    add_annotator(engine, "eve", queue)
    with LiveServer(engine) as url:
        yield url, engine, queue, {r["run_id"]: r for r in runs}
    engine.dispose()


def test_keyboard_only_labeling_then_next_run(live):
    from playwright.sync_api import expect, sync_playwright

    url, engine, queue, runs = live
    first, second = queue
    agents = [a["id"] for a in runs[first]["agents"]]
    with sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(10_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(page, url, "eve")
            expect(page.locator("#start-next")).to_have_text("Start →")
            page.click("#start-next")
            page.wait_for_url(f"{url}/runs/{first}")
            wait_labels_loaded(page)
            kb = page.keyboard

            # label 1: n opens the mode list, type the code, Enter; a = first agent; j j x = evidence
            kb.press("n")
            expect(page.locator("#mode-picker")).to_be_visible()
            kb.type("CF3")
            kb.press("Enter")
            expect(page.locator("#mode-picker")).to_be_hidden()
            kb.press("a")
            kb.press("j")
            kb.press("j")
            seq1 = page.evaluate("() => window.A2Trace.focusedSeq()")
            assert seq1 is not None
            kb.press("x")
            expect(page.locator(f"#e-{seq1}.is-ev-active")).to_have_count(1)
            expect(page.locator(".label-card.active .chip a")).to_have_text(f"#{seq1}")

            # label 2 with the category shortcut: 2 opens the list on GR, type 1, Enter; a a = second agent
            kb.press("n")
            kb.press("Escape")                      # close the list opened by n ...
            kb.press("2")                           # ... and reopen it on category 2 (GR)
            expect(page.locator("#mode-filter")).to_have_value("GR")
            kb.type("1")
            kb.press("Enter")
            kb.press("a")
            kb.press("a")
            kb.press("j")
            kb.press("j")
            seq2 = page.evaluate("() => window.A2Trace.focusedSeq()")
            kb.press("Enter")
            expect(page.locator(f"#e-{seq2}.is-ev-active")).to_have_count(1)
            expect(page.locator(".label-card")).to_have_count(2)

            # shortcuts must not fire while typing: "j" and "n" typed into a note stay text
            page.locator(".label-card.active textarea").focus()
            kb.type("jn note")
            kb.press("Escape")
            expect(page.locator(".label-card")).to_have_count(2)
            assert page.evaluate("() => window.A2Trace.focusedSeq()") == seq2

            kb.press("s")
            expect(page.locator("#save-state")).to_contain_text("submitted")
            kb.press("]")
            page.wait_for_url(f"{url}/runs/{second}")
            wait_labels_loaded(page)
            expect(page.locator(".run-id")).to_have_text(second)

            # search within the run: / focuses the box, Enter steps to the first match
            word = runs[second]["principals"][0]["id"]
            kb.press("/")
            kb.type(word)
            kb.press("Enter")
            expect(page.locator("#search-count")).to_have_text(re.compile(r"^1/\d+$"))
            kb.press("Escape")
            kb.press("Escape")

            # a deep link scrolls to the event and focuses it
            page.goto(f"{url}/runs/{second}#e-5")
            expect(page.locator("#e-5.focused")).to_have_count(1)
            assert page.locator("#e-5").evaluate("el => { const r = el.getBoundingClientRect(); "
                                                 "return r.top >= 0 && r.bottom <= window.innerHeight; }")
            assert errors == []
        finally:
            browser.close()

    from app.annotations.models import Annotation, Label
    from app.auth.service import get_user
    from app.runs.service import get_run

    with Session(engine) as s:
        user = get_user(s, "eve")
        ann = s.exec(select(Annotation).where(Annotation.user_id == user.id,
                                              Annotation.run_pk == get_run(s, first).id)).one()
        labels = s.exec(select(Label).where(Label.annotation_id == ann.id).order_by(Label.id)).all()
        assert ann.status == "submitted" and ann.no_failure is False and ann.time_ms > 0
        assert [(lab.mode, lab.agent, lab.evidence) for lab in labels] == [
            ("CF3", agents[0], [seq1]), ("GR1", agents[1 % len(agents)], [seq2])]
        assert labels[1].note == "jn note"
        assert all(lab.time_ms >= 0 for lab in labels)
        assert s.exec(select(Annotation).where(Annotation.user_id == user.id,
                                               Annotation.run_pk == get_run(s, second).id)).first() is None
