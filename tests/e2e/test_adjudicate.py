"""Adjudication beside the trace, by keyboard, in chromium: candidates light up their evidence in
the trace, accept / reject / finish without a full reload (a rejection is stored: a reload still
shows it), ] and [ go to another disputed run in place (address updated, Back works, a failed
fetch falls back to the page), and the annotator then sees the gold beside their own labels on
the locked run."""
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
                        [{"mode": "CF3", "agent": a0, "evidence": [2, 3]}, {"mode": "VF1", "agent": a1, "evidence": [4]}],
                        status="submitted")
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
            vf1 = next(i for i, t in enumerate(texts) if t.startswith("VF1"))
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
            expect(page.locator('#rejected-labels tr.undone')).to_contain_text("CF3")  # apart from gold
            assert "CF3" not in page.locator("#gold-labels > tbody > tr[data-gold-id] > td:first-child").all_inner_texts()
            for _ in range(abs(vf1 - cf3)):
                kb.press("j" if vf1 > cf3 else "k")
            expect(page.locator("#candidates tr.sel")).to_contain_text("VF1")
            expect(page.locator("#candidates tr.sel")).to_have_attribute("data-decision", "")  # undecided
            kb.press("r")                               # reject a candidate not in gold: a stored decision
            expect(page.locator("#candidates tr.sel")).to_have_attribute("data-decision", "rejected")
            expect(page.locator("#candidates tr.sel")).to_contain_text("rejected")
            expect(page.locator('#rejected-labels tr.rejected')).to_have_count(2)  # CF3 and VF1, listed apart
            expect(page.locator('#gold-labels tr.rejected')).to_have_count(0)
            kb.press("F")
            kb.type("CF3 evidence is the offer, not a breach")
            kb.press("Control+Enter")
            expect(page.locator("#status")).to_contain_text("adjudicated")
            assert page.evaluate("() => window.__samePage === true"), "the page was reloaded"
            assert errors == []
            page.reload()  # the rejection was stored: a fresh page shows it, distinct from undecided
            vf1_row = page.locator("#candidates tbody tr[data-status]").filter(has_text="VF1")
            expect(vf1_row).to_have_attribute("data-decision", "rejected")
            expect(page.locator("#decided")).to_contain_text("1 accepted, 2 rejected")

            ann = browser.new_page(viewport={"width": 1280, "height": 720})
            log_in(ann, url, "ann2")
            ann.goto(f"{url}/runs/{rid}")
            expect(ann.locator("#gold-beside")).to_contain_text("GR1")
            expect(ann.locator("#gold-beside li")).to_have_count(1)  # the undone CF3 is not gold
            expect(ann.locator("#gold-beside")).not_to_contain_text("VF1")  # nor the rejected VF1
            expect(ann.locator(".label-card").first).to_contain_text("CF3")   # their own labels, beside the gold
            expect(ann.locator(".label-card").nth(1)).to_contain_text("VF1")
        finally:
            browser.close()
    engine.dispose()


def _disputed(engine, run: dict, labels: dict[str, list[dict]]) -> None:
    from app.annotations.service import save_annotation
    from app.auth.service import get_user
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        for who, labs in labels.items():
            save_annotation(s, get_user(s, who), get_run(s, run["run_id"]), tax, labs, status="submitted")
        s.commit()


def test_next_and_previous_run_in_place(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from app.demo.generator import generate_runs

    engine = make_database(tmp_path / "adj-next.db")
    runs = [d.run for d in generate_runs(2, seed=23)]
    load_runs(engine, runs)
    ids = [r["run_id"] for r in runs]
    add_annotator(engine, "ann1", ids)
    add_annotator(engine, "ann2", ids)
    add_annotator(engine, "rev", [], role="reviewer")
    modes = {ids[0]: ("CF3", "GR2"), ids[1]: ("DD2", "VF2")}  # what tells the two runs' candidates apart
    for r in runs:
        m1, m2 = modes[r["run_id"]]
        ag = [a["id"] for a in r["agents"]]
        _disputed(engine, r, {"ann1": [{"mode": m1, "agent": ag[0], "evidence": [2]}],
                              "ann2": [{"mode": m2, "agent": ag[1], "evidence": [3]}]})
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.set_default_timeout(10_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            log_in(page, url, "rev")
            ranked = page.evaluate("""() => fetch('/api/v1/agreement/disagreements?page_size=500')
                                            .then(r => r.json()).then(d => d.runs.map(x => x.run_id))""")
            assert sorted(ranked) == sorted(ids)
            first, second = ranked
            page.goto(f"{url}/adjudicate/{first}")
            expect(page.locator("#candidates")).to_contain_text(modes[first][0])
            page.evaluate("() => { window.__samePage = true; }")
            kb = page.keyboard

            kb.press("]")                       # the next run still to adjudicate, swapped in place
            expect(page).to_have_url(f"{url}/adjudicate/{second}?taxonomy=a2-failures%401")
            expect(page.locator("#adj-panel")).to_have_attribute("data-run-id", second)
            expect(page.locator("#adj-title")).to_contain_text(second)
            for m in modes[second]:
                expect(page.locator("#candidates")).to_contain_text(m)
            expect(page.locator("#candidates")).not_to_contain_text(modes[first][0])
            assert page.title() == f"Adjudicate {second} · a2annotate"
            assert page.evaluate("() => document.activeElement.id") == "adj-title"  # focus on the new run
            assert page.evaluate("() => window.__samePage === true"), "] reloaded the page"
            # the trace is the new run's, and works: j marks the candidate's evidence in it
            n_events = len(next(r for r in runs if r["run_id"] == second)["events"])
            assert page.evaluate("() => window.A2Trace.count()") == n_events
            kb.press("j")
            expect(page.locator("#e-2.is-ev-active, #e-3.is-ev-active")).to_have_count(1)
            kb.press("a")                       # its forms post to the new run
            expect(page.locator("#candidates tr.sel")).to_contain_text("in gold")
            kb.press("/")                       # the swapped-in search box is wired too
            kb.type("zzzz-nothing")
            expect(page.locator("#search-count")).to_have_text("0 matches")
            kb.press("Escape")

            kb.press("[")                       # the run ranked before it
            expect(page.locator("#adj-panel")).to_have_attribute("data-run-id", first)
            expect(page.locator("#candidates")).to_contain_text(modes[first][0])
            page.go_back()                      # Back swaps the run back in, still no reload
            expect(page.locator("#adj-panel")).to_have_attribute("data-run-id", second)
            expect(page).to_have_url(f"{url}/adjudicate/{second}?taxonomy=a2-failures%401")
            expect(page.locator("#candidates tr[data-decision=accepted]")).to_have_count(1)
            assert page.evaluate("() => window.__samePage === true"), "Back reloaded the page"
            assert errors == []

            # the fetch fails: ] falls back to loading the run's page
            page.route("**/adjudicate/**fragment=1**", lambda route: route.abort())
            kb.press("]")
            page.wait_for_url(f"{url}/adjudicate/{first}?taxonomy=a2-failures%401")
            expect(page.locator("#candidates")).to_contain_text(modes[first][0])
            assert page.evaluate("() => window.__samePage === undefined")  # a real page load this time
        finally:
            browser.close()
    engine.dispose()
