"""Trees in three foreign layouts, imported on both backends: warnings, --strict, checks,
judge annotations, and reports / agreement / exports on the imported runs."""
from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Annotation
from app.auth.models import User
from app.auth.service import create_token, create_user
from app.ingest import iter_path
from app.ingest.loader import import_paths
from app.main import create_app
from app.runs.models import Check, Run
from app.runs.service import get_run, to_canonical
from tests.ingest.release_fixtures import LAYOUTS


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts-db")
    return {name: build(root / name) for name, build in LAYOUTS.items()}


@pytest.fixture
def client(engine):
    with Session(engine) as s:
        admin = create_user(s, "root", "admin", "password123")
        token = create_token(s, admin)
        s.commit()
    c = TestClient(create_app(engine))
    c.headers["Authorization"] = f"Bearer {token}"
    return c


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_import_keeps_every_run_and_stores_it_losslessly(engine, trees, layout):
    info = trees[layout]
    summary = import_paths(engine, [str(info["root"])])
    assert (summary.imported, summary.rejected, summary.errors) == (len(info["runs"]), 0, [])
    assert summary.line() == f"imported {len(info['runs'])}, unchanged 0, rejected 0, warnings {len(summary.warnings)}"
    read = {i.run["run_id"]: i.run for i in iter_path(info["root"]) if i.run}
    with Session(engine) as s:
        for rid, run in read.items():
            assert to_canonical(s, get_run(s, rid)) == run  # checks included, nothing lost
        assert s.exec(select(Check)).first() is not None
    again = import_paths(engine, [str(info["root"])])
    assert (again.imported, again.unchanged) == (0, len(info["runs"]))  # idempotent


def test_strict_rejects_each_run_naming_every_problem_and_stores_nothing(engine, trees):
    info = trees["release"]
    lenient = [i for i in iter_path(info["root"]) if i.run]
    summary = import_paths(engine, [str(info["root"])], strict=True)
    assert (summary.imported, summary.rejected) == (0, len(info["runs"]))
    n_problems = sum(len(i.warnings) for i in lenient)
    assert n_problems >= len(info["runs"]) and len(summary.errors) == n_problems
    assert all(e["message"].startswith("(strict) ") for e in summary.errors)
    assert any("sycophantic capitulation" in e["message"] for e in summary.errors)
    # what was kept verbatim with no text lost (conversation.jsonl's body.lang) is a notice, no reason to reject
    assert not any("no text lost" in e["message"] for e in summary.errors)
    assert any("conversation.jsonl" in n["location"] and "body" in n["message"] for n in summary.notices)
    with Session(engine) as s:
        assert s.exec(select(Run)).first() is None
    assert summary.unknown_modes == {"sycophantic capitulation": len(info["runs"]) - 1}


def test_judgments_become_judge_annotations_with_explicit_no_failure(engine, trees):
    info = trees["chatlog"]
    import_paths(engine, [str(info["root"])])
    with Session(engine) as s:
        rows = s.exec(select(Run.run_id, User.username, Annotation.no_failure)
                      .join(Annotation, Annotation.run_pk == Run.id).join(User, User.id == Annotation.user_id)).all()
    got = sorted((r, u, nf) for r, u, nf in rows)
    assert ("cd-0001", "judge:judge-x", True) in got  # the "no failure" verdict
    assert ("cd-0000", "judge:judge-x", False) in got and ("cd-0000", "judge:judge-y", False) in got


