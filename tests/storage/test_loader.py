"""Import into the database (SQLite and PostgreSQL): lossless, atomic per run, idempotent."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from app.annotations.models import Annotation, Label
from app.auth.models import User
from app.demo.generator import generate_runs
from app.ingest import writers
from app.ingest.canonical import content_hash
from app.ingest.loader import import_paths, load_items, store_run
from app.runs.models import Agent, Audit, Event, Principal, Run
from app.runs.service import to_canonical


def demo_runs(n=12, seed=3):
    return [d.run for d in generate_runs(n, seed)]


def dump(engine) -> dict[str, dict]:
    with Session(engine) as s:
        return {r.run_id: to_canonical(s, r) for r in s.exec(select(Run)).all()}


def count_rows(engine, run_id=None) -> dict[str, int]:
    with Session(engine) as s:
        out = {}
        run = s.exec(select(Run).where(Run.run_id == run_id)).first() if run_id else None
        for t in (Principal, Agent, Event, Audit):
            q = select(func.count()).select_from(t)
            if run_id:
                q = q.where(t.run_pk == (run.id if run else -1))
            out[t.__tablename__] = s.exec(q).one()
        return out


def test_canonical_database_canonical_is_lossless(engine):
    runs = demo_runs()
    summary = load_items(engine, [type("I", (), {"run": r, "error": None, "source": "t"})() for r in runs])
    assert summary.imported == len(runs) and summary.rejected == 0
    stored = dump(engine)
    for r in runs:
        assert stored[r["run_id"]] == r
        assert content_hash(stored[r["run_id"]]) == content_hash(r)


@pytest.mark.parametrize("shape", ["json", "jsonl", "files", "tree", "wire-1.0", "wire-0.3"])
def test_every_shape_imports_to_identical_contents(engine, tmp_path, shape):
    runs = demo_runs(8, seed=5)
    target = tmp_path / shape
    if shape == "json":
        writers.write_json_array(runs, target)
    elif shape == "jsonl":
        writers.write_jsonl(runs, target)
    elif shape == "files":
        writers.write_files(runs, target)
    elif shape == "tree":
        writers.write_tree(runs, target)
    else:
        writers.write_wire(runs, target, protocol=shape.split("-")[1])
    summary = import_paths(engine, [str(target)])
    assert (summary.imported, summary.rejected) == (len(runs), 0), summary.errors
    assert dump(engine) == {r["run_id"]: r for r in runs}


def test_reimport_is_idempotent_and_conflicts_need_replace(engine, tmp_path):
    runs = demo_runs(5)
    path = tmp_path / "runs.jsonl"
    writers.write_jsonl(runs, path)
    first = import_paths(engine, [str(path)])
    before = count_rows(engine)
    second = import_paths(engine, [str(path)])
    assert (first.imported, second.imported, second.unchanged, second.rejected) == (5, 0, 5, 0)
    assert count_rows(engine) == before

    changed = json.loads(json.dumps(runs[0]))
    changed["events"][0]["content"] = "edited after the fact"
    writers.write_jsonl([changed], path)
    refused = import_paths(engine, [str(path)])
    assert refused.rejected == 1 and "--replace" in refused.errors[0]["message"]
    assert dump(engine)[changed["run_id"]] == runs[0]

    replaced = import_paths(engine, [str(path)], replace=True)
    assert (replaced.imported, replaced.replaced) == (1, 1)
    assert dump(engine)[changed["run_id"]] == changed


def test_replace_keeps_annotations(engine):
    run = demo_runs(1)[0]
    with Session(engine) as s:
        store_run(s, run)
        row = s.exec(select(Run)).one()
        user = User(username="ann", role="annotator")
        s.add(user)
        s.flush()
        from app.taxonomies.service import latest

        ann = Annotation(run_pk=row.id, user_id=user.id, taxonomy_pk=latest(s, "a2-failures").id, status="submitted")
        s.add(ann)
        s.flush()
        s.add(Label(annotation_id=ann.id, mode="CF1", agent=run["agents"][0]["id"], evidence=[0]))
        s.commit()
    changed = json.loads(json.dumps(run))
    changed["aggregate_score"] = 0.123
    with Session(engine) as s:
        assert store_run(s, changed, replace=True) == "replaced"
        s.commit()
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Label)).one() == 1
    assert dump(engine)[run["run_id"]]["aggregate_score"] == 0.123


def test_malformed_lines_are_rejected_alone_with_file_and_line(engine, tmp_path):
    good = demo_runs(3)
    bad_event = json.loads(json.dumps(good[1]))
    bad_event["run_id"] = "bad-event-run"
    bad_event["events"][2]["kind"] = "telepathy"
    lines = [json.dumps(good[0]), "{not json", json.dumps(bad_event), json.dumps(good[2])]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    summary = import_paths(engine, [str(path)])
    assert (summary.imported, summary.rejected) == (2, 2)
    locations = " | ".join(e["location"] + " " + e["message"] for e in summary.errors)
    assert "mixed.jsonl:2" in locations and "mixed.jsonl:3" in locations
    assert "bad-event-run" in locations and "kind" in locations
    assert count_rows(engine, "bad-event-run") == {"principal": 0, "agent": 0, "event": 0, "audit": 0}
    assert set(dump(engine)) == {good[0]["run_id"], good[2]["run_id"]}


def test_a_failure_midway_leaves_nothing_of_that_run(engine):
    runs = demo_runs(3)

    def explode(session, row, run, cache):
        if run["run_id"] == runs[1]["run_id"]:
            raise RuntimeError("disk on fire")

    items = [type("I", (), {"run": r, "error": None, "source": "t"})() for r in runs]
    summary = load_items(engine, items, after_store=explode)
    assert (summary.imported, summary.rejected) == (2, 1)
    assert "disk on fire" in summary.errors[0]["message"]
    assert count_rows(engine, runs[1]["run_id"]) == {"principal": 0, "agent": 0, "event": 0, "audit": 0}
    with Session(engine) as s:
        assert s.exec(select(Run).where(Run.run_id == runs[1]["run_id"])).first() is None


def test_audits_become_judge_annotations(engine):
    runs = [r for r in demo_runs(30) if r["audits"]][:3]
    assert runs, "the demo corpus ships audits"
    import_items = [type("I", (), {"run": r, "error": None, "source": "t"})() for r in runs]
    from app.ingest.loader import _after_store_default

    load_items(engine, import_items, after_store=_after_store_default)
    with Session(engine) as s:
        judges = {u.username for u in s.exec(select(User).where(User.kind == "judge")).all()}
        expected = {f"judge:{a['source']}" for r in runs for a in r["audits"]}
        assert expected <= judges
        n_labels = s.exec(select(func.count()).select_from(Label)).one()
        n_audits = sum(len(r["audits"]) for r in runs)
        assert n_labels == n_audits
