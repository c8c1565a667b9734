"""Queue rules keep a study's queue topped up: applied after each import (only the new runs),
and by `a2annotate study fill` / `POST /api/v1/studies/{name}/fill`; k per run holds, a run removed
from an annotator by hand is not given back, a random rule records its rate as the inclusion
probability."""
from __future__ import annotations

import json

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Assignment
from app.annotations.policies import bernoulli_draw
from app.auth.models import User
from app.auth.service import create_token
from app.runs.models import Run
from app.studies.models import QueueRule
from tests.annotations.factories import make_user, raw_run
from tests.api.clients import bearer


def _write(path, ids, family="commerce"):
    path.write_text("\n".join(json.dumps(raw_run(i, family=family)) for i in ids) + "\n")
    return path


def _assigned(engine, study_name=None):
    with Session(engine) as s:
        rows = s.exec(select(Run.run_id, User.username, Assignment.policy, Assignment.inclusion_prob,
                             Assignment.batch).join(Run, Run.id == Assignment.run_pk)
                      .join(User, User.id == Assignment.user_id)).all()
    return rows


def test_rules_top_up_after_imports(engine, run_cli, tmp_path):
    with Session(engine) as s:
        for n in ("ann1", "ann2", "ann3"):
            make_user(s, n, password=None)
        s.commit()
    run_cli("import", _write(tmp_path / "first.jsonl", [f"c{i}" for i in range(4)]))
    run_cli("study", "create", "live", "--family", "commerce")
    run_cli("study", "create", "pilot", "--family", "commerce")
    run_cli("study", "rule", "live", "every", "--policy", "all", "--annotator", "ann1", "--annotator", "ann2",
            "--k", "2")
    # k counts per study (the runs' annotators in it), so a second rule with its own k lives in another study
    run_cli("study", "rule", "pilot", "sample", "--policy", "random", "--rate", "0.5", "--seed", "7",
            "--annotator", "ann3", "--k", "1")
    # nothing is assigned until the rule runs: on demand here
    assert _assigned(engine) == []
    out = run_cli("study", "fill", "live").output
    run_cli("study", "fill", "pilot")
    assert "live:every: 8 new assignment(s)" in out
    rows = _assigned(engine)
    every = [r for r in rows if r[4] == "live:every"]
    assert len(every) == 8 and {(r[2], r[3]) for r in every} == {("all", 1.0)}
    sample = [r for r in rows if r[4] == "pilot:sample"]
    assert {r[0] for r in sample} == {f"c{i}" for i in range(4) if bernoulli_draw(f"c{i}", 7, 0.5)}
    assert {(r[2], r[3]) for r in sample} <= {("random", 0.5)}
    # a new import: the rules take its new runs (and only runs of the study)
    run_cli("import", _write(tmp_path / "second.jsonl", [f"c{i}" for i in range(4, 10)]))
    run_cli("import", _write(tmp_path / "legal.jsonl", ["l0", "l1"], family="legal"))
    rows = _assigned(engine)
    every = [r for r in rows if r[4] == "live:every"]
    assert {r[0] for r in every} == {f"c{i}" for i in range(10)} and len(every) == 20
    assert {r[0] for r in rows if r[4] == "pilot:sample"} == {
        f"c{i}" for i in range(10) if bernoulli_draw(f"c{i}", 7, 0.5)}
    # removed by hand: the next fill (and the next import) leaves it out
    run_cli("study", "remove", "live", "c5", "ann2")
    run_cli("study", "fill", "live")
    run_cli("import", _write(tmp_path / "third.jsonl", ["c10"]))
    rows = _assigned(engine)
    assert ("c5", "ann2") not in {(r[0], r[1]) for r in rows}
    assert {(r[0], r[1]) for r in rows if r[0] == "c10" and r[4] == "live:every"} == {("c10", "ann1"), ("c10", "ann2")}
    # re-filling changes nothing: every run of the study is at k for the rule
    before = len(_assigned(engine))
    run_cli("study", "fill")
    assert len(_assigned(engine)) == before


def test_rules_over_rest(engine):
    from app.main import create_app
    from app.studies.service import create_study

    with Session(engine) as s:
        from tests.annotations.factories import make_run

        for i in range(3):
            make_run(s, f"r{i}")
        lead = make_user(s, "lead", "reviewer")
        make_user(s, "ann1", password=None)
        create_study(s, "st", leads=["lead"])
        create_study(s, "other")
        token = bearer(create_token(s, lead))
        s.commit()
    c = TestClient(create_app(engine))
    res = c.post("/api/v1/studies/st/rules", json={"name": "all", "policy": "all", "k": 1, "annotators": ["ann1"]},
                 headers=token)
    assert res.status_code == 201, res.text
    bad = c.post("/api/v1/studies/st/rules", json={"name": "r", "policy": "random", "k": 1, "annotators": ["ann1"]},
                 headers=token)
    assert bad.status_code == 422 and "rate" in bad.json()["detail"]
    assert c.post("/api/v1/studies/other/rules", json={"name": "x", "policy": "all", "k": 1,
                                                       "annotators": ["ann1"]}, headers=token).status_code == 403
    res = c.post("/api/v1/studies/st/fill", headers=token)
    assert res.status_code == 200 and res.json()["st:all"]["created"] == 3
    assert c.post("/api/v1/studies/other/fill", headers=token).status_code == 403
    info = c.get("/api/v1/studies/st", headers=token).json()
    assert info["runs"] == 3 and info["rules"][0]["name"] == "all" and info["rules"][0]["last_applied_at"]
    with Session(engine) as s:
        assert len(s.exec(select(QueueRule)).all()) == 1
