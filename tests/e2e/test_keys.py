"""Keys everywhere an annotator goes, and private said in words, in chromium at 1280x720: the queue
page (title, family, event count, due batch; ] and Enter open the next run), the agent picked by
number after a, search highlighting the matched text, Take back by key; every private event says
"private to X", the legend on the first screen, a tool result opened compact with "expand"."""
from __future__ import annotations

import json

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
VIEWPORT = {"width": 1280, "height": 720}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    from app.demo.generator import generate_runs

    engine = make_database(tmp_path_factory.mktemp("e2e-keys") / "keys.db")
    runs = {d.run["run_id"]: d.run for d in generate_runs(9, seed=7)}
    load_runs(engine, runs.values())
    ids = sorted(runs)
    queue = [ids[7], ids[1], ids[2]]  # 4 agents first
    add_annotator(engine, "kim", queue)
    add_annotator(engine, "lou", [ids[2], ids[1]])
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        yield {"url": url, "engine": engine, "queue": queue, "runs": runs, "browser": browser}
        browser.close()
    engine.dispose()


def _page(live, user):
    page = live["browser"].new_page(viewport=VIEWPORT)
    page.set_default_timeout(10_000)
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    log_in(page, live["url"], user)
    return page


def test_queue_page_by_keyboard(live):
    from playwright.sync_api import expect

    page = _page(live, "kim")
    first = live["runs"][live["queue"][0]]
    row = page.locator("#queue-table tbody tr").first
    expect(row).to_contain_text(first["scenario"]["title"])
    expect(row).to_contain_text(first["scenario"]["family"])
    expect(row).to_contain_text(str(len(first["events"])))
    expect(row).to_contain_text("e2e")  # the batch it is due in
    expect(page.locator("#queue-table thead")).to_contain_text("Due batch")
    page.keyboard.press("]")
    page.wait_for_url(f"{live['url']}/runs/{first['run_id']}")
    page.goto(f"{live['url']}/")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live['url']}/runs/{first['run_id']}")
    page.goto(f"{live['url']}/")
    page.keyboard.press("j")
    page.keyboard.press("j")                    # the second run's link has the focus; Enter opens it
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live['url']}/runs/{live['queue'][1]}**")
    assert page.errors == []
    page.close()


def test_agent_by_number_and_search_highlights_the_match(live):
    from playwright.sync_api import expect

    page = _page(live, "kim")
    run = live["runs"][live["queue"][0]]
    page.goto(f"{live['url']}/runs/{run['run_id']}")
    wait_labels_loaded(page)
    kb = page.keyboard
    kb.press("n")
    kb.type("CF3")
    kb.press("Enter")
    kb.press("a")
    kb.press("3")                                # a, then 3: the third agent, not category 3
    agent = page.locator('.label-card.active select[data-f="agent"]')
    expect(agent).to_have_value(run["agents"][2]["id"])
    expect(page.locator("#mode-picker")).to_be_hidden()
    kb.press("a")                                # a alone still cycles: 3rd -> 4th
    page.wait_for_timeout(1700)                  # after the digit window a digit is a category again
    expect(agent).to_have_value(run["agents"][3]["id"])
    kb.press("a")
    kb.press("1")
    expect(agent).to_have_value(run["agents"][0]["id"])

    # search: the matched text itself is highlighted, not only the event outlined
    word = next(e["content"].split()[1] for e in run["events"]
                if e.get("content") and len(e["content"].split()) > 2 and len(e["content"].split()[1]) > 4)
    kb.press("/")
    kb.type(word)
    kb.press("Enter")
    hl = page.evaluate("""() => {
        const all = CSS.highlights.get('a2-search'), cur = CSS.highlights.get('a2-search-cur');
        const texts = h => h ? Array.from(h).map(r => r.toString().toLowerCase()) : [];
        const c = cur ? Array.from(cur)[0] : null;
        return {all: texts(all), cur: texts(cur),
                inCurrent: !!(c && c.startContainer.parentElement.closest('.ev.current-match'))}; }""")
    assert hl["all"] and set(hl["all"]) == {word.lower()}
    assert hl["cur"] and hl["inCurrent"]
    kb.press("Escape")
    page.fill("#trace-search", "")
    page.wait_for_timeout(300)
    assert page.evaluate("() => !CSS.highlights.get('a2-search') || CSS.highlights.get('a2-search').size === 0")
    assert page.errors == []
    page.close()


def test_private_in_words_legend_and_compact_tool_result(live):
    from playwright.sync_api import expect

    page = _page(live, "kim")
    run = live["runs"][live["queue"][0]]
    page.goto(f"{live['url']}/runs/{run['run_id']}")
    wait_labels_loaded(page)
    # every private event says so, with its owner's name
    private = page.locator("#trace > .ev.private")
    assert private.count() > 5
    for i in range(private.count()):
        ev = private.nth(i)
        actor = ev.get_attribute("data-a")
        expect(ev.locator(".ev-h .priv")).to_have_text(f"private to {actor}")
    # the legend is on the first screen, the header closed
    expect(page.locator("#run-head")).not_to_have_attribute("open", "")
    legend = page.locator("#trace-legend")
    expect(legend).to_be_visible()
    box = legend.bounding_box()
    assert box["y"] + box["height"] <= VIEWPORT["height"]
    expect(legend).to_contain_text("private")
    # a focused tool result: a compact block with "expand", not a 500 px JSON block
    seq = next(e["seq"] for e in run["events"] if e["kind"] == "tool_result"
               and json.dumps(e.get("data"), indent=2).count("\n") + 1 > 8)
    page.evaluate("s => window.A2Trace.goTo(s, false)", seq)
    ev = page.locator(f"#e-{seq}")
    pre = ev.locator("details.data pre.json")
    expect(pre).to_be_visible()
    assert pre.bounding_box()["height"] < 140
    expand = ev.locator("button.unfold", has_text="expand")
    expect(expand).to_be_visible()
    expand.click()
    expect(ev.locator("button.unfold")).to_have_count(0)
    assert pre.bounding_box()["height"] > 140
    for view in ("v", "v"):                      # the conversation view and back: still compact elsewhere
        page.keyboard.press(view)
    assert page.errors == []
    page.close()


def test_take_back_a_skip_by_key(live):
    from playwright.sync_api import expect

    from app.flags.models import RunFlag

    page = _page(live, "lou")
    run_id = live["queue"][2]
    page.goto(f"{live['url']}/runs/{run_id}")
    wait_labels_loaded(page)
    kb = page.keyboard
    kb.press("f")
    page.locator('#flag-form input[name="kind"][value="skip"]').check()
    kb.press("1")
    kb.press("Enter")
    page.wait_for_url(f"{live['url']}/runs/{live['queue'][1]}")
    page.goto(f"{live['url']}/runs/{run_id}")
    wait_labels_loaded(page)
    expect(page.locator("#lp-flag")).to_be_visible()
    expect(page.locator("#lp-flag")).to_contain_text("u")
    kb.press("u")
    expect(page.locator("#lp-flag")).to_be_hidden()
    expect(page.locator("#lp-errors")).to_contain_text("Back in your queue")
    with Session(live["engine"]) as s:
        assert s.exec(select(RunFlag)).all() == []
    assert page.errors == []
    page.close()
