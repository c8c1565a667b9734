"""Every route of the app, for anonymous / annotator / reviewer / admin, against an expectation table.

The routes are enumerated from the app itself: a route that is not in ROUTES fails
`test_every_route_is_in_the_table`, so each new route must state who may use it. Expected statuses:
public routes answer `ok` to everybody; API routes answer 401 to anonymous callers and 403 below
their level; pages redirect anonymous visitors to /login (303) and answer 403 below their level;
callers at or above the level get `ok`. Unsafe requests carry the session's CSRF token (CSRF itself
is tested in test_annotations_api.py and tests/admin).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import create_engine
from sqlmodel import Session

from app.annotations.models import Assignment, Label
from app.annotations.service import resolve_taxonomy, save_annotation
from app.main import create_app
from tests.annotations.factories import make_run, make_user, raw_run
from tests.api.clients import login, page_csrf

ROLES = ("anonymous", "annotator", "reviewer", "admin")
RANK = {"anonymous": 0, "annotator": 1, "reviewer": 2, "admin": 3}
PUBLIC, USER, REVIEWER, ADMIN = "public", "annotator", "reviewer", "admin"


@dataclass
class Case:
    url: str
    level: str  # public | annotator (any logged-in user) | reviewer | admin
    ok: int = 200
    send: dict[str, Any] = field(default_factory=dict)  # extra TestClient.request arguments
    last: bool = False  # run after every other case (logout ends the session)


LABEL = {"mode": "DD1", "agent": "buyer_agent", "evidence": [1]}
JUDGE_FILE = ("judge: 1\nname: tj\nendpoint: {base_url: \"http://127.0.0.1:9/v1\", model: m, api_key_env: K}\n"
              "taxonomy: a2-failures\nstrategy: all-at-once\n")
IMPORT_CSV = "annotator,run_id,mode,agent,evidence\nllm-x,r1,VF1,buyer_agent,1\n"

#: (METHOD, path template) -> Case. "{spare}" in a URL is replaced by the id of a spare user.
ROUTES: dict[tuple[str, str], Case] = {
    # meta, docs, static
    ("GET", "/openapi.json"): Case("/openapi.json", PUBLIC),
    ("GET", "/docs"): Case("/docs", PUBLIC),
    ("GET", "/redoc"): Case("/redoc", PUBLIC),
    ("GET", "/redoc/redoc.standalone.js"): Case("/redoc/redoc.standalone.js", PUBLIC),
    ("MOUNT", "/static"): Case("/static/css/app.css", PUBLIC),
    ("MOUNT", "/docs-assets"): Case("/docs-assets/swagger-ui.css", PUBLIC),
    ("GET", "/healthz"): Case("/healthz", PUBLIC),
    # runs API
    ("GET", "/api/v1/runs"): Case("/api/v1/runs", USER),
    ("GET", "/api/v1/runs/{run_id:path}"): Case("/api/v1/runs/r1", USER),
    ("POST", "/api/v1/imports"): Case("/api/v1/imports", REVIEWER, send={"json": [raw_run("r-imported")]}),
    ("GET", "/import"): Case("/import", REVIEWER),
    ("POST", "/import"): Case("/import", REVIEWER, ok=303, send={
        "content": json.dumps(raw_run("r-page-imported")), "headers": {"Content-Type": "application/x-ndjson"}}),
    # taxonomies API
    ("GET", "/api/v1/taxonomies"): Case("/api/v1/taxonomies", USER),
    ("GET", "/api/v1/taxonomies/{ref}"): Case("/api/v1/taxonomies/a2-failures", USER),
    # annotations, queue, assignments, progress API
    ("POST", "/api/v1/annotations"): Case("/api/v1/annotations", USER,
                                          send={"json": {"run_id": "r1", "labels": [LABEL], "status": "draft"}}),
    ("GET", "/api/v1/annotations"): Case("/api/v1/annotations", USER),
    ("GET", "/api/v1/annotations/mine"): Case("/api/v1/annotations/mine?run_id=r1", USER),
    ("POST", "/api/v1/annotations/import"): Case("/api/v1/annotations/import", REVIEWER, send={
        "content": IMPORT_CSV, "headers": {"Content-Type": "text/csv"}}),
    ("GET", "/api/v1/queue"): Case("/api/v1/queue", USER),
    ("GET", "/api/v1/queue/next"): Case("/api/v1/queue/next", USER),
    ("POST", "/api/v1/assignments"): Case("/api/v1/assignments", ADMIN, send={
        "json": {"annotators": ["ann"], "k": 1, "seed": 1}}),
    ("GET", "/api/v1/progress"): Case("/api/v1/progress", REVIEWER),
    ("DELETE", "/api/v1/assignments/batches/{batch}"): Case("/api/v1/assignments/batches/no-batch", ADMIN, ok=404),
    ("POST", "/api/v1/assignments/remove"): Case("/api/v1/assignments/remove", ADMIN, send={
        "json": {"run_id": "r1", "annotator": "spare"}}),
    # studies API (a study that does not exist: 404 once the caller may ask at all)
    ("GET", "/api/v1/studies"): Case("/api/v1/studies", USER),
    ("POST", "/api/v1/studies"): Case("/api/v1/studies", ADMIN, ok=201, send={"json": {"name": "s-route"}}),
    ("GET", "/api/v1/studies/{name}"): Case("/api/v1/studies/no-study", USER, ok=404),
    ("PUT", "/api/v1/studies/{name}/selection"): Case("/api/v1/studies/no-study/selection", ADMIN, ok=404,
                                                      send={"json": {}}),
    ("POST", "/api/v1/studies/{name}/members"): Case("/api/v1/studies/no-study/members", ADMIN, ok=404,
                                                     send={"json": {"username": "ann", "role": "annotator"}}),
    ("POST", "/api/v1/studies/{name}/rules"): Case("/api/v1/studies/no-study/rules", USER, ok=404, send={
        "json": {"name": "r", "policy": "all", "k": 1, "annotators": ["ann"]}}),
    ("POST", "/api/v1/studies/{name}/fill"): Case("/api/v1/studies/no-study/fill", USER, ok=404),
    ("GET", "/admin/studies"): Case("/admin/studies", ADMIN),
    ("POST", "/admin/studies"): Case("/admin/studies", ADMIN, ok=303, send={"data": {"name": "s-page"}}),
    # reports API (outcomes and blind spots show labels: refused to annotators under blind mode)
    ("GET", "/api/v1/reports/outcomes"): Case("/api/v1/reports/outcomes", REVIEWER),
    ("GET", "/api/v1/estimates"): Case("/api/v1/estimates?mode=DD1", REVIEWER),
    ("GET", "/api/v1/reports/blind-spots"): Case("/api/v1/reports/blind-spots", REVIEWER),
    ("GET", "/api/v1/reports/crossplay"): Case("/api/v1/reports/crossplay", USER),
    # agreement, adjudication, exports API (label-based views refused to annotators under blind mode)
    ("GET", "/api/v1/agreement"): Case("/api/v1/agreement", REVIEWER),
    ("GET", "/api/v1/agreement/gold"): Case("/api/v1/agreement/gold", REVIEWER),
    ("GET", "/api/v1/agreement/judges"): Case("/api/v1/agreement/judges", REVIEWER),
    ("GET", "/api/v1/agreement/attribution"): Case("/api/v1/agreement/attribution", REVIEWER),
    ("GET", "/api/v1/agreement/disagreements"): Case("/api/v1/agreement/disagreements", REVIEWER),
    ("POST", "/api/v1/agreement/compute"): Case("/api/v1/agreement/compute", USER, send={
        "json": {"coefficient": "percent", "ratings": [["a", "a"], ["a", "b"]], "n_boot": 0}}),
    ("GET", "/api/v1/adjudication/{run_id:path}"): Case("/api/v1/adjudication/r1", REVIEWER),
    ("POST", "/api/v1/adjudication/{run_id:path}"): Case("/api/v1/adjudication/r1", REVIEWER, send={
        "json": {"action": "accept", "mode": "VF1", "agent": "buyer_agent"}}),
    ("GET", "/api/v1/exports/{table}.{fmt}"): Case("/api/v1/exports/runs.csv", USER),
    ("GET", "/api/v1/exports/hf.zip"): Case("/api/v1/exports/hf.zip", REVIEWER),
    ("GET", "/api/v1/exports/mad.json"): Case("/api/v1/exports/mad.json", REVIEWER),
    ("GET", "/api/v1/exports/labels_wide.{fmt}"): Case("/api/v1/exports/labels_wide.csv", REVIEWER),
    # login / logout
    ("GET", "/login"): Case("/login", PUBLIC),
    ("POST", "/login"): Case("/login", PUBLIC, ok=401, send={"data": {"username": "nobody", "password": "wrong-pw"}}),
    ("POST", "/logout"): Case("/logout", PUBLIC, ok=303, last=True),
    # pages
    ("GET", "/"): Case("/", USER),
    ("GET", "/runs"): Case("/runs", USER),
    ("GET", "/runs/{run_id:path}"): Case("/runs/r1", USER),
    ("GET", "/taxonomies"): Case("/taxonomies", USER),
    ("GET", "/taxonomies/{ref}"): Case("/taxonomies/mast", USER),
    # agreement and adjudication pages (reviewers and admins)
    ("GET", "/agreement"): Case("/agreement", REVIEWER),
    ("GET", "/agreement/judges"): Case("/agreement/judges", REVIEWER),
    ("GET", "/disagreements"): Case("/disagreements", REVIEWER),
    ("GET", "/adjudicate/{run_id:path}"): Case("/adjudicate/r1", REVIEWER),
    ("POST", "/adjudicate/{run_id:path}"): Case("/adjudicate/r1", REVIEWER, ok=303, send={
        "data": {"action": "accept", "mode": "VF1", "agent": "buyer_agent"}}),
    # report pages (reviewers and admins)
    ("GET", "/reports"): Case("/reports", REVIEWER),
    ("GET", "/estimates"): Case("/estimates?target=mode:DD1", REVIEWER),
    ("GET", "/estimates/data.{fmt}"): Case("/estimates/data.csv?target=mode:DD1", REVIEWER),
    ("GET", "/reports/data/{name}.csv"): Case("/reports/data/outcomes.csv", REVIEWER),
    # admin pages
    ("GET", "/admin"): Case("/admin", ADMIN),
    ("POST", "/admin/users"): Case("/admin/users", ADMIN, ok=303, send={
        "data": {"username": "newbie", "role": "annotator", "password": "long-enough-pw"}}),
    ("POST", "/admin/users/{user_id}/password"): Case("/admin/users/{spare}/password", ADMIN, ok=303, send={
        "data": {"password": "another-long-pw"}}),
    ("POST", "/admin/users/{user_id}/active"): Case("/admin/users/{spare}/active", ADMIN, ok=303, send={
        "data": {"active": "true"}}),
    ("POST", "/admin/users/{user_id}/role"): Case("/admin/users/{spare}/role", ADMIN, ok=303, send={
        "data": {"role": "annotator"}}),
    ("POST", "/admin/reveal"): Case("/admin/reveal", ADMIN, ok=303, send={"data": {"revealed": "false"}}),
    ("POST", "/admin/users/{user_id}/sessions"): Case("/admin/users/{spare}/sessions", ADMIN, ok=303),
    ("GET", "/admin/tokens"): Case("/admin/tokens", ADMIN),
    ("POST", "/admin/tokens/{token_id}/revoke"): Case("/admin/tokens/999999/revoke", ADMIN, ok=303),
    ("GET", "/admin/assignments"): Case("/admin/assignments", ADMIN),
    ("POST", "/admin/assignments"): Case("/admin/assignments", ADMIN, send={
        "data": {"annotators": ["ann"], "k": "1", "seed": "2"}}),
    ("GET", "/admin/progress"): Case("/admin/progress", REVIEWER),
    ("GET", "/api/v1/detectors"): Case("/api/v1/detectors", USER),
    # background jobs: everybody lists (their own); a job that is not one's own (or none) is 404
    ("GET", "/api/v1/jobs"): Case("/api/v1/jobs", USER),
    ("GET", "/api/v1/jobs/{job_id}"): Case("/api/v1/jobs/nope", USER, ok=404),
    ("POST", "/api/v1/jobs/{job_id}/cancel"): Case("/api/v1/jobs/nope/cancel", USER, ok=404),
    ("GET", "/jobs"): Case("/jobs", USER),
    ("GET", "/jobs/{job_id}"): Case("/jobs/nope", USER, ok=404),
    ("POST", "/jobs/{job_id}/cancel"): Case("/jobs/nope/cancel", USER, ok=404),
    ("GET", "/api/v1/jobs/{job_id}/file"): Case("/api/v1/jobs/nope/file", USER, ok=404),
    ("POST", "/api/v1/detectors/run"): Case("/api/v1/detectors/run", ADMIN, send={"json": {"only": ["leak"]}}),
    ("GET", "/api/v1/detectors/scores"): Case("/api/v1/detectors/scores?reference=gold&n_boot=10", REVIEWER),
    ("GET", "/admin/detectors"): Case("/admin/detectors", ADMIN),
    ("POST", "/admin/detectors/run"): Case("/admin/detectors/run", ADMIN, ok=303, send={"data": {"only": "leak"}}),
    ("POST", "/admin/detectors/hints"): Case("/admin/detectors/hints", ADMIN, ok=303, send={
        "data": {"batch": "no-such-batch", "on": "true"}}),
    ("GET", "/admin/capture"): Case("/admin/capture", ADMIN),
    # LLM judges (reviewers and admins; launches here are dry runs: nothing is started)
    ("POST", "/api/v1/judges"): Case("/api/v1/judges", REVIEWER, ok=201, send={"json": {"file": JUDGE_FILE}}),
    ("GET", "/api/v1/judges"): Case("/api/v1/judges", REVIEWER),
    ("POST", "/api/v1/judges/{name}/runs"): Case("/api/v1/judges/tj/runs", REVIEWER, send={"json": {"dry_run": True}}),
    ("GET", "/api/v1/judges/{name}/runs"): Case("/api/v1/judges/tj/runs", REVIEWER),
    ("GET", "/api/v1/judges/{name}/runs/{run_id}"): Case("/api/v1/judges/tj/runs/999", REVIEWER, ok=404),
    ("POST", "/api/v1/judges/{name}/runs/{run_id}/cancel"): Case("/api/v1/judges/tj/runs/999/cancel", REVIEWER,
                                                                ok=404),
    ("GET", "/api/v1/judges/{name}/results"): Case("/api/v1/judges/tj/results", REVIEWER),
    ("GET", "/api/v1/judges/{name}/score"): Case("/api/v1/judges/tj/score?n_boot=0", REVIEWER),
    ("GET", "/judges"): Case("/judges", REVIEWER),
    ("POST", "/judges/define"): Case("/judges/define", REVIEWER, ok=303, send={"data": {"file": JUDGE_FILE}}),
    ("POST", "/judges/launch"): Case("/judges/launch", REVIEWER, ok=303, send={"data": {"judge": "tj",
                                                                                      "dry_run": "1"}}),
    ("POST", "/judges/{name}/runs/{run_id}/cancel"): Case("/judges/tj/runs/999/cancel", REVIEWER, ok=303),
    ("GET", "/judges/{name}"): Case("/judges/tj", REVIEWER),
    ("GET", "/judges/{name}/runs/{run_id:path}"): Case("/judges/tj/runs/r1", REVIEWER),
    # OTLP/HTTP ingestion takes Bearer tokens only (as exporters send them), so every cookie session
    # here gets 401; token access by role is tested in tests/capture/test_otlp_endpoint.py
    ("POST", "/v1/traces"): Case("/v1/traces", PUBLIC, ok=401, send={
        "content": "", "headers": {"Content-Type": "application/x-protobuf"}}),
    ("POST", "/admin/assignments/preview"): Case("/admin/assignments/preview", ADMIN, send={
        "data": {"annotators": ["ann"], "k": "1", "seed": "2"}}),
    ("POST", "/admin/assignments/undo"): Case("/admin/assignments/undo", ADMIN, ok=303, send={
        "data": {"batch": "nope", "taxonomy_pk": "1"}}),
    # skip and flag (app.flags)
    ("POST", "/api/v1/flags"): Case("/api/v1/flags", USER, send={
        "json": {"run_id": "r1", "kind": "flag", "reason": "broken_log"}}),
    ("DELETE", "/api/v1/flags"): Case("/api/v1/flags?run_id=r1", USER),  # after the POST above
    ("GET", "/api/v1/flags"): Case("/api/v1/flags", REVIEWER),
    ("POST", "/api/v1/flags/{flag_id}/resolve"): Case("/api/v1/flags/999999/resolve", REVIEWER, ok=404),
    ("GET", "/flagged"): Case("/flagged", REVIEWER),
    ("GET", "/exports"): Case("/exports", USER),
    ("GET", "/exports/download"): Case("/exports/download?table=runs&fmt=csv", USER, ok=303),
    ("POST", "/flagged/{flag_id}/resolve"): Case("/flagged/999999/resolve", REVIEWER, ok=404),
}


def app_routes(app) -> set[tuple[str, str]]:
    """(METHOD, path) of every route the app serves (HEAD folded into GET; mounts as MOUNT)."""
    try:
        from fastapi.routing import iter_route_contexts  # FastAPI >= 0.165 wraps included routers
        routes = list(iter_route_contexts(app.routes))
    except ImportError:  # pragma: no cover - older FastAPI lists routes directly
        routes = list(app.routes)
    out = set()
    for r in routes:
        methods = getattr(r, "methods", None)
        if not methods:
            out.add(("MOUNT", r.path))
            continue
        for m in methods:
            if m != "HEAD":
                out.add((m, r.path))
    return out


def test_every_route_is_in_the_table():
    app = create_app(create_engine("sqlite://"), check=False)
    missing = sorted(app_routes(app) - set(ROUTES))
    assert not missing, ("routes without an access expectation; add them to ROUTES in "
                         f"tests/api/test_route_access.py: {missing}")


def _expected(case: Case, role: str, is_api: bool) -> int:
    if case.level == PUBLIC or RANK[role] >= RANK[case.level]:
        return case.ok
    if role == "anonymous":
        return 401 if is_api else 303
    return 403


def test_access_table(engine):
    with Session(engine) as s:
        run = make_run(s, "r1", audits=[{"source": "judge-l2", "mode": "VF1", "agent": "buyer_agent",
                                         "evidence": [1]}])
        tax = resolve_taxonomy(s, None)
        users = {"annotator": make_user(s, "ann"), "reviewer": make_user(s, "rev", "reviewer"),
                 "admin": make_user(s, "adm", "admin")}
        spare = make_user(s, "spare", password=None)
        for u in users.values():  # everybody has an annotation and an open queue item on r1
            save_annotation(s, u, run, tax, [LABEL], status="draft")
            s.add(Assignment(run_pk=run.id, user_id=u.id, taxonomy_pk=tax.id, position=0))
        s.commit()
        spare_id = spare.id
    app = create_app(engine)
    clients: dict[str, tuple[TestClient, str]] = {}
    for role in ROLES:
        client = TestClient(app)
        token = page_csrf(client) if role == "anonymous" else login(client, {"annotator": "ann", "reviewer": "rev",
                                                                                "admin": "adm"}[role])
        clients[role] = (client, token)
    ordered = sorted(ROUTES.items(), key=lambda kv: kv[1].last)
    failures = []
    for (method, path), case in ordered:
        for role in ROLES:
            client, token = clients[role]
            send = json.loads(json.dumps(case.send))  # a fresh copy per request
            headers = {**send.pop("headers", {}), "X-CSRF-Token": token}
            res = client.request("GET" if method == "MOUNT" else method, case.url.replace("{spare}", str(spare_id)),
                                 headers=headers, follow_redirects=False, **send)
            want = _expected(case, role, path.startswith("/api/"))
            if res.status_code != want:
                failures.append(f"{method} {path} as {role}: {res.status_code}, expected {want}: {res.text[:160]}")
            elif want == 303 and case.ok != 303 and not res.headers.get("location", "").startswith("/login"):
                failures.append(f"{method} {path} as {role}: redirected to {res.headers.get('location')}, not /login")
    assert not failures, "\n".join(failures)
    with Session(engine) as s:  # the draft posts above really were stored
        assert len(s.exec(Label.__table__.select()).all()) >= 3
