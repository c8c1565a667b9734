"""QA regressions for the REST contract (interfaces.md): every error is JSON `{"detail": ...}`
naming the parameter, never a 500, and the same input gives the same answer on SQLite and
PostgreSQL."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Annotation, Label
from app.annotations.service import MAX_TIME_MS, resolve_taxonomy, save_annotation
from app.auth.service import create_token
from app.main import create_app
from app.runs.models import Event, Run
from tests.annotations.factories import make_run, make_user, raw_run
from tests.api.clients import bearer


@pytest.fixture
def api(engine):
    """(client, admin headers, annotator headers) on a database holding run r1."""
    with Session(engine) as s:
        make_run(s, "r1")
        admin = make_user(s, "qa-admin", "admin", password=None)
        ann = make_user(s, "qa-alice", "annotator", password=None)
        tokens = create_token(s, admin), create_token(s, ann)
        s.commit()
    client = TestClient(create_app(engine))
    return client, bearer(tokens[0]), bearer(tokens[1])


def _detail(res) -> str:
    body = res.json()
    assert set(body) == {"detail"}, body
    assert isinstance(body["detail"], str), body
    return body["detail"]


def test_run_list_rejects_unknown_status_and_alignment_naming_them(api):
    client, admin, _ = api
    res = client.get("/api/v1/runs?status=bogus", headers=admin)
    assert res.status_code == 422 and _detail(res).startswith("status:")
    res = client.get("/api/v1/runs?alignment=sideways", headers=admin)
    assert res.status_code == 422 and _detail(res).startswith("alignment:")
    res = client.get("/api/v1/runs?status=completed&alignment=competitive", headers=admin)
    assert res.status_code == 200 and [r["run_id"] for r in res.json()["items"]] == ["r1"]


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/annotations"])
def test_a_page_beyond_the_limit_is_422_not_500(api, path):
    client, admin, _ = api
    res = client.get(f"{path}?page=99999999999999999999", headers=admin)
    assert res.status_code == 422 and _detail(res).startswith("page:")


def test_nul_in_a_query_parameter_is_never_a_server_error(api, engine):
    client, admin, _ = api
    for url in ("/api/v1/runs?family=%00", "/api/v1/runs/a%00b", "/api/v1/annotations?run_id=a%00b",
                "/api/v1/taxonomies/a%00b"):
        res = client.get(url, headers=admin)
        if engine.dialect.name == "postgresql":  # PostgreSQL cannot compare text with a NUL in it
            assert res.status_code == 422 and "NUL character" in _detail(res), (url, res.text)
        else:
            assert res.status_code in (200, 404), (url, res.text)


def test_time_ms_beyond_the_column_is_422_and_the_total_saturates(api, engine):
    client, _, alice = api
    body = {"run_id": "r1", "labels": [], "time_ms": MAX_TIME_MS + 1}
    res = client.post("/api/v1/annotations", headers=alice, json=body)
    assert res.status_code == 422 and _detail(res).startswith("time_ms:")
    body = {"run_id": "r1", "labels": [{"mode": "DD1", "agent": "buyer_agent", "time_ms": 2**40}]}
    res = client.post("/api/v1/annotations", headers=alice, json=body)
    assert res.status_code == 422 and _detail(res).startswith("labels[0].time_ms:")
    for _ in range(2):  # two saves of the maximum: the stored total stops at the maximum
        res = client.post("/api/v1/annotations", headers=alice, json={"run_id": "r1", "time_ms": MAX_TIME_MS})
        assert res.status_code == 200, res.text
    assert res.json()["time_ms"] == MAX_TIME_MS


def test_a_note_with_nul_is_refused_on_every_backend(engine):
    with Session(engine) as s:
        run = make_run(s, "r1")
        user = make_user(s, "qa-bob", password=None)
        tax = resolve_taxonomy(s, None)
        with pytest.raises(ValueError, match="NUL"):
            save_annotation(s, user, run, tax, [{"mode": "DD1", "agent": "buyer_agent", "note": "a\x00b"}])
        with pytest.raises(ValueError, match="NUL"):
            save_annotation(s, user, run, tax, [], note="a\x00b")


def test_negative_bootstrap_seed_is_422_naming_seed(api):
    client, admin, _ = api
    res = client.get("/api/v1/agreement?seed=-1&n_boot=5", headers=admin)
    assert res.status_code == 422 and _detail(res).startswith("seed:")
    res = client.post("/api/v1/agreement/compute", headers=admin,
                      json={"coefficient": "percent", "seed": -5, "ratings": [[1, 2], [1, 1]]})
    assert res.status_code == 422 and _detail(res).startswith("seed:")


def test_a_body_that_is_not_json_says_so(api):
    client, _, alice = api
    res = client.post("/api/v1/annotations", headers={**alice, "Content-Type": "application/json"},
                      content=b"{bad")
    assert res.status_code == 422
    assert _detail(res).startswith("body: invalid JSON at character 1")


def _import(client, headers, runs):
    res = client.post("/api/v1/imports", headers={**headers, "Content-Type": "application/json"},
                      content=json.dumps(runs))
    assert res.status_code == 200, res.text
    return res.json()


def test_values_the_database_cannot_hold_reject_the_run_the_same_way_on_both_backends(api, engine):
    client, admin, _ = api
    hop = raw_run("qa-hop")
    hop["events"][1]["hop"] = 10**12
    long_id = raw_run("x" * 301)
    nul = raw_run("qa-nul")
    nul["events"][2]["content"] = "a\x00b"
    nul_meta = raw_run("qa-nul-meta")
    nul_meta["metadata"] = {"k": ["fine", {"deep\x00key": 1}]}
    ok = raw_run("qa-ok")
    out = _import(client, admin, [hop, long_id, nul, nul_meta, ok])
    assert (out["imported"], out["rejected"]) == (1, 4), out
    by_run = {e["location"].split(": run ")[1].split(": field ")[0]: e for e in out["errors"]}
    assert by_run["qa-hop"]["location"].endswith("field events[1].hop")
    assert "out of range" in by_run["qa-hop"]["message"]
    assert by_run["x" * 100 + "..."]["location"].endswith("field run_id")  # a long id is shortened
    assert "at most 300" in by_run["x" * 100 + "..."]["message"]
    assert by_run["qa-nul"]["location"].endswith("field events[2].content")
    assert by_run["qa-nul-meta"]["location"].endswith("field metadata.k[1].deep\x00key")
    with Session(engine) as s:  # nothing of a rejected run is stored
        assert sorted(s.exec(select(Run.run_id)).all()) == ["qa-ok", "r1"]
        assert s.exec(select(Event).join(Run, Run.id == Event.run_pk).where(Run.run_id == "qa-hop")).first() is None


def test_label_import_refuses_nul_and_overlong_judge_names_per_row_in_line_order(api, engine):
    client, admin, _ = api
    rows = ["annotator,run_id,mode,agent,evidence,taxonomy,note",
            "ext-ok,r1,DD1,buyer_agent,1,,fine",
            "y" * 195 + ",r1,DD1,buyer_agent,1,,",
            "ext-nul,r1,DD1,buyer_agent,1,,bad\x00note",
            "ext-bad-tax,r1,DD1,buyer_agent,1,nosuchtax,",
            "ext-bad-mode,r1,ZZ9,buyer_agent,1,,"]
    res = client.post("/api/v1/annotations/import", headers={**admin, "Content-Type": "text/csv"},
                      content="\n".join(rows).encode())
    out = res.json()
    assert res.status_code == 200 and (out["imported"], out["rejected"]) == (1, 4), out
    assert [e["location"] for e in out["errors"]] == [f"request-body.csv:{n}" for n in (3, 4, 5, 6)]
    assert out["errors"][0]["message"].startswith("annotator: 195 characters")
    assert out["errors"][1]["message"].startswith("note: contains a NUL character")
    with Session(engine) as s:
        assert len(s.exec(select(Label).join(Annotation)).all()) == 1


def test_run_list_shows_each_runs_own_scenario_title(api):
    client, admin, _ = api
    other = raw_run("r2")
    other["scenario"]["title"] = "Another title for the same scenario id"
    assert _import(client, admin, [other])["imported"] == 1
    items = client.get("/api/v1/runs", headers=admin).json()["items"]
    titles = {i["run_id"]: i["title"] for i in items}
    assert titles == {"r1": "A deal", "r2": "Another title for the same scenario id"}
    assert client.get("/api/v1/runs/r2", headers=admin).json()["scenario"]["title"] == titles["r2"]


def test_openapi_documents_the_upload_bodies(api):
    client, _, _ = api
    paths = client.get("/openapi.json").json()["paths"]
    imports = paths["/api/v1/imports"]["post"]
    assert set(imports["requestBody"]["content"]) == {"application/json", "application/x-ndjson",
                                                      "multipart/form-data"}
    assert {"403", "413", "422"} <= set(imports["responses"])
    labels = paths["/api/v1/annotations/import"]["post"]
    assert set(labels["requestBody"]["content"]) == {"text/csv", "application/x-ndjson", "multipart/form-data"}
    status = next(p for p in paths["/api/v1/runs"]["get"]["parameters"] if p["name"] == "status")
    assert status["schema"]["anyOf"][0]["enum"] == ["completed", "failed", "timeout", "error"]
