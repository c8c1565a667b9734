"""Regenerate docs/screenshots/trace-view.png, conversation-view.png and labeling-panel.png (1280x720).

Usage, from the repository root:

    .venv/bin/python docs/screenshots/make_screenshots.py [--out docs/screenshots]

It builds a throw-away SQLite database with a few demo runs, serves the app on 127.0.0.1 and a
free port, logs in as an annotator with two assigned runs, and drives Debian's chromium
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
            page.evaluate("() => window.scrollTo(0, 0)")
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "conversation-view.png"))
            kb.press("v")
            browser.close()
        engine.dispose()
    print(f"wrote trace-view.png, labeling-panel.png and conversation-view.png to {out} (run {run['run_id']})")


if __name__ == "__main__":
    main()