def test_reports_agreement_exports_and_rest_on_the_imported_runs(client, trees, tmp_path):
    buf = io.BytesIO()
    root = trees["chatlog"]["root"]
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(root).as_posix())
    r = client.post("/api/v1/imports", files={"file": ("chatlog.zip", buf.getvalue(), "application/zip")})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["imported"], body["rejected"]) == (3, 0)
    assert body["warnings"] and all(w["location"].startswith("chatlog.zip/") for w in body["warnings"])
    assert body["unknown_modes"] == {"lowballing": 3}
    assert len(body["unused_files"]) == 3
    rows = client.get("/api/v1/reports/outcomes", params={"by": "principal"}).json()
    rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    assert rows and all(row["principal_known"] > 0 for row in rows)  # per-principal outcomes are not empty
    agree = client.get("/api/v1/agreement", params={"level": "run", "include_judges": "true"})
    assert agree.status_code == 200, agree.text
    cf1 = next(m for m in agree.json()["modes"] if m["mode"] == "CF1")  # judge-x's "no failure" on cd-0001
    assert (cf1["n_units"], cf1["percent"]["value"]) == (3, pytest.approx(2 / 3))
    text = client.get("/api/v1/exports/checks.csv")
    assert text.status_code == 200
    checks = list(csv.DictReader(io.StringIO(text.text)))
    assert len(checks) == 6 and {c["check_id"] for c in checks} == {"l0.turn_limit", "l1.budget_respected"}
    principals = list(csv.DictReader(io.StringIO(client.get("/api/v1/exports/principals.csv").text)))
    assert all(p["score"] not in ("", None) for p in principals)
    run = client.get("/api/v1/runs/cd-0000").json()
    assert run["checks"][1] == {"source": "checks", "level": "L1", "check_id": "l1.budget_respected", "passed": False,
                                "agent": "buyer", "evidence": [8], "detail": "paid above budget", "metadata": {}}
    strict = client.post("/api/v1/imports", params={"strict": "true"},
                         files={"file": ("chatlog.zip", buf.getvalue(), "application/zip")}).json()
    assert strict["unchanged"] + strict["rejected"] + strict["imported"] == 3


def test_trace_view_lists_the_checks(engine, trees):
    from app.web.trace import build_trace

    import_paths(engine, [str(trees["episodes"]["root"])])
    with Session(engine) as s:
        view = build_trace(to_canonical(s, get_run(s, "ep-000-renewal")))
    assert [(c["check_id"], c["passed"]) for c in view["checks"]] == [("L0.schema_valid", True),
                                                                        ("L1.no_floor_disclosure", False)]


def test_a_root_manifest_is_never_read_as_runs(engine, tmp_path):
    from app.demo.generator import generate_runs
    from app.ingest import write_tree

    runs = [d.run for d in generate_runs(2, 3)]
    write_tree(runs, tmp_path)
    dirs = sorted(str(p.parent.relative_to(tmp_path)) for p in tmp_path.rglob("run.json"))
    (tmp_path / "manifest.json").write_text(json.dumps([{"path": d, "original_run_id": f"orig-{i}"}
                                                       for i, d in enumerate(dirs)]))
    summary = import_paths(engine, [str(tmp_path)])
    assert (summary.imported, summary.rejected) == (2, 0)
    shutil.rmtree(tmp_path)


def test_run_page_shows_checks_to_reviewers_only(engine, trees):
    from tests.web.helpers import login, user

    import_paths(engine, [str(trees["episodes"]["root"])])
    with Session(engine) as s:
        user(s, "ann")
        user(s, "rev", "reviewer")
        s.commit()
    c = TestClient(create_app(engine))
    login(c, "rev")
    page = c.get("/runs/ep-000-renewal").text
    assert "L1.no_floor_disclosure" in page and "FAIL" in page and "Checks" in page
    c2 = TestClient(create_app(engine))
    login(c2, "ann")
    assert "L1.no_floor_disclosure" not in c2.get("/runs/ep-000-renewal").text


def test_an_audit_mode_in_no_taxonomy_is_named_in_the_summary(engine, tmp_path):
    from app.demo.generator import generate_runs

    run = next(iter(generate_runs(1, 8))).run
    run["audits"] = [{"source": "judge-z", "level": "L2", "mode": "MYSTERY9", "agent": None, "evidence": [],
                      "note": None, "metadata": {}}]
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(run) + "\n")
    summary = import_paths(engine, [str(path)])
    assert summary.imported == 1 and summary.unknown_modes == {"MYSTERY9": 1}


# --------------------------------------------------------------------------- a profile with a REST upload

def _stored(engine, ids=None) -> dict:
    from app.core.db import make_engine

    eng = make_engine(engine) if isinstance(engine, str) else engine
    try:
        with Session(eng) as s:
            rids = ids if ids is not None else [r for (r,) in s.execute(select(Run.run_id))]
            return {rid: to_canonical(s, get_run(s, rid)) for rid in sorted(rids)}
    finally:
        if isinstance(engine, str):
            eng.dispose()


