"""The run page (four agents) and the adjudication page fit at 1280x720 and 1440x900 in chromium:
no element sticks out of its container or the viewport, nothing is cut off by a clipping
ancestor, no box scrolls sideways (long JSON wraps), the focused event shows its buttons in full
wherever it is, and the candidates table stays inside its card."""
from __future__ import annotations

import pytest
from sqlmodel import Session

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
SIZES = [(1280, 720), (1440, 900)]

# Every visible element under `root` must lie inside the viewport horizontally and inside its
# nearest clipping ancestor (overflow other than visible, or paint containment such as
# content-visibility: auto); a clipping box must not hide content sideways (scrollWidth). Text
# cut with an ellipsis on purpose (a long agent name, the run title) counts as fitting.
OVERFLOWS = r"""
(rootSel) => {
  const root = document.querySelector(rootSel);
  const vw = document.documentElement.clientWidth;
  const out = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const path = el => { const p = []; for (let e = el; e && e !== root && p.length < 4; e = e.parentElement) p.unshift(name(e)); return p.join(' > '); };
  const clips = el => { const cs = getComputedStyle(el);
    return cs.overflowX !== 'visible' || cs.contentVisibility === 'auto' || /paint|strict|content/.test(cs.contain); };
  const ellipsis = el => { for (let e = el; e && e !== root; e = e.parentElement) {
      if (getComputedStyle(e).textOverflow === 'ellipsis') return true; } return false; };
  if (document.documentElement.scrollWidth > vw + 1) out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + vw);
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('.sr-only, template, [hidden], script, option, optgroup')) continue;
    const shut = el.parentElement && el.parentElement.closest('details:not([open])');
    if (shut && !(el.closest('summary') && el.closest('summary').parentElement === shut)) continue;  // not shown
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    if (el.tagName === 'svg' || el.closest('svg') && el.tagName !== 'svg') continue;
    if (r.right > vw + 1 || r.left < -1) out.push(path(el) + ' leaves the viewport: ' + Math.round(r.left) + '..' + Math.round(r.right) + ' of ' + vw);
    let a = el.parentElement;
    while (a && a !== document.body && !clips(a)) a = a.parentElement;
    if (a && a !== document.body && !ellipsis(el)) {
      const b = a.getBoundingClientRect();
      if (r.right > b.right + 1 || r.left < b.left - 1)
        out.push(path(el) + ' sticks out of ' + name(a) + ': ' + Math.round(r.left) + '..' + Math.round(r.right) + ' in ' + Math.round(b.left) + '..' + Math.round(b.right));
    }
    if (clips(el) && !ellipsis(el) && el.scrollWidth > el.clientWidth + 1 && !['TEXTAREA', 'SELECT', 'INPUT'].includes(el.tagName))
      out.push(path(el) + ' hides content sideways: scrollWidth ' + el.scrollWidth + ' > ' + el.clientWidth);
    if (out.length > 12) break;
  }
  return out;
}
"""


def overflows(page, root: str) -> list[str]:
    return page.evaluate(OVERFLOWS, root)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    from app.annotations.service import save_annotation
    from app.auth.service import get_user
    from app.demo.generator import generate_runs
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    engine = make_database(tmp_path_factory.mktemp("e2e-fit") / "fit.db")
    runs = {d.run["run_id"]: d.run for d in generate_runs(9, seed=7)}
    load_runs(engine, runs.values())
    run = next(r for r in runs.values() if len(r["agents"]) == 4)
    rid = run["run_id"]
    agents = [a["id"] for a in run["agents"]]
    seqs = [e["seq"] for e in run["events"]]
    add_annotator(engine, "fit", [rid])
    for name in ("ann1", "ann2", "ann3"):
        add_annotator(engine, name, [rid])
    add_annotator(engine, "rev", [], role="reviewer")
    # three annotators who disagree: many candidates, long evidence lists, every decision button
    given = {
        "ann1": [("CF3", 0, seqs[2:9]), ("GR1", 1, seqs[4:6]), ("VF1", 2, seqs[10:14])],
        "ann2": [("CF3", 0, seqs[2:4]), ("VF5", 3, seqs[20:31]), ("DD2", 1, seqs[7:8])],
        "ann3": [("CF3", 0, seqs[3:5]), ("GR1", 1, seqs[5:6]), ("CF1", 3, seqs[30:40])],
    }
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        for name, labels in given.items():
            save_annotation(s, get_user(s, name), get_run(s, rid), tax,
                            [{"mode": m, "agent": agents[a], "evidence": ev} for m, a, ev in labels],
                            status="submitted")
        s.commit()
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        yield {"url": url, "run": run, "browser": browser}
        browser.close()
    engine.dispose()


