"""The run page and labeling panel in a real browser (chromium, 1280x720): the panel's former sharp
edges, keyboard-only labeling with note, confidence and principals, the conversation view with
filters and the event slider, and skip / flag with the queue moving on."""
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
VIEWPORT = {"width": 1280, "height": 720}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    from app.demo.generator import generate_runs

    engine = make_database(tmp_path_factory.mktemp("e2e-panel") / "panel.db")
    runs = {d.run["run_id"]: d.run for d in generate_runs(9, seed=7)}
    load_runs(engine, runs.values())
    ids = sorted(runs)
    queue = [ids[7], ids[1], ids[2]]  # 49 events / 4 agents, 46 / 3, 41 / 3
    add_annotator(engine, "kim", queue)
    add_annotator(engine, "sam", [queue[2], queue[0]])  # skip / flag: a queue of its own (tests run in any order)
    add_annotator(engine, "rita", [], role="reviewer")
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        yield {"url": url, "engine": engine, "queue": queue, "runs": runs, "browser": browser}
        browser.close()
    engine.dispose()


def _page(live, user="kim"):
    page = live["browser"].new_page(viewport=VIEWPORT)
    page.set_default_timeout(10_000)
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    log_in(page, live["url"], user)
    return page


def _open(page, live, run_id):
    page.goto(f"{live['url']}/runs/{run_id}")
    wait_labels_loaded(page)


def _in_view(page, selector) -> bool:
    return page.locator(selector).first.evaluate(
        "el => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight - 20; }")


def test_panel_defects_are_gone(live):
    from playwright.sync_api import expect

    page = _page(live)
    run_id = live["queue"][0]
    _open(page, live, run_id)
    kb = page.keyboard
    first_seq = live["runs"][run_id]["events"][0]["seq"]
    assert _in_view(page, f"#e-{first_seq}"), "the first event is not on the first screen at 1280x720"

    # n then Esc leaves no empty label behind (it used to block submit)
    kb.press("n")
    expect(page.locator("#mode-picker")).to_be_visible()
    kb.press("Escape")
    expect(page.locator(".label-card")).to_have_count(0)

    # a refused submit's message is not wiped by the autosave that was pending
    kb.press("n")
    kb.type("CF3")
    kb.press("Enter")
    kb.press("s")
    expect(page.locator("#lp-errors")).to_contain_text("needs the responsible agent")
    expect(page.locator("#save-state")).to_contain_text("draft saved")
    page.wait_for_timeout(300)
    expect(page.locator("#lp-errors")).to_be_visible()
    expect(page.locator("#lp-errors")).to_contain_text("at least one evidence event")
    kb.press("a")  # the list follows the edits: the agent is no longer missing
    expect(page.locator("#lp-errors")).not_to_contain_text("responsible agent")
    expect(page.locator("#lp-errors")).to_contain_text("evidence")

    # Esc in the search box leaves the field: the next key is a shortcut, not typed into the box
    kb.press("/")
    kb.type("zzq")
    kb.press("Escape")
    assert page.evaluate("() => document.activeElement.id") != "trace-search"
    kb.press("j")
    expect(page.locator("#trace-search")).to_have_value("zzq")

    # roving tabindex: from the trace to the run note in a few Tab presses, not ~200
    kb.press("t")
    assert page.evaluate("() => document.activeElement.classList.contains('ev')")
    for _ in range(40):
        kb.press("Tab")
        if page.evaluate("() => document.activeElement.id") == "run-note":
            break
    else:
        pytest.fail("the run note is more than 40 Tab presses away from the trace")
    assert page.locator("#trace [tabindex='0']").count() <= 6  # the focused event and its own controls
    assert page.locator("#trace .ev-toolbar").count() == 1  # one toolbar, on the focused event
    assert page.errors == []
    page.close()