def _cli_import(tmp_path, *args) -> dict:
    """The same file imported by the CLI (`a2annotate import ...`) into a database of its own."""
    from tests.cli.test_cli import run_cli

    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run_cli(["db", "upgrade"], db).returncode == 0
    r = run_cli(["import", *args], db)
    assert r.returncode == 0, r.stderr
    return _stored(db)


def test_rest_upload_with_its_profile_imports_the_same_runs_as_the_cli(client, engine, tmp_path):
    """A tau-bench `historical_trajectories` file (several runs in one file) sent with the profile
    that reads it (multipart field `profile`) gives the runs `a2annotate import --profile` gives."""
    from tests.ingest import runs_fixtures as fx

    data = json.dumps(fx.tau_bench_runs(), indent=1).encode()
    f = tmp_path / "gpt-4o-ferry.json"
    f.write_bytes(data)
    # without an id rule the run ids come from the file name: the client's, as on the command line
    profile = fx.TAU_BENCH_PROFILE.replace(
        "    run_id: \"join('/', ['tau-bench', to_string(task_id), to_string(trial)])\"\n", "")
    assert profile != fx.TAU_BENCH_PROFILE
    (tmp_path / "tau.yaml").write_text(profile)
    r = client.post("/api/v1/imports", params={"strict": "true"},
                    files={"file": ("gpt-4o-ferry.json", data, "application/json"),
                           "profile": ("tau.yaml", profile.encode(), "application/yaml")})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["imported"], body["rejected"], body["errors"], body["warnings"]) == (2, 0, [], [])
    rest = _stored(engine)
    assert sorted(rest) == ["gpt-4o-ferry/0", "gpt-4o-ferry/1"]
    first = rest["gpt-4o-ferry/0"]
    assert [p["id"] for p in first["principals"]] == ["user"] and first["principals"][0]["outcome"]["success"]
    cli = _cli_import(tmp_path, "--profile", str(tmp_path / "tau.yaml"), "--strict", str(f))
    assert rest == cli
    # the profile may also come as a plain form field (its text); the same runs again: unchanged
    again = client.post("/api/v1/imports", data={"profile": profile},
                        files={"file": ("gpt-4o-ferry.json", data, "application/json")}).json()
    assert (again["imported"], again["unchanged"], again["rejected"]) == (0, 2, 0)


def test_rest_upload_with_a_built_in_profile_by_name(client, engine, trees, tmp_path):
    info = trees["release"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(info["root"].rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(info["root"]).as_posix())
    r = client.post("/api/v1/imports", params={"profile": "a2f-release-style"},
                    files={"file": ("release.zip", buf.getvalue(), "application/zip")})
    assert r.status_code == 200, r.text
    assert (r.json()["imported"], r.json()["rejected"]) == (len(info["runs"]), 0)
    expected = {i.run["run_id"]: i.run for i in iter_path(info["root"], profile="a2f-release-style") if i.run}
    assert _stored(engine) == expected


@pytest.mark.parametrize(("params", "fields", "message"), [
    ({"profile": "no-such-profile"}, {}, "profile 'no-such-profile': no built-in profile of that name"),
    ({"profile": "/etc/passwd"}, {}, "no built-in profile of that name"),  # never a path on the server
    ({}, {"profile": "profile: 1\nname: x\nkeys:\n  conversation: {sender: from}\n"},
     "keys.conversation.sender: unknown key"),
    ({}, {"profile": "profile: 1\nname: x\nrunz: {}\n"}, "runz: unknown key"),
    ({}, {"profile": "profile: [1\n"}, "profile: cannot read it"),
    ({}, {"profile": "- a\n- b\n"}, "a profile is a YAML mapping"),
    ({"profile": "a2annotate"}, {"profile": "profile: 1\nname: x\n"}, "not both"),
])
def test_a_bad_profile_is_named_and_nothing_is_stored(client, engine, params, fields, message):
    from app.jobs.models import Job
    from tests.ingest import runs_fixtures as fx

    data = json.dumps(fx.tau_bench_runs()).encode()
    r = client.post("/api/v1/imports", params=params, data=fields,
                    files={"file": ("t.json", data, "application/json")})
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"]
    with Session(engine) as s:
        assert s.exec(select(Run)).first() is None
        assert s.exec(select(Job)).first() is None  # no job queued either
