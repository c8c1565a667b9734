"""End to end in a real browser: attribution labelling of an imported Who&When run.

An annotator labels the run under the `who-and-when` taxonomy (an attribution schema: agent, step,
reason) by keyboard alone at 1280x720: `n` new attribution, a digit picks the agent by number,
j/k focus the step and `x` sets it, `e` the reason, `s` submits. She sees none of the dataset's
answer (blind). A reviewer then sees the dataset's attribution (the source `whowhen:annotators`)
beside the annotator's, both marked on their steps in the trace.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.e2e.live import PASSWORD, LiveServer, launch_browser, log_in, make_database, wait_labels_loaded

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "datasets" / "data" / "whowhen"
RUN = "whowhen/Hand-Crafted/q-albums-01"
REASON = "Counted an album from 2011 outside the range"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from app.annotations.models import Assignment
    from app.auth.service import create_user, set_password
    from app.ingest.loader import import_paths
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    engine = make_database(tmp_path_factory.mktemp("e2e-att") / "att.db")
    summary = import_paths(engine, [str(DATA)])
    assert summary.imported == 2 and not summary.errors
    with Session(engine) as s:
        tax = latest(s, "who-and-when")
        for name, role in (("ana", "annotator"), ("rex", "reviewer")):
            user = create_user(s, name, role)
            set_password(s, user, PASSWORD)
            if role == "annotator":
                s.add(Assignment(run_pk=get_run(s, RUN).id, user_id=user.id, taxonomy_pk=tax.id, position=0,
                                 batch="att"))
        s.commit()
    with LiveServer(engine) as url:
        yield url, engine
    engine.dispose()


def test_keyboard_only_attribution_then_reviewer_sees_both(live):
    from playwright.sync_api import expect, sync_playwright

    from app.annotations.models import Annotation, Label
    from app.auth.service import get_user
    from app.runs.service import get_run

    url, engine = live
    with sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.set_default_timeout(10_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(page, url, "ana")
            page.goto(f"{url}/runs/{RUN}")
            wait_labels_loaded(page)
            expect(page.locator("#att-help")).to_be_visible()
            agents = page.evaluate("() => JSON.parse(document.getElementById('run-config').textContent).agents"
                                   ".map(a => a.id)")
            assert "WebSurfer" in agents and "Orchestrator" in agents
            # blind: nothing of the dataset's answer on her page
            html = page.content()
            assert "mistake_reason" not in html and "outside the range." not in html
            expect(page.locator("#att-beside")).to_have_count(0)
            expect(page.locator(".att-mark")).to_have_count(0)

            kb = page.keyboard
            kb.press("n")                                    # a new attribution (no mode list to pick from)
            expect(page.locator("#mode-picker")).to_be_hidden()
            expect(page.locator(".label-card")).to_have_count(1)
            number = agents.index("WebSurfer") + 1
            kb.press(str(number))                            # the agent, by its number
            expect(page.locator('.label-card.active select[data-f="agent"]')).to_have_value("WebSurfer")
            for _ in range(3):                               # j x3: focus event #3 (the page opens on #0)
                kb.press("j")
            step = page.evaluate("() => window.A2Trace.focusedSeq()")
            assert step == 3
            kb.press("x")                                    # the step: the focused event
            expect(page.locator(".label-card.active .chip a")).to_have_text(f"#{step}")
            kb.press("j")
            kb.press("x")                                    # one step only: x on another event moves it
            expect(page.locator(".label-card.active .chip a")).to_have_text(f"#{step + 1}")
            kb.press("k")
            kb.press("x")
            expect(page.locator(".label-card.active .chip a")).to_have_text(f"#{step}")
            kb.press("e")                                    # the reason
            kb.type(REASON)
            kb.press("Escape")
            kb.press("s")
            expect(page.locator("#save-state")).to_contain_text("submitted")
            assert errors == [], errors

            # the reviewer: the dataset's attribution beside the annotator's, both marked in the trace
            review = browser.new_page(viewport={"width": 1280, "height": 720})
            review.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(review, url, "rex")
            review.goto(f"{url}/runs/{RUN}?taxonomy=who-and-when")
            beside = review.locator("#att-beside")
            expect(beside).to_contain_text("whowhen:annotators")
            expect(beside).to_contain_text("Who&When")
            expect(beside).to_contain_text("Orchestrator at step #4")
            expect(beside).to_contain_text("ana")
            expect(beside).to_contain_text("WebSurfer at step #3")
            expect(review.locator('#e-4 .att-mark[data-who="whowhen:annotators"]')).to_have_count(1)
            expect(review.locator('#e-3 .att-mark[data-who="ana"]')).to_have_count(1)
            expect(review.locator("#e-4.att-step")).to_have_count(1)
            assert errors == [], errors
        finally:
            browser.close()

    with Session(engine) as s:
        ann = s.exec(select(Annotation).where(Annotation.user_id == get_user(s, "ana").id,
                                              Annotation.run_pk == get_run(s, RUN).id)).one()
        assert ann.status == "submitted"
        labels = s.exec(select(Label).where(Label.annotation_id == ann.id)).all()
        assert [(lb.mode, lb.agent, lb.evidence, lb.note) for lb in labels] == [(None, "WebSurfer", [3], REASON)]