def test_keyboard_only_labeling_with_note_confidence_and_principals(live):
    from playwright.sync_api import expect

    from app.annotations.models import Annotation, Label
    from app.auth.service import get_user
    from app.runs.service import get_run

    page = _page(live)
    run_id = live["queue"][1]
    run = live["runs"][run_id]
    _open(page, live, run_id)
    kb = page.keyboard
    kb.press("?")
    for key in ("note of the active label", "confidence", "affected principals", "skip the run or flag it",
                "conversation view"):
        expect(page.locator("#shortcuts")).to_contain_text(key)
    kb.press("Escape")
    expect(page.locator("#shortcuts")).to_be_hidden()

    kb.press("n")
    kb.type("VF1")
    kb.press("Enter")
    kb.press("a")                      # first agent
    kb.press("w")                      # the first affected-principal box
    kb.press("Space")
    kb.press("Escape")
    kb.press("j")
    kb.press("j")
    seq = page.evaluate("() => window.A2Trace.focusedSeq()")
    kb.press("x")
    kb.press("e")                      # the active label's note
    kb.type("claim accepted without a check")
    kb.press("Escape")
    kb.press("i")
    kb.press("i")                      # confidence: low, then medium
    expect(page.locator('.label-card.active select[data-f="confidence"]')).to_have_value("0.5")
    kb.press("r")                      # the note on the whole run
    kb.type("run-level note")
    kb.press("Escape")
    kb.press("s")
    expect(page.locator("#save-state")).to_contain_text("submitted")
    assert page.errors == []
    page.close()

    with Session(live["engine"]) as s:
        ann = s.exec(select(Annotation).where(Annotation.user_id == get_user(s, "kim").id,
                                              Annotation.run_pk == get_run(s, run_id).id)).one()
        (lab,) = s.exec(select(Label).where(Label.annotation_id == ann.id)).all()
    assert ann.status == "submitted" and ann.note == "run-level note"
    assert (lab.mode, lab.agent, lab.evidence) == ("VF1", run["agents"][0]["id"], [seq])
    assert lab.note == "claim accepted without a check" and lab.confidence == 0.5
    assert lab.principals == [run["principals"][0]["id"]]


def test_conversation_view_filters_and_slider(live):
    from playwright.sync_api import expect

    page = _page(live)
    run_id = live["queue"][0]
    run = live["runs"][run_id]
    _open(page, live, run_id)
    kb = page.keyboard
    kb.press("v")
    expect(page.locator("#trace.compact")).to_have_count(1)
    expect(page.locator('[data-act="view-compact"]')).to_have_attribute("aria-pressed", "true")
    assert _in_view(page, f"#e-{run['events'][0]['seq']}")
    # the whole 49-event run fits in three screens (every row laid out, not estimated)
    height = page.evaluate("""() => {
        document.querySelectorAll('#trace > .ev').forEach(r => { r.style.contentVisibility = 'visible'; });
        return document.getElementById('trace').getBoundingClientRect().height; }""")
    assert len(run["events"]) == 49 and height <= 3 * VIEWPORT["height"], f"compact trace is {height:.0f}px"
    page.reload()
    wait_labels_loaded(page)
    expect(page.locator("#trace.compact")).to_have_count(1)  # the choice is remembered

    # filter by agent: only that agent's events (as actor or recipient) stay; j skips the others
    agent = run["agents"][1]["id"]
    page.select_option("#filter-agent", agent)
    shown = page.locator("#trace > .ev:not(.filtered-out)")
    expected = [e for e in run["events"] if e["actor"] == agent or agent in (e.get("recipients") or [])]
    expect(shown).to_have_count(len(expected))
    page.locator("#filter-agent").press("Escape")
    kb.press("j")
    kb.press("j")
    seq = page.evaluate("() => window.A2Trace.focusedSeq()")
    assert seq in {e["seq"] for e in expected}
    page.select_option("#filter-kind", "tool_call")
    expect(page.locator("#trace > .ev:not(.filtered-out)")).to_have_count(
        sum(1 for e in expected if e["kind"] == "tool_call"))
    page.select_option("#filter-agent", "")
    page.select_option("#filter-kind", "")
    expect(page.locator("#trace > .ev.filtered-out")).to_have_count(0)

    # the event slider: g, then End jumps to the last event
    page.locator("#filter-kind").press("Escape")
    kb.press("g")
    kb.press("End")
    last = run["events"][-1]["seq"]
    expect(page.locator(f"#e-{last}.focused")).to_have_count(1)
    expect(page.locator("#scrub-pos")).to_have_text(f"#{last}")
    kb.press("v")
    expect(page.locator("#trace.compact")).to_have_count(0)
    assert page.errors == []
    page.close()


