"""A reader written as a plugin in a temporary package, installed into the test venv's path with
an entry point in group ``a2annotate.readers``: found through `importlib.metadata.entry_points`
(nothing registers it by hand) and used by `import`, `inspect`, the REST upload and the OTLP endpoint."""
from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token, create_user
from app.ingest.readers.base import ENTRY_POINT_GROUP
from app.ingest.registry import reload_registry
from app.main import create_app
from app.runs.service import get_run, to_canonical
from tests.e2e.live import LiveServer

HERE = Path(__file__).resolve().parent
LOG = "#chatlog plug-1\ncustomer -> helper: My parcel is late.\nhelper -> customer: I will check the tracking.\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A package dir with `a2a_chatlog_plugin` and its dist-info (METADATA + entry_points.txt),
    on sys.path: what `pip install` leaves in site-packages."""
    root = tmp_path_factory.mktemp("site")
    pkg = root / "a2a_chatlog_plugin"
    pkg.mkdir()
    shutil.copy(HERE / "plugin_pkg" / "chatlog_reader.py", pkg / "__init__.py")
    dist = root / "a2a_chatlog_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: a2a-chatlog-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nchatlog = a2a_chatlog_plugin:ChatlogReader\n")
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    reload_registry()
    yield root
    sys.path.remove(str(root))
    sys.modules.pop("a2a_chatlog_plugin", None)
    importlib.invalidate_caches()
    reload_registry()


def _cli(args, db_url, site):
    env = dict(os.environ, DATABASE_URL=db_url, PYTHONPATH=os.pathsep.join([str(site), os.getcwd()]))
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_the_entry_point_is_found_and_the_registry_holds_it(site):
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert eps["chatlog"].value == "a2a_chatlog_plugin:ChatlogReader"
    reg = reload_registry()
    entry = reg.entry("chatlog")
    assert not entry.builtin and "a2a-chatlog-plugin" in entry.origin
    assert type(entry.reader).__module__ == "a2a_chatlog_plugin"


def test_import_and_inspect_use_the_plugin(site, tmp_path, db_url):
    log = tmp_path / "talk.txt"
    log.write_text(LOG)
    db = f"sqlite:///{tmp_path / 'cli.db'}" if db_url.startswith("sqlite") else db_url
    assert _cli(["db", "upgrade"], db, site).returncode == 0
    ins = _cli(["inspect", str(log)], db, site)
    assert ins.returncode == 0, ins.stderr
    assert "read by 'chatlog' (starts with #chatlog)" in ins.stdout and "run plug-1" in ins.stdout
    assert "agents: helper (1)" in ins.stdout and "principals: customer (1)" in ins.stdout
    r = _cli(["import", str(log)], db, site)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("imported 1, unchanged 0, rejected 0")
    forced = _cli(["import", "--format", "chatlog", str(log)], db, site)
    assert forced.stdout.strip().splitlines()[-1].startswith("imported 0, unchanged 1")
    # without the plugin on the path, the same file is refused naming the readers tried
    bare = subprocess.run([sys.executable, "-m", "app.cli", "import", str(log)], capture_output=True, text=True,
                          env=dict(os.environ, DATABASE_URL=db), timeout=120)
    assert bare.returncode == 1 and "no reader takes this file" in bare.stderr and "chatlog" not in bare.stderr


def test_the_rest_upload_uses_the_plugin(site, engine):
    with Session(engine) as s:
        admin = create_user(s, "root", "admin", "password123")
        token = create_token(s, admin)
        s.commit()
    client = TestClient(create_app(engine))
    r = client.post("/api/v1/imports", headers={"Authorization": f"Bearer {token}"},
                    files={"file": ("talk.txt", LOG.encode(), "text/plain")})
    assert r.status_code == 200, r.text
    assert r.json()["imported"] == 1, r.json()
    with Session(engine) as s:
        run = to_canonical(s, get_run(s, "plug-1"))
    assert [(e["actor"], e["recipients"], e["content"]) for e in run["events"]] == [
        ("customer", ["helper"], "My parcel is late."), ("helper", ["customer"], "I will check the tracking.")]
    assert [a["id"] for a in run["agents"]] == ["helper"] and run["principals"][0]["name"] == "The customer"


def _span(i: int, speaker: str, to: str, text: str) -> dict:
    attrs = [{"key": "chatlog.run", "value": {"stringValue": "plug-otlp"}},
             {"key": "chatlog.speaker", "value": {"stringValue": speaker}},
             {"key": "chatlog.to", "value": {"stringValue": to}},
             {"key": "chatlog.text", "value": {"stringValue": text}}]
    return {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": f"eee19b7ec3c1b17{i}", "name": "turn",
            "kind": 1, "startTimeUnixNano": str(1_700_000_000_000_000_000 + i), "endTimeUnixNano":
            str(1_700_000_000_000_000_100 + i), "attributes": attrs}


def test_the_otlp_endpoint_uses_the_plugin_and_stores_through_the_loader(site, engine):
    with Session(engine) as s:
        admin = create_user(s, "collector", "reviewer", "password123")
        token = create_token(s, admin)
        s.commit()
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "chatlog"}, "spans": [
        _span(1, "customer", "helper", "Where is it?"), _span(2, "helper", "customer", "On its way.")]}]}]}
    from app.capture.views import _reset_pool

    # the OTLP decoding workers are processes that load the readers when they start: ones started
    # by an earlier test of this process predate the plugin (a server is restarted after an install)
    _reset_pool()
    with LiveServer(engine) as url:
        r = httpx.post(f"{url}/v1/traces", content=json.dumps(doc),
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}, timeout=60)
        assert r.status_code == 200, r.text
        got = httpx.get(f"{url}/api/v1/runs/plug-otlp", headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert got.status_code == 200, got.text
    events = got.json()["events"]
    assert [(e["actor"], e["recipients"], e["content"]) for e in events] == [
        ("customer", ["helper"], "Where is it?"), ("helper", ["customer"], "On its way.")]
