"""Make docs/screenshots/reports.png: the /reports page on the demo corpus.

    .venv/bin/python docs/screenshots/make_reports_screenshot.py [--runs 300] [--out PATH]

Steps: a temporary SQLite database, `a2annotate db upgrade`, `a2annotate demo --runs 300
--with-users` (demo users and simulated human labels), the app served by uvicorn on 127.0.0.1
and a free port, Debian's chromium (never a Playwright-downloaded browser) driven by Playwright:
log in as admin / admin-demo, open /reports, take a full-page screenshot.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium() -> str:
    path = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
    if not path:
        sys.exit("chromium is not installed: apt-get update && apt-get install -y chromium")
    return path


def cli(args: list[str], env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        sys.exit(f"a2annotate {' '.join(args)} failed: {r.stderr.strip() or r.stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "reports.png"))
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="a2a-reports-shot-"))
    url = f"sqlite:///{tmp / 'demo.db'}"
    env = dict(os.environ, DATABASE_URL=url)
    cli(["db", "upgrade"], env)
    cli(["demo", "--runs", str(args.runs), "--with-users"], env)

    os.environ["DATABASE_URL"] = url
    sys.path.insert(0, str(ROOT))
    import uvicorn
    from playwright.sync_api import sync_playwright

    from app.core.db import make_engine
    from app.main import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(make_engine(url)), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            sys.exit("the app did not start")
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": args.width, "height": 720})
            page.goto(f"{base}/login")
            page.fill('input[name="username"]', "admin")
            page.fill('input[name="password"]', "admin-demo")
            page.press('input[name="password"]', "Enter")
            page.wait_for_url(f"{base}/**")
            page.goto(f"{base}/reports?by=model")
            page.wait_for_selector("#outcome-table")
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
