"""The sticky run summary stays one line at 1280x720 with four principals (chips shrink with an
ellipsis, a "+N" chip stands for the rest with their outcomes in its title), the first event is
on the first screen, and the expanded header still shows every principal in full."""
from __future__ import annotations

import pytest

from tests.e2e.live import LiveServer, add_annotator, launch_browser, load_runs, log_in, make_database, wait_labels_loaded

pytestmark = pytest.mark.e2e


def four_principal_run(run_id: str = "four-1") -> dict:
    from app.ingest.canonical import normalize_run
    from tests.web.helpers import page_run

    r = page_run(run_id, n_events=12)
    r["scenario"]["title"] = "Used car purchase with financing and insurance, four parties at the table"
    r["principals"] += [
        {"id": "bank", "name": "Northwind Credit Union (lender)", "kind": "organization",
         "objective": "Approve only below 36% debt to income", "outcome": {"success": True, "score": 0.75}},
        {"id": "insurer", "name": "Harbor Mutual Insurance (insurer)", "kind": "organization",
         "objective": "Quote within policy", "outcome": {"success": False, "score": 0.35}},
    ]
    r["agents"] += [{"id": "bank_agent", "principal": "bank", "role": "lender"},
                    {"id": "insurer_agent", "principal": "insurer", "role": "insurer"}]
    return normalize_run(r)


def test_summary_is_one_line_with_four_principals(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    engine = make_database(tmp_path / "summary.db")
    load_runs(engine, [four_principal_run()])
    add_annotator(engine, "kim", ["four-1"])
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.set_default_timeout(10_000)
            log_in(page, url, "kim")
            page.goto(f"{url}/runs/four-1")
            wait_labels_loaded(page)
            line = page.evaluate("""() => {
                const s = document.querySelector('#run-head > summary');
                const kids = [...s.children].filter(c => c.getClientRects().length);
                const mids = kids.map(c => { const b = c.getBoundingClientRect(); return (b.top + b.bottom) / 2; });
                const lh = parseFloat(getComputedStyle(s).lineHeight);
                const right = s.getBoundingClientRect().right;
                return {height: s.getBoundingClientRect().height, lh: lh, spread: Math.max(...mids) - Math.min(...mids),
                        cut: kids.filter(c => c.getBoundingClientRect().right > right + 0.5).map(c => c.className),
                        ellipsed: [...s.querySelectorAll('.schip .po')].filter(c => c.scrollWidth > c.clientWidth).length};
            }""")
            assert line["spread"] < line["lh"] / 2, line  # every item on the same line
            assert line["height"] <= line["lh"] + 1, line   # one line high, not two
            assert line["cut"] == [], line                  # nothing pushed out past the right edge
            assert line["ellipsed"] == 0, line              # every shown outcome mark is whole
            chips = page.locator("#run-head > summary .schip.p")
            expect(chips).to_have_count(3)                  # two principals and "+2"
            more = page.locator("#run-head > summary .schip.more-p")
            expect(more).to_have_text("+2 ✗")               # one of the two hidden principals failed
            title = more.get_attribute("title")
            assert "Northwind Credit Union (lender) ✓ succeeded 0.75" in title
            assert "Harbor Mutual Insurance (insurer) ✗ failed 0.35" in title
            assert "failed (0.20)" in chips.first.get_attribute("title")
            # the first event is on the first screen
            top = page.locator("#trace .ev").first.evaluate("el => el.getBoundingClientRect().top")
            assert 0 <= top < 720 - 40, top
            # a click expands it: every principal's card, names in full
            page.click("#run-head > summary")
            cards = page.locator("#run-head .principal.card")
            expect(cards).to_have_count(4)
            expect(page.locator("#run-head .run-more")).to_contain_text("Harbor Mutual Insurance (insurer)")
        finally:
            browser.close()
    engine.dispose()
