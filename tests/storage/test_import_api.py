"""POST /api/v1/imports, GET /api/v1/runs, GET /api/v1/runs/{id} on both backends."""
from __future__ import annotations

import io
import json
import zipfile

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.service import create_token, create_user
from app.demo.generator import generate_runs
from app.main import create_app


@pytest.fixture
def client(engine):
    with Session(engine) as s:
        admin = create_user(s, "root", "admin", "password123")
        ann = create_user(s, "ann", "annotator", "password123")
        tokens = {"admin": create_token(s, admin), "annotator": create_token(s, ann)}
        s.commit()
    c = TestClient(create_app(engine))
    c.tokens = tokens
    return c


def auth(c, who="admin"):
    return {"Authorization": f"Bearer {c.tokens[who]}"}


def runs(n=4, seed=11):
    return [d.run for d in generate_runs(n, seed)]


def test_import_json_array_then_get_in_canonical_shape(client):
    rs = runs()
    r = client.post("/api/v1/imports", json=rs, headers=auth(client))
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["imported"], body["unchanged"], body["rejected"], body["errors"]) == (4, 0, 0, [])
    got = client.get(f"/api/v1/runs/{rs[2]['run_id']}", headers=auth(client))
    assert got.status_code == 200 and got.json() == rs[2]
    again = client.post("/api/v1/imports", json=rs, headers=auth(client)).json()
    assert (again["imported"], again["unchanged"]) == (0, 4)


def test_import_ndjson_with_a_bad_line(client):
    rs = runs(3)
    bad = dict(rs[1], run_id="broken")
    del bad["scenario"]
    body = "\n".join(json.dumps(x) for x in [rs[0], bad, rs[2]])
    r = client.post("/api/v1/imports", content=body.encode(), headers={**auth(client),
                    "Content-Type": "application/x-ndjson"})
    out = r.json()
    assert (out["imported"], out["rejected"]) == (2, 1)
    assert ":2" in out["errors"][0]["location"] and "scenario" in (out["errors"][0]["location"] + out["errors"][0]["message"])
    assert client.get("/api/v1/runs/broken", headers=auth(client)).status_code == 404


def test_import_multipart_zip(client):
    rs = runs(3)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for r in rs:
            z.writestr(f"runs/{r['run_id']}.json", json.dumps(r))
    r = client.post("/api/v1/imports", files={"file": ("runs.zip", buf.getvalue(), "application/zip")},
                    headers=auth(client))
    assert r.status_code == 200, r.text
    assert r.json()["imported"] == 3


def test_import_requires_token_and_role(client):
    assert client.post("/api/v1/imports", json=runs(1)).status_code == 401
    assert client.post("/api/v1/imports", json=runs(1), headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.post("/api/v1/imports", json=runs(1), headers=auth(client, "annotator")).status_code == 403


def test_list_runs_filters_and_pages(client):
    rs = runs(10, seed=2)
    client.post("/api/v1/imports", json=rs, headers=auth(client))
    page = client.get("/api/v1/runs?page=2&page_size=3", headers=auth(client)).json()
    assert page["total"] == 10 and len(page["items"]) == 3
    assert [i["run_id"] for i in page["items"]] == sorted(r["run_id"] for r in rs)[3:6]
    fam = rs[0]["scenario"]["family"]
    by_family = client.get(f"/api/v1/runs?family={fam}&page_size=100", headers=auth(client)).json()
    assert by_family["total"] == sum(1 for r in rs if r["scenario"]["family"] == fam)
    model = rs[0]["agents"][0]["model"]
    by_model = client.get(f"/api/v1/runs?model={model}&page_size=100", headers=auth(client)).json()
    assert by_model["total"] == sum(1 for r in rs if any(a["model"] == model for a in r["agents"]))


def test_healthz_needs_no_auth(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_annotators_do_not_see_seeded_truth_or_judges_while_blind(client):
    rs = [r for r in runs(30, seed=8) if r["audits"] and r["metadata"].get("demo_truth")][:1]
    client.post("/api/v1/imports", json=rs, headers=auth(client))
    run_id = rs[0]["run_id"]
    as_admin = client.get(f"/api/v1/runs/{run_id}", headers=auth(client)).json()
    as_annotator = client.get(f"/api/v1/runs/{run_id}", headers=auth(client, "annotator")).json()
    assert as_admin == rs[0]
    assert "demo_truth" not in as_annotator["metadata"] and as_annotator["audits"] == []
    assert as_annotator["events"] == rs[0]["events"]


def test_cookie_authenticated_import_needs_csrf_header(client, engine):
    page = client.get("/login")
    import re

    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    r = client.post("/login", data={"username": "root", "password": "password123", "csrf_token": token, "next": "/"},
                    follow_redirects=False)
    assert r.status_code == 303
    refused = client.post("/api/v1/imports", json=runs(1))
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    home = client.get("/")
    csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', home.text).group(1)
    ok = client.post("/api/v1/imports", json=runs(1), headers={"X-CSRF-Token": csrf})
    assert ok.status_code == 200 and ok.json()["imported"] == 1
