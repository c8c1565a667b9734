"""A live app for browser tests and the screenshot script: a fresh SQLite database, uvicorn in a
background thread on 127.0.0.1 and a free port, and Debian's chromium driven by Playwright."""
from __future__ import annotations

import atexit
import shutil
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PASSWORD = "e2e-password-123"


def chromium_path() -> str:
    """Path of the system chromium; raises RuntimeError saying how to install it."""
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        raise RuntimeError("chromium is not installed: run `apt-get update && apt-get install -y chromium` "
                           "(or `make chromium`)")
    return path


def launch_browser(playwright: Any):
    """Launch headless chromium (never a Playwright-downloaded browser)."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)


#: per process: a migrated database with the built-in taxonomies of each taxonomy folder, copied
#: by `make_database` (an upgrade and a sync cost 0.6-1.3 s on a busy machine, a copy 0.01 s)
_TEMPLATES: dict[str, Path] = {}


def make_database(path: Path) -> Engine:
    """Create a migrated SQLite database at `path` with the built-in taxonomies; returns its engine.

    The first one in a process is made by `upgrade` and `sync_builtin`; later ones are copies of
    it (SQLite's backup API): the same file those two would make."""
    import tempfile

    from app.core.config import get_settings
    from app.core.db import make_engine
    from app.core.migrate import upgrade
    from app.taxonomies.service import sync_builtin

    path = Path(path)
    url = f"sqlite:///{path}"
    tax_dir = str(get_settings().taxonomy_dir)
    template = _TEMPLATES.get(tax_dir)
    if template is not None and template.exists() and not path.exists():
        _copy(template, path)
        return make_engine(url)
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        sync_builtin(s, tax_dir)
        s.commit()
    if template is None:
        folder = tempfile.mkdtemp(prefix="a2a-template-")
        atexit.register(shutil.rmtree, folder, True)
        template = Path(folder) / "template.db"
        _copy(path, template)
        _TEMPLATES[tax_dir] = template
    return engine


def _copy(src: Path, dst: Path) -> None:
    import sqlite3

    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


class _Item:
    __slots__ = ("error", "run", "source")

    def __init__(self, run: dict):
        self.run, self.error, self.source = run, None, "e2e"


def load_runs(engine: Engine, runs: Iterable[dict]) -> None:
    """Store canonical runs (audits become judge annotations); raises if any is rejected."""
    from app.ingest.loader import _after_store_default, load_items

    summary = load_items(engine, (_Item(r) for r in runs), after_store=_after_store_default)
    if summary.rejected:
        raise RuntimeError(f"demo runs rejected: {summary.errors[:3]}")


def add_annotator(engine: Engine, name: str, run_ids: list[str], role: str = "annotator") -> None:
    """Create a user with PASSWORD and assign `run_ids` (in this order) under a2-failures latest."""
    from app.annotations.models import Assignment
    from app.auth.service import create_user, set_password
    from app.runs.service import get_run
    from app.taxonomies.service import latest

    with Session(engine) as s:
        user = create_user(s, name, role)
        set_password(s, user, PASSWORD)
        tax = latest(s, "a2-failures")
        for pos, rid in enumerate(run_ids):
            s.add(Assignment(run_pk=get_run(s, rid).id, user_id=user.id, taxonomy_pk=tax.id, position=pos,
                             batch="e2e"))
        s.commit()


class LiveServer:
    """`with LiveServer(engine) as base_url:` serves create_app(engine) until the block ends."""

    def __init__(self, engine: Engine):
        import uvicorn

        from app.main import create_app

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(create_app(engine), host="127.0.0.1", port=self.port, log_level="warning",
                                access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the app did not start")
            time.sleep(0.05)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def log_in(page: Any, base_url: str, name: str) -> None:
    """Log in through the login form and wait for the queue page."""
    page.goto(f"{base_url}/login")
    page.fill('input[name="username"]', name)
    page.fill('input[name="password"]', PASSWORD)
    page.press('input[name="password"]', "Enter")
    page.wait_for_url(f"{base_url}/")


def wait_labels_loaded(page: Any) -> None:
    """Wait until labeling.js has loaded the caller's annotation (or found none)."""
    page.wait_for_function("() => window.A2Label && window.A2Label.state.loaded")
