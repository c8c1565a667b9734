"""Regenerate docs/screenshots/trace-view.png, conversation-view.png, labeling-panel.png, adjudication.png, four-agents.png and agreement.png (1280x720).

Usage, from the repository root:

    .venv/bin/python docs/screenshots/make_screenshots.py [--out docs/screenshots]

It builds a throw-away SQLite database with a few demo runs, serves the app on 127.0.0.1 and a
free port, logs in as an annotator with two assigned runs (then as a reviewer adjudicating the run
two other annotators labelled differently), and drives Debian's chromium
(/usr/bin/chromium; `apt-get install -y chromium`) with the Python playwright package.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.live import (
    LiveServer,
    add_annotator,
    launch_browser,
    load_runs,
    log_in,
    make_database,
    wait_labels_loaded,
)

SEED = 7


def pick_run(runs: list[dict]) -> dict:
    """A run that shows a lot at once: three agents, a seeded failure and a blind spot."""
    for r in runs:
        truth = r["metadata"].get("demo_truth") or []
        failed = any(p["outcome"].get("success") is False for p in r["principals"])
        if len(r["agents"]) == 3 and truth and failed and (r.get("aggregate_score") or 0) >= 0.5:
            return r
    return runs[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="output folder")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    from app.demo.generator import generate_runs

    runs = [d.run for d in generate_runs(12, seed=SEED)]
    run = pick_run(runs)
    other = next(r for r in runs if r["run_id"] != run["run_id"])
    truth = run["metadata"]["demo_truth"]
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_database(Path(tmp) / "screens.db")
        load_runs(engine, runs)
        add_annotator(engine, "annotator", [run["run_id"], other["run_id"]])
        with LiveServer(engine) as url, sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            log_in(page, url, "annotator")
            page.click("#start-next")
            page.wait_for_url(f"{url}/runs/**")
            wait_labels_loaded(page)
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "trace-view.png"))

            # two labels made with the keyboard, evidence taken from the demo's seeded truth
            agents = [a["id"] for a in run["agents"]]
            wanted = truth[:2] if len(truth) >= 2 else truth + [{"mode": "VF1", "agent": agents[-1],
                                                                "evidence": [truth[0]["evidence"][0]]}]
            kb = page.keyboard
            for t in wanted:
                kb.press("n")
                kb.type(t["mode"])
                kb.press("Enter")
                for _ in range(agents.index(t["agent"]) + 1):
                    kb.press("a")
                for seq in t["evidence"][:2]:
                    page.evaluate("s => window.A2Trace.goTo(s, false)", seq)
                    kb.press("x")
            page.locator("#save-state").filter(has_text="draft saved").wait_for(timeout=10_000)
            page.evaluate("s => window.A2Trace.goTo(s, false)", wanted[-1]["evidence"][0])
            page.wait_for_timeout(400)
            page.screenshot(path=str(out / "labeling-panel.png"))
            kb.press("v")  # the conversation view: one column, actor -> recipients
            page.wait_for_timeout(300)  # the view switch re-centres the focused event: then go to the top
            page.evaluate("s => window.A2Trace.goTo(s, false)", run["events"][0]["seq"])
            page.evaluate("() => window.scrollTo(0, 0)")
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "conversation-view.png"))
            kb.press("v")

            # adjudication: two annotators disagree; the reviewer selects a candidate, rejects another
            _two_annotators_disagree(engine, run, wanted)
            rev = browser.new_page(viewport={"width": 1280, "height": 720})
            log_in(rev, url, "reviewer")
            rev.goto(f"{url}/adjudicate/{run['run_id']}")
            rev.locator("#trace .ev").first.wait_for()
            rows = rev.locator("#candidates tbody tr[data-status]")
            texts = [rows.nth(i).inner_text() for i in range(rows.count())]
            rejected = next(i for i, t in enumerate(texts) if t.startswith("VF5"))
            for _ in range(rejected + 1):
                rev.keyboard.press("j")
            rev.keyboard.press("r")
            rev.locator("#candidates tr[data-decision=rejected]").first.wait_for()
            rev.keyboard.press("k" if rejected else "j")
            rev.wait_for_timeout(300)
            # the panel from its flash message down: the gold labels, then the candidates
            rev.evaluate("() => document.getElementById('flash').scrollIntoView({block: 'start'})")
            rev.wait_for_timeout(300)
            rev.screenshot(path=str(out / "adjudication.png"))

            # four agents at 1280x720: the lanes become two, speaker / others
            four = next((r for r in runs if len(r["agents"]) == 4), None)
            if four is not None:
                rev.goto(f"{url}/runs/{four['run_id']}")
                rev.locator("#trace .ev").first.wait_for()
                rev.wait_for_timeout(400)
                rev.screenshot(path=str(out / "four-agents.png"))
            # the agreement page: the per-mode forest plot first
            rev.goto(f"{url}/agreement?n_boot=200")
            rev.locator("#mode-forest").scroll_into_view_if_needed()
            rev.evaluate("() => document.getElementById('mode-forest').scrollIntoView({block: 'start'})")
            rev.wait_for_timeout(300)
            rev.screenshot(path=str(out / "agreement.png"))
            browser.close()
        engine.dispose()
    print(f"wrote trace-view.png, labeling-panel.png, conversation-view.png, adjudication.png, four-agents.png "
          f"and agreement.png to {out} "
          f"(run {run['run_id']})")


def _two_annotators_disagree(engine, run: dict, labels: list[dict]) -> None:
    """Two more annotators submit the run: both give the first label, only one the second, and
    one adds a VF5 nobody else gave; and a reviewer to adjudicate it."""
    from sqlmodel import Session

    from app.annotations.service import save_annotation
    from app.auth.service import get_user
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    add_annotator(engine, "ann2", [run["run_id"]])
    add_annotator(engine, "ann3", [run["run_id"]])
    add_annotator(engine, "reviewer", [], role="reviewer")
    first = [{k: t[k] for k in ("mode", "agent", "evidence")} for t in labels]
    extra = {"mode": "VF5", "agent": run["agents"][-1]["id"], "evidence": [run["events"][-2]["seq"]]}
    with Session(engine) as s:
        tax, r = latest(s, "a2-failures"), get_run(s, run["run_id"])
        save_annotation(s, get_user(s, "ann2"), r, tax, first, status="submitted")
        save_annotation(s, get_user(s, "ann3"), r, tax, first[:1] + [extra], status="submitted")
        s.commit()


if __name__ == "__main__":
    main()
