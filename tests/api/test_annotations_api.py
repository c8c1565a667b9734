"""REST: annotations (create, list under blind mode, mine), queue, assignments, progress, label import,
taxonomies, CSRF on cookie-authenticated posts, OpenAPI."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.annotations.blind import set_revealed
from app.auth.service import create_token
from app.main import create_app
from tests.annotations.factories import make_run, make_user
from tests.api.clients import bearer, login

LABEL = {"mode": "DD3", "agent": "buyer_agent", "principals": ["buyer"], "evidence": [2], "confidence": 0.7,
         "note": "left out the budget", "time_ms": 900}


@pytest.fixture
def api(engine):
    with Session(engine) as s:
        make_run(s, "r1", audits=[{"source": "judge-l2", "mode": "VF1", "agent": "buyer_agent", "evidence": [1]}])
        make_run(s, "r2")
        make_run(s, "r3", family="legal")
        tokens = {}
        for name, role in (("alice", "annotator"), ("bob", "annotator"), ("rita", "reviewer"), ("adam", "admin")):
            user = make_user(s, name, role, password=None)
            tokens[name] = bearer(create_token(s, user))
        s.commit()
    client = TestClient(create_app(engine))
    return client, tokens


def _post(client, headers, **body):
    return client.post("/api/v1/annotations", json={"run_id": "r1", **body}, headers=headers)


def test_create_update_and_mine(api):
    client, t = api
    res = client.get("/api/v1/annotations/mine", params={"run_id": "r1"}, headers=t["alice"])
    assert res.status_code == 404
    res = _post(client, t["alice"], labels=[LABEL], status="draft", time_ms=1000)
    assert res.status_code == 200, res.text
    body = res.json()
    assert (body["run_id"], body["annotator"], body["status"], body["time_ms"]) == ("r1", "alice", "draft", 1000)
    assert body["taxonomy"]["key"] == "a2-failures" and body["submitted_at"] is None
    assert body["labels"] == [{k: LABEL[k] for k in ("mode", "agent", "principals", "evidence", "note",
                                                     "confidence", "time_ms")}]
    res = _post(client, t["alice"], taxonomy="a2-failures", labels=[LABEL, dict(LABEL, mode="cf1")],
                status="submitted", time_ms=500)
    body2 = res.json()
    assert res.status_code == 200 and body2["id"] == body["id"]
    assert body2["status"] == "submitted" and body2["submitted_at"] and body2["time_ms"] == 1500
    assert [lb["mode"] for lb in body2["labels"]] == ["DD3", "CF1"]
    mine = client.get("/api/v1/annotations/mine", params={"run_id": "r1", "taxonomy": "a2-failures"},
                      headers=t["alice"]).json()
    assert mine == body2
    assert client.get("/api/v1/annotations/mine", params={"run_id": "r1", "taxonomy": "mast"},
                      headers=t["alice"]).status_code == 404


@pytest.mark.parametrize("body, status, detail", [
    ({"labels": [LABEL, dict(LABEL, agent="x")], "status": "submitted"}, 422,
     "labels[1].agent: 'x' is not an agent of run r1"),
    ({"labels": [dict(LABEL, confidence=2)]}, 422, "labels[0].confidence: Input should be less than or equal to 1"),
    ({"labels": [dict(LABEL, evidence=[77])]}, 422, "labels[0].evidence[0]: 77 is not an event seq of run r1"),
    ({"labels": [LABEL], "no_failure": True, "status": "submitted"}, 422, "no_failure: "),
    ({"labels": [], "status": "submitted"}, 422, "labels: a submitted annotation needs at least one label"),
    ({"labels": [LABEL], "status": "done"}, 422, "status: Input should be 'draft' or 'submitted'"),
    ({"labels": [dict(LABEL, colour="red")]}, 422, "labels[0].colour: Extra inputs are not permitted"),
    ({"labels": [LABEL], "taxonomy": "a2-failures@99"}, 422, "taxonomy: unknown taxonomy 'a2-failures@99'"),
    ({"labels": [LABEL], "run_id": "nope"}, 404, "no run 'nope'"),
])
def test_bad_input_names_the_field(api, body, status, detail):
    client, t = api
    res = client.post("/api/v1/annotations", json={"run_id": "r1", **body}, headers=t["alice"])
    assert res.status_code == status
    assert isinstance(res.json()["detail"], str) and res.json()["detail"].startswith(detail), res.json()


def test_missing_run_id_is_a_string_detail(api):
    client, t = api
    res = client.post("/api/v1/annotations", json={"labels": []}, headers=t["alice"])
    assert res.status_code == 422 and res.json() == {"detail": "run_id: Field required"}


def test_blind_mode_on_list_and_run_filter(api, engine):
    client, t = api
    assert _post(client, t["alice"], labels=[LABEL], status="submitted").status_code == 200
    assert _post(client, t["bob"], no_failure=True, status="submitted").status_code == 200

    def names(who, **params):
        res = client.get("/api/v1/annotations", params=params, headers=t[who])
        assert res.status_code == 200, res.text
        return sorted(a["annotator"] for a in res.json()["items"])

    assert names("bob") == ["bob"]
    assert names("alice", run_id="r1") == ["alice"]
    assert client.get("/api/v1/annotations", params={"annotator": "alice"}, headers=t["bob"]).status_code == 403
    assert names("rita") == ["alice", "bob", "judge:judge-l2"]
    assert names("adam", annotator="judge:judge-l2") == ["judge:judge-l2"]
    assert names("rita", status="draft") == []
    # the run list's annotated_by filter is blind too
    runs = client.get("/api/v1/runs", params={"annotated_by": "alice"}, headers=t["bob"])
    assert runs.status_code == 403
    own = client.get("/api/v1/runs", params={"annotated_by": "bob"}, headers=t["bob"]).json()
    assert [r["run_id"] for r in own["items"]] == ["r1"]
    by_rev = client.get("/api/v1/runs", params={"annotated_by": "alice"}, headers=t["rita"]).json()
    assert [r["run_id"] for r in by_rev["items"]] == ["r1"]
    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert names("bob") == ["alice", "bob", "judge:judge-l2"]
    assert client.get("/api/v1/runs", params={"annotated_by": "alice"}, headers=t["bob"]).status_code == 200


def test_queue_assignments_and_progress(api):
    client, t = api
    body = {"filters": {"family": "commerce"}, "annotators": ["alice", "bob"], "k": 2, "seed": 3}
    assert client.post("/api/v1/assignments", json=body, headers=t["rita"]).status_code == 403
    assert client.post("/api/v1/assignments", json=body, headers=t["alice"]).status_code == 403
    res = client.post("/api/v1/assignments", json=dict(body, k=3), headers=t["adam"])
    assert res.status_code == 422 and res.json()["detail"].startswith("k: k=3 annotators per run, but only 2")
    res = client.post("/api/v1/assignments", json=body, headers=t["adam"])
    assert res.status_code == 200, res.text
    assert (res.json()["runs_matching"], res.json()["created"]) == (2, 4)
    assert res.json()["per_annotator"] == {"alice": 2, "bob": 2}
    q = client.get("/api/v1/queue", headers=t["alice"]).json()
    assert (q["assigned"], q["submitted"], q["remaining"]) == (2, 0, 2)
    order = [i["run_id"] for i in q["items"]]
    assert sorted(order) == ["r1", "r2"]
    for expected in order:
        nxt = client.get("/api/v1/queue/next", headers=t["alice"])
        assert nxt.status_code == 200 and nxt.json()["run_id"] == expected
        res = client.post("/api/v1/annotations", json={"run_id": expected, "no_failure": True, "status": "submitted"},
                          headers=t["alice"])
        assert res.status_code == 200
    empty = client.get("/api/v1/queue/next", headers=t["alice"])
    assert empty.status_code == 404 and empty.json() == {"detail": "queue empty"}
    assert client.get("/api/v1/queue", headers=t["alice"]).json()["remaining"] == 0
    assert client.get("/api/v1/progress", headers=t["alice"]).status_code == 403
    prog = client.get("/api/v1/progress", headers=t["rita"]).json()
    rows = {r["username"]: r for r in prog["annotators"]}
    assert (rows["alice"]["submitted"], rows["alice"]["remaining"]) == (2, 0)
    assert (rows["bob"]["assigned"], rows["bob"]["remaining"]) == (2, 2)
    assert rows["judge:judge-l2"]["kind"] == "judge"
    assert prog["runs"]["counts"] == {"unassigned": 1, "in_progress": 2, "submitted": 0, "adjudicated": 0}


def test_label_import_endpoint(api):
    client, t = api
    csv_body = "annotator,run_id,mode,agent,evidence\nllm-a,r1,VF1,buyer_agent,1;2\nllm-a,r2,none,,\n"
    assert client.post("/api/v1/annotations/import", content=csv_body, headers={
        **t["alice"], "Content-Type": "text/csv"}).status_code == 403
    res = client.post("/api/v1/annotations/import", content=csv_body, headers={**t["rita"], "Content-Type": "text/csv"})
    assert res.status_code == 200, res.text
    assert res.json() == {"imported": 2, "replaced": 0, "rejected": 0, "errors": []}
    jsonl = '{"annotator": "llm-b", "run_id": "r1", "mode": "VF1", "agent": "ghost", "evidence": [1]}\n'
    res = client.post("/api/v1/annotations/import", files={"file": ("b.jsonl", jsonl, "application/x-ndjson")},
                      headers=t["adam"])
    assert res.status_code == 200
    assert res.json()["errors"] == [{"location": "b.jsonl:1", "message": "agent: 'ghost' is not an agent of run r1"}]
    res = client.post("/api/v1/annotations/import", content=csv_body, headers={**t["rita"], "Content-Type": "text/csv"})
    assert res.json()["replaced"] == 2
    assert res.headers["Content-Location"].startswith("/api/v1/jobs/")  # it ran as an import_labels job
    res = client.post("/api/v1/annotations/import", content=csv_body,
                      headers={**t["rita"], "Content-Type": "text/csv", "Prefer": "respond-async"})
    assert res.status_code == 202 and res.headers["Location"].startswith("/api/v1/jobs/")
    job = client.get(res.headers["Location"], headers=t["rita"]).json()
    assert job["kind"] == "import_labels" and job["state"] == "done" and job["result"]["replaced"] == 2
    listed = client.get("/api/v1/annotations", params={"annotator": "judge:llm-a"}, headers=t["rita"]).json()
    assert listed["total"] == 2 and {a["origin"] for a in listed["items"]} == {"import"}


def test_taxonomies_endpoints(api):
    client, t = api
    index = client.get("/api/v1/taxonomies", headers=t["alice"]).json()
    keys = {e["key"]: e for e in index}
    assert {"a2-failures", "mast"} <= set(keys)
    v = keys["a2-failures"]["latest_version"]
    one = client.get(f"/api/v1/taxonomies/a2-failures@{v}", headers=t["alice"]).json()
    assert len(one["modes"]) == 20 and len(one["categories"]) == 4
    assert one["modes"][0]["code"] == "DD1" and one["modes"][0]["definition"]
    by_id = client.get(f"/api/v1/taxonomies/{one['id']}", headers=t["alice"]).json()
    assert by_id["id"] == one["id"]
    assert client.get("/api/v1/taxonomies/mast", headers=t["alice"]).json()["key"] == "mast"
    assert client.get("/api/v1/taxonomies/nope@1", headers=t["alice"]).status_code == 404
    assert client.get("/api/v1/taxonomies").status_code == 401


def test_cookie_api_posts_need_csrf(engine):
    with Session(engine) as s:
        make_run(s, "r1")
        make_user(s, "alice")
        tok = create_token(s, make_user(s, "tina"))
        s.commit()
    client = TestClient(create_app(engine))
    token = login(client, "alice")
    body = {"run_id": "r1", "no_failure": True, "status": "submitted"}
    res = client.post("/api/v1/annotations", json=body)
    assert res.status_code == 403 and "CSRF" in res.json()["detail"]
    res = client.post("/api/v1/annotations", json=body, headers={"X-CSRF-Token": "forged"})
    assert res.status_code == 403
    res = client.post("/api/v1/annotations", json=body, headers={"Authorization": "Basic eDp5"})  # not a token
    assert res.status_code == 403
    res = client.post("/api/v1/annotations", json=body, headers={"X-CSRF-Token": token})
    assert res.status_code == 200 and res.json()["annotator"] == "alice"
    # cookie GETs need no token; Bearer requests need none either
    assert client.get("/api/v1/annotations/mine", params={"run_id": "r1"}).status_code == 200
    anon = TestClient(create_app(engine))
    res = anon.post("/api/v1/annotations", json=body, headers=bearer(tok))
    assert res.status_code == 200 and res.json()["annotator"] == "tina"
    assert anon.post("/api/v1/annotations", json=body).status_code == 401


def test_openapi_documents_the_endpoints(api):
    client, _ = api
    spec = client.get("/openapi.json").json()
    for path, method in [("/api/v1/annotations", "post"), ("/api/v1/annotations", "get"),
                         ("/api/v1/annotations/mine", "get"), ("/api/v1/annotations/import", "post"),
                         ("/api/v1/queue", "get"), ("/api/v1/queue/next", "get"), ("/api/v1/assignments", "post"),
                         ("/api/v1/progress", "get"), ("/api/v1/taxonomies", "get"),
                         ("/api/v1/taxonomies/{ref}", "get")]:
        op = spec["paths"][path][method]
        assert op.get("summary") and op.get("description"), (path, method)
    schema = spec["paths"]["/api/v1/annotations"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["$ref"].endswith("/AnnotationIn")
