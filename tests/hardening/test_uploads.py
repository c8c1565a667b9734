"""Uploads: streamed to a temporary file under the size limit, no database connection held while
the body arrives, stalled bodies refused, temporary folders of dead processes removed; hostile
labels input answered 4xx; ASCII-only numeric parameters."""
from __future__ import annotations

import asyncio
import json
import os
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.core.config import get_settings
from app.main import create_app
from tests.annotations.factories import make_user
from tests.hardening import hostile

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def settings_env(monkeypatch):
    """Set environment settings for one test (get_settings is cached)."""
    def set_(**kw):
        for k, v in kw.items():
            monkeypatch.setenv(k.upper(), str(v))
        get_settings.cache_clear()
    yield set_
    monkeypatch.undo()
    get_settings.cache_clear()


def _token(engine, role="admin") -> str:
    from app.auth.service import create_token

    with Session(engine) as s:
        u = make_user(s, f"u-{role}", role)
        tok = create_token(s, u, "t")
        s.commit()
    return tok


def _hdr(tok, ctype="application/json"):
    return {"Authorization": f"Bearer {tok}", "Content-Type": ctype}


def test_upload_over_the_limit_is_refused_while_streaming(engine, settings_env):
    settings_env(max_upload_bytes=100_000)
    tok = _token(engine)
    sent = []

    async def body():
        for _ in range(1000):  # would be 64 MB; refused after ~100 KB
            sent.append(1)
            yield b" " * 65536

    async def go():
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post("/api/v1/imports", content=body(), headers=_hdr(tok))

    r = asyncio.run(go())
    assert r.status_code == 413 and "MAX_UPLOAD_BYTES" in r.json()["detail"]
    assert len(sent) < 10  # stopped reading at the limit
    c = TestClient(create_app(engine))
    r = c.post("/api/v1/imports", content=b"[]", headers={**_hdr(tok), "Content-Length": "999999999"})
    assert r.status_code == 413  # a declared length over the limit: refused before reading


def test_slow_upload_holds_no_pooled_connection(engine, db_url, settings_env):
    """One connection in the pool: while an upload's body trickles in, other API requests
    are still served (the upload's authentication session was closed before the body)."""
    settings_env(upload_idle_timeout=5)
    from sqlmodel import create_engine

    eng = create_engine(db_url, pool_size=1, max_overflow=0, pool_timeout=2,
                        connect_args={"check_same_thread": False})
    tok = _token(engine)
    app = create_app(eng)
    gate = asyncio.Event()

    async def slow_body():
        yield b"["
        await gate.wait()
        yield json.dumps(hostile.run("slow-1")).encode() + b"]"

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as c:
            upload = asyncio.create_task(c.post("/api/v1/imports", content=slow_body(), headers=_hdr(tok)))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            other = await c.get("/api/v1/runs", headers=_hdr(tok))
            waited = time.monotonic() - t0
            gate.set()
            return other, waited, await upload

    other, waited, up = asyncio.run(go())
    eng.dispose()
    assert other.status_code == 200 and waited < 1.5, (other.status_code, waited)
    assert up.status_code == 200 and up.json()["imported"] == 1


def test_stalled_upload_gets_408(engine, settings_env):
    settings_env(upload_idle_timeout=0.3)
    tok = _token(engine)

    async def stall():
        yield b"["
        await asyncio.sleep(5)
        yield b"]"

    async def go():
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as c:
            return await c.post("/api/v1/imports", content=stall(), headers=_hdr(tok))

    t0 = time.monotonic()
    r = asyncio.run(go())
    assert r.status_code == 408 and "UPLOAD_IDLE_TIMEOUT" in r.json()["detail"]
    assert time.monotonic() - t0 < 4


