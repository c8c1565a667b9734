"""The run page of a long run (2,000 events), served by the app on SQLite: bytes on the wire
with and without gzip, server time for the first (uncached) and a repeat (cached trace) request,
and, when chromium is installed, the browser's DOM size and time to DOMContentLoaded.

Targets (issue 11): under 300 KB on the wire, under 1 s to interactive. Quick: `python -m bench.bench_run_page`.
"""
from __future__ import annotations

import gzip
import tempfile
import time
from pathlib import Path

from sqlmodel import Session


def _measure(n_events: int = 2000) -> dict[str, float]:
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.web import trace_cache
    from tests.e2e.live import make_database
    from tests.web.helpers import login, page_run, store, user

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_database(Path(tmp) / "bench.db")
        with Session(engine) as s:
            store(s, page_run("long", n_events=n_events, content_extra="lorem ipsum dolor sit amet " * 4))
            user(s, "bench")
            s.commit()
        trace_cache.clear()
        client = TestClient(create_app(engine))
        login(client, "bench")
        t = time.perf_counter()
        r = client.get("/runs/long", headers={"Accept-Encoding": "identity"})
        out["first_s"] = time.perf_counter() - t
        out["raw_bytes"] = len(r.content)
        t = time.perf_counter()
        r2 = client.get("/runs/long", headers={"Accept-Encoding": "gzip"})
        out["cached_s"] = time.perf_counter() - t
        out["gzip_bytes"] = len(gzip.compress(r2.content, 6))  # what GZipMiddleware sends (level 9 is smaller)
        out["rows_in_dom_at_load"] = r.text.split("<template", 1)[0].count('class="ev ')
        try:
            out.update(_browser(engine))
        except Exception as exc:  # noqa: BLE001 - no chromium: the byte counts still stand
            print(f"(browser part skipped: {exc})")
        engine.dispose()
    return out


def _browser(engine) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    from app.auth.security import hash_password
    from app.auth.service import get_user
    from tests.e2e.live import PASSWORD, LiveServer, launch_browser, log_in

    with Session(engine) as s:
        get_user(s, "bench").password_hash = hash_password(PASSWORD)
        s.commit()
    with LiveServer(engine) as url, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        log_in(page, url, "bench")
        page.goto(f"{url}/runs/long")
        page.wait_for_function("() => window.A2Label && window.A2Label.state.loaded")
        timing = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                               " return [n.domContentLoadedEventEnd - n.startTime, n.transferSize]; }")
        nodes = page.evaluate("() => document.getElementsByTagName('*').length")
        browser.close()
    return {"dcl_ms": timing[0], "transfer_bytes": timing[1], "dom_nodes": nodes}


def main(quick: bool = False) -> list[str]:
    from bench.common import row

    m = _measure(100 if quick else 2000)  # quick: the suite's smoke test
    n = "100" if quick else "2,000"
    rows = [
        row(f"run page, {n} events: bytes on the wire (gzip)", f"{m['gzip_bytes'] / 1024:.0f} KB",
            f"{m['raw_bytes'] / 1024:.0f} KB uncompressed", m["gzip_bytes"] / m["raw_bytes"],
            "under 300 KB", "yes" if m["gzip_bytes"] < 300 * 1024 else "**no**"),
        row(f"run page, {n} events: server time, repeat (trace cached per content hash)", f"{m['cached_s']:.2f} s",
            f"first request (trace built): {m['first_s']:.2f} s", m["cached_s"] / m["first_s"]),
        row(f"run page, {n} events: event rows in the DOM at load (rest in templates)",
            f"{m['rows_in_dom_at_load']:.0f}", f"{n} events", None),
    ]
    if "dom_nodes" in m:
        rows.append(row(f"run page, {n} events: chromium DOM elements / DOMContentLoaded",
                        f"{m['dom_nodes']:.0f} / {m['dcl_ms']:.0f} ms", "", None, "under 1 s to interactive",
                        "yes" if m["dcl_ms"] < 1000 else "**no**"))
    return rows

if __name__ == "__main__":
    print("\n".join(main()))
