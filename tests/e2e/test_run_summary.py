"""The sticky run summary stays one line at 1280x720 with three and four principals (the title and
the chips shrink with an ellipsis, past three a "+N" chip stands for the rest with their outcomes
in its title), nothing is pushed out of it, the first event is on the first screen, and the
expanded header still shows every principal in full."""
from __future__ import annotations

import pytest

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


EXTRA = [
    {"id": "bank", "name": "Northwind Credit Union (lender)", "kind": "organization",
     "objective": "Approve only below 36% debt to income", "outcome": {"success": True, "score": 0.75}},
    {"id": "insurer", "name": "Harbor Mutual Insurance (insurer)", "kind": "organization",
     "objective": "Quote within policy", "outcome": {"success": False, "score": 0.35}},
]


def many_principal_run(run_id: str, n: int) -> dict:
    """page_run with `n` (3 or 4) principals, long names, a long title and a blind spot."""
    from app.ingest.canonical import normalize_run
    from tests.web.helpers import page_run

    r = page_run(run_id, n_events=12)
    r["scenario"]["title"] = "Used car purchase with financing and insurance, every party at the table"
    r["principals"][0]["name"] = "Dana Whitfield (buyer)"
    r["principals"][1]["name"] = "Northgate Motors (dealer)"
    r["principals"] += EXTRA[:n - 2]
    r["agents"] += [{"id": f"{p['id']}_agent", "principal": p["id"], "role": p["id"]} for p in EXTRA[:n - 2]]
    return normalize_run(r)


@pytest.mark.parametrize("n", [3, 4])
def test_summary_is_one_line_with_many_principals(tmp_path, n):
    from playwright.sync_api import expect, sync_playwright

    engine = make_database(tmp_path / "summary.db")
    load_runs(engine, [many_principal_run("four-1", n)])
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
            expect(page.locator("#run-head > summary .schip.spot")).to_be_visible()  # aggregate 1.0, a principal failed
            chips = page.locator("#run-head > summary .schip.p")
            expect(chips).to_have_count(3)                  # three principals, or two and "+2"
            assert "failed (0.20)" in chips.first.get_attribute("title")
            more = page.locator("#run-head > summary .schip.more-p")
            if n == 4:
                expect(more).to_have_text("+2 ✗")           # one of the two hidden principals failed
                title = more.get_attribute("title")
                assert "Northwind Credit Union (lender) ✓ succeeded 0.75" in title
                assert "Harbor Mutual Insurance (insurer) ✗ failed 0.35" in title
            else:
                expect(more).to_have_count(0)
                expect(chips.nth(2)).to_contain_text("✓ 0.75")
            # the first event is on the first screen
            top = page.locator("#trace .ev").first.evaluate("el => el.getBoundingClientRect().top")
            assert 0 <= top < 720 - 40, top
            # a click expands it: every principal's card, names in full
            page.click("#run-head > summary")
            cards = page.locator("#run-head .principal.card")
            expect(cards).to_have_count(n)
            expect(page.locator("#run-head .run-more")).to_contain_text(EXTRA[n - 3]["name"])
        finally:
            browser.close()
    engine.dispose()