def test_multipart_upload_streams_to_disk_and_leaves_nothing(engine, settings_env, tmp_path):
    settings_env(upload_dir=tmp_path / "up")
    tok = _token(engine)
    c = TestClient(create_app(engine))
    body = "\n".join(json.dumps(hostile.run(f"m{i}")) for i in range(3)).encode()
    r = c.post("/api/v1/imports", files={"file": ("runs.jsonl", body, "application/x-ndjson")},
               headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code == 200 and r.json()["imported"] == 3, r.text
    leftovers = [p for p in (tmp_path / "up").rglob("*") if p.is_file()]
    assert leftovers == []
    r = c.post("/api/v1/imports", files={"other": ("x", b"[]")}, headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code == 422 and "field named 'file'" in r.json()["detail"]


def test_upload_folders_of_dead_processes_are_removed_at_startup(engine, settings_env, tmp_path):
    settings_env(upload_dir=tmp_path / "up")
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    left = tmp_path / "up" / f"pid-{dead_pid}" / "upload-x"
    left.mkdir(parents=True)
    (left / "body").write_bytes(b"half an upload")
    alive = tmp_path / "up" / f"pid-{os.getppid()}"
    alive.mkdir()
    create_app(engine)
    assert not (tmp_path / "up" / f"pid-{dead_pid}").exists()
    assert alive.exists()  # a running process's folder is kept


def test_hostile_bodies_answer_4xx_or_report_rejections(engine):
    tok = _token(engine)
    c = TestClient(create_app(engine), raise_server_exceptions=False)
    cases = {
        "long int": hostile.long_int_object(5000),
        "deep array": hostile.deep_array(20_000),
        "deep object": hostile.deep_run_jsonl_line(20_000),
        "nested zips": hostile.nested_zip(3),
    }
    for name, body in cases.items():
        ctype = "application/zip" if body[:2] == b"PK" else "application/json"
        r = c.post("/api/v1/imports", content=body, headers=_hdr(tok, ctype))
        assert r.status_code == 200, (name, r.status_code, r.text[:300])
        out = r.json()
        assert out["rejected"] >= 1 and out["errors"], (name, out)
    assert c.get("/healthz").status_code == 200


def test_zip_limits_across_nested_archives(engine, settings_env):
    settings_env(max_zip_members=50, max_zip_nesting=1, max_zip_bytes=1_000_000)
    tok = _token(engine)
    c = TestClient(create_app(engine))

    def post(body):
        r = c.post("/api/v1/imports", content=body, headers=_hdr(tok, "application/zip"))
        assert r.status_code == 200, r.text
        return " | ".join(e["message"] for e in r.json()["errors"])

    assert "MAX_ZIP_MEMBERS" in post(hostile.many_members(60))
    assert "MAX_ZIP_NESTING" in post(hostile.nested_zip(3))
    assert "MAX_ZIP_BYTES" in post(hostile.zip_bomb(3))
    r = c.post("/api/v1/imports", content=hostile.nested_zip(1), headers=_hdr(tok, "application/zip"))
    assert r.json()["imported"] == 1  # one level of nesting is allowed


def test_hostile_labels_input_answers_4xx_not_500(engine):
    tok = _token(engine, "reviewer")
    c = TestClient(create_app(engine), raise_server_exceptions=False)
    jl = b'{"annotator": "x", "run_id": "r", "mode": "none", "confidence": ' + b"9" * 5000 + b"}\n" + \
        json.dumps({"annotator": "x", "run_id": "r", "mode": "none", "confidence": 10**400}).encode() + b"\n" + \
        b'{"annotator": "y", "run_id": "r", "mode": "none", "note": ' + hostile.deep(5000) + b"}\n"
    r = c.post("/api/v1/annotations/import", content=jl, headers=_hdr(tok, "application/x-ndjson"))
    assert r.status_code < 500, r.text[:300]
    assert r.status_code == 200 and r.json()["rejected"] >= 1
    text = " ".join(e["location"] + " " + e["message"] for e in r.json()["errors"])
    assert "MAX_INT_DIGITS" in text and "MAX_JSON_DEPTH" in text and "request-body.jsonl:3" in text
    csv_body = b"annotator,run_id,mode,note\nx,r,none," + b"n" * 200_000 + b"\n"
    r = c.post("/api/v1/annotations/import", content=csv_body, headers=_hdr(tok, "text/csv"))
    assert r.status_code < 500, r.text[:300]
    huge = b"annotator,run_id,mode,note\nx,r,none," + b"n" * (11 << 20) + b"\n"
    r = c.post("/api/v1/annotations/import", content=huge, headers=_hdr(tok, "text/csv"))
    assert r.status_code == 200 and r.json()["rejected"] == 1, r.text[:300]
    (err,) = r.json()["errors"]
    assert err["location"] == "request-body.csv:2" and "field larger than field limit" in err["message"]


@pytest.mark.parametrize("path", [
    "/api/v1/taxonomies/%C2%B9", "/api/v1/queue?taxonomy=%C2%B3", "/api/v1/queue?taxonomy=a2-failures@%C2%B2",
    "/api/v1/progress?taxonomy=%C2%B3", "/api/v1/agreement?taxonomy=%C2%B3", "/api/v1/reports/outcomes?taxonomy=%C2%B3",
    "/api/v1/queue?taxonomy=99999999999999999999999999", "/queue?taxonomy=%C2%B3", "/agreement?taxonomy=%C2%B3",
    "/reports?taxonomy=%C2%B3", "/admin/progress?taxonomy=%C2%B3",
])
def test_superscript_digits_are_not_numbers(engine, path):
    tok = _token(engine)
    c = TestClient(create_app(engine), raise_server_exceptions=False)
    r = c.get(path, headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code < 500, (path, r.status_code, r.text[:200])


def test_other_request_bodies_are_bounded_too(engine, settings_env):
    settings_env(max_request_bytes=64 * 1024)
    c = TestClient(create_app(engine))
    r = c.post("/login", content=b"username=x&password=" + b"y" * 200_000,
               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 413 and "MAX_REQUEST_BYTES" in r.text

    async def chunks():
        for _ in range(100):
            yield b"a" * 4096

    async def go():
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as ac:
            return await ac.post("/login", content=chunks(), headers={"Content-Type": "application/x-www-form-urlencoded"})

    r = asyncio.run(go())
    assert r.status_code == 413
    assert c.get("/healthz").status_code == 200


def test_json_api_bodies_are_parsed_within_the_limits(engine):
    tok = _token(engine)
    c = TestClient(create_app(engine), raise_server_exceptions=False)
    h = _hdr(tok)
    deep = b'{"run_id": "x", "labels": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    r = c.post("/api/v1/annotations", content=deep, headers=h)
    assert r.status_code == 422 and "field labels" in r.json()["detail"] and "MAX_JSON_DEPTH" in r.json()["detail"]
    r = c.post("/api/v1/annotations", content=b'{"run_id": "x", "time_ms": 1' + b"0" * 5000 + b"}", headers=h)
    assert r.status_code == 422 and "field time_ms" in r.json()["detail"]
    r = c.post("/api/v1/annotations", content=b'{"run_id": "x", "note": "\\xff"}'.replace(b"\\xff", b"\xff"),
               headers=h)
    assert r.status_code == 422 and "UTF-8" in r.json()["detail"]
    r = c.post("/api/v1/annotations", content=b'{"run_id": ', headers=h)
    assert r.status_code == 422 and "invalid JSON" in r.json()["detail"]
