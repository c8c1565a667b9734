"""Errors name what is wrong and where (issue 23, row 19): a lone surrogate is a rejected run naming
its field (it answered a raw `UnicodeEncodeError`), and errors inside a zip sent as a raw body
name the zip and its member (they said `request-body.json`). SQLite and PostgreSQL."""
from __future__ import annotations

import io
import json
import zipfile

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token
from app.main import create_app
from tests.annotations.factories import make_user, raw_run


def _client(engine):
    with Session(engine) as s:
        headers = {"Authorization": f"Bearer {create_token(s, make_user(s, 'msg-admin', 'admin'), 't')}"}
        s.commit()
    return TestClient(create_app(engine)), headers


def _surrogate_run(run_id: str) -> bytes:
    run = raw_run(run_id)
    run["events"][2]["content"] = "before \ud800 after"  # json.dumps writes it as the escape \ud800
    return json.dumps(run).encode()


def test_a_lone_surrogate_is_a_located_rejection(engine):
    client, headers = _client(engine)
    body = _surrogate_run("sur-1") + b"\n" + json.dumps(raw_run("sur-ok")).encode() + b"\n"
    res = client.post("/api/v1/imports", content=body, headers={**headers, "Content-Type": "application/x-ndjson"})
    assert res.status_code == 200
    out = res.json()
    assert (out["imported"], out["rejected"]) == (1, 1), out
    (err,) = out["errors"]
    assert err["location"] == "request-body.jsonl:1: run sur-1: field events[2].content", err
    assert "lone surrogate (\\ud800)" in err["message"], err
    assert "UnicodeEncodeError" not in json.dumps(out)
    assert client.get("/api/v1/runs/sur-1", headers=headers).status_code == 404  # nothing half written


def test_errors_in_a_raw_zip_body_name_the_zip_member(engine):
    client, headers = _client(engine)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("runs/good.jsonl", json.dumps(raw_run("zip-ok")) + "\n")
        z.writestr("runs/bad.jsonl", '{"run_id": "x", "events": \n')
        z.writestr("runs/sur.jsonl", _surrogate_run("zip-sur").decode() + "\n")
    for ctype in ("application/zip", "application/json"):  # the zip is recognised by its bytes too
        res = client.post("/api/v1/imports?replace=true", content=buf.getvalue(),
                          headers={**headers, "Content-Type": ctype})
        assert res.status_code == 200
        locations = sorted(e["location"] for e in res.json()["errors"])
        assert locations[0].startswith("request-body.zip/runs/bad.jsonl:1"), locations
        assert locations[1].startswith("request-body.zip/runs/sur.jsonl:1"), locations
        assert "request-body.json" not in json.dumps(res.json())