def _page(live, user, size):
    page = live["browser"].new_page(viewport={"width": size[0], "height": size[1]})
    page.set_default_timeout(10_000)
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    log_in(page, live["url"], user)
    return page


def _lay_out_all(page):
    """Lay out every event (content-visibility: auto skips the ones off screen)."""
    page.evaluate("() => document.querySelectorAll('#trace > .ev').forEach(r => { r.style.contentVisibility = 'visible'; })")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_run_page_fits_with_four_agents(live, size):
    from playwright.sync_api import expect

    page = _page(live, "fit", size)
    run = live["run"]
    page.goto(f"{live['url']}/runs/{run['run_id']}")
    wait_labels_loaded(page)
    assert len(run["agents"]) == 4
    # four lanes in this width would be narrower than an event's header: speaker / others
    lanes = page.evaluate("() => getComputedStyle(document.getElementById('trace')).getPropertyValue('--n').trim()")
    if size[0] == 1280:
        expect(page.locator("#trace.two-lane")).to_have_count(1)
        assert lanes == "2"
    assert overflows(page, "#runpage") == []

    # the focused event's buttons in full, wherever the event is: walk the run with j
    kb = page.keyboard
    kb.press("t")
    checked = 0
    for _ in range(len(run["events"]) - 1):
        ok = page.evaluate("""() => {
            const ev = document.querySelector('#trace .ev.focused'); const tb = document.getElementById('ev-toolbar');
            const e = ev.getBoundingClientRect();
            return Array.from(tb.querySelectorAll('button')).filter(b => getComputedStyle(b).display !== 'none')
              .every(b => { const r = b.getBoundingClientRect();
                return r.width > 0 && r.left >= e.left - 1 && r.right <= e.right + 1 && r.right <= innerWidth; }); }""")
        assert ok, f"the toolbar of #{page.evaluate('() => window.A2Trace.focusedSeq()')} is clipped"
        checked += 1
        kb.press("j")
    assert checked >= 40

    # long JSON wraps by value: no data block scrolls sideways, no key alone on its line
    page.evaluate("() => document.querySelectorAll('#trace details.data').forEach(d => { d.open = true; })")
    _lay_out_all(page)
    assert overflows(page, "#trace") == []
    # every lane (the full lane view, chosen by the reader) fits too
    page.click('[data-act="lanes-all"]')
    expect(page.locator("#trace.two-lane")).to_have_count(0)
    _lay_out_all(page)
    assert overflows(page, "#runpage") == []
    page.click('[data-act="lanes-two"]')
    expect(page.locator("#trace.two-lane")).to_have_count(1)
    assert page.errors == []
    page.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_adjudication_page_fits(live, size):
    page = _page(live, "rev", size)
    page.goto(f"{live['url']}/adjudicate/{live['run']['run_id']}")
    page.locator("#candidates tbody tr[data-status]").first.wait_for()
    assert page.locator("#candidates tbody tr[data-status]").count() >= 5
    assert overflows(page, "#adj-panel") == []
    # the gold labels' edit forms, opened, fit too
    page.evaluate("() => document.querySelectorAll('#adj-panel details.edit').forEach(d => { d.open = true; })")
    assert page.locator("#adj-panel details.edit[open]").count() >= 1
    assert overflows(page, "#adj-panel") == []
    page.evaluate("() => document.querySelectorAll('#adj-panel details.edit').forEach(d => { d.open = false; })")
    # every decision button inside the card and the viewport
    bad = page.evaluate("""() => {
        const card = document.getElementById('candidates').closest('.card').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#candidates button')).map(b => b.getBoundingClientRect())
          .filter(r => r.right > card.right + 1 || r.right > innerWidth).length; }""")
    assert bad == 0
    table = page.locator("#candidates").bounding_box()
    card = page.locator("#candidates").locator("xpath=ancestor::section[1]").bounding_box()
    assert table["x"] + table["width"] <= card["x"] + card["width"] + 1
    _lay_out_all(page)
    assert overflows(page, "#adj-trace") == []
    assert page.errors == []
    page.close()