def test_skip_and_flag_move_the_queue_on_and_reviewers_see_the_flag(live):
    from playwright.sync_api import expect

    from app.flags.models import RunFlag

    page = _page(live, "sam")
    first, _, third = live["queue"]
    _open(page, live, third)
    kb = page.keyboard
    kb.press("f")
    expect(page.locator("#flag-dialog")).to_be_visible()
    kb.press("3")                                   # needs an expert
    page.locator("#flag-note").focus()
    kb.type("needs someone who knows freight law")
    kb.press("Control+Enter")
    page.wait_for_url(f"{live['url']}/runs/{first}")  # the queue moved on to sam's next run
    wait_labels_loaded(page)
    page.goto(f"{live['url']}/")
    expect(page.locator("tr", has_text=third).locator(".badge")).to_have_text("flagged")
    # skip the first run too: nothing is left to open, the queue page says so
    _open(page, live, first)
    kb.press("f")
    page.locator('#flag-form input[name="kind"][value="skip"]').check()
    kb.press("1")
    kb.press("Enter")
    page.wait_for_url(f"{live['url']}/")
    expect(page.locator("#start-next")).to_have_count(0)
    expect(page.locator(".queue-counts")).to_contain_text("2 skipped or flagged")
    assert page.errors == []
    page.close()

    with Session(live["engine"]) as s:
        rows = {r.kind: r for r in s.exec(select(RunFlag)).all()}
    assert rows["flag"].reason == "needs_expert" and rows["flag"].note == "needs someone who knows freight law"
    assert rows["skip"].reason == "unclear"

    rev = _page(live, "rita")
    rev.goto(f"{live['url']}/flagged")
    expect(rev.locator("tr.flag-row.flag")).to_contain_text(third)
    expect(rev.locator("tr.flag-row.flag")).to_contain_text("needs someone who knows freight law")
    rev.locator("tr.flag-row.flag button", has_text="Resolve").click()
    expect(rev.locator("tr.flag-row.flag")).to_have_count(0)
    expect(rev.locator("main")).to_contain_text("0 open flags, 1 open skip")
    rev.close()


def test_long_run_is_windowed_and_still_whole(live):
    """A 2,000-event run: a few hundred rows at first, the rest opened on demand by a deep link,
    by the end of the slider and by search; evidence on a late event is marked once it opens."""
    from playwright.sync_api import expect

    from app.annotations.models import Assignment
    from app.auth.service import get_user
    from app.runs.service import get_run
    from app.taxonomies.service import latest
    from tests.web.helpers import page_run, store

    with Session(live["engine"]) as s:
        store(s, page_run("long-2000", n_events=2000))
        s.add(Assignment(run_pk=get_run(s, "long-2000").id, user_id=get_user(s, "kim").id,
                         taxonomy_pk=latest(s, "a2-failures").id, position=9))
        s.commit()
    page = _page(live)
    _open(page, live, "long-2000")
    assert page.evaluate("() => window.A2Trace.rendered()") == 300
    assert page.evaluate("() => window.A2Trace.count()") == 2000
    assert page.evaluate("() => document.getElementsByTagName('*').length") < 12_000
    page.goto(f"{live['url']}/runs/long-2000#e-1400")
    wait_labels_loaded(page)
    expect(page.locator("#e-1400.focused")).to_be_in_viewport()
    page.keyboard.press("n")
    page.keyboard.type("CF1")
    page.keyboard.press("Enter")
    page.keyboard.press("x")
    expect(page.locator("#e-1400.is-ev-active")).to_have_count(1)
    page.keyboard.press("/")
    page.keyboard.type("message 1999")
    page.keyboard.press("Enter")
    expect(page.locator("#e-1999.current-match")).to_have_count(1)
    assert page.evaluate("() => window.A2Trace.rendered()") == 2000
    assert page.errors == []
    page.close()
