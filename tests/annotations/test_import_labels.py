"""import-labels: CSV / JSON Lines, grouping, judges, no-failure rows, atomic groups, errors, idempotency, CLI."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import Session, select

from app.annotations.labels_import import import_labels
from app.annotations.models import Annotation, Label
from app.annotations.service import resolve_taxonomy, save_annotation
from app.auth.models import User
from tests.annotations.factories import make_run, make_user

CSV = """annotator,run_id,mode,agent,evidence,taxonomy,note,confidence,principals
alice,r1,DD1,buyer_agent,1;3,,first,0.9,buyer
alice,r1,peer not engaged,seller_agent,[2],a2-failures,,,
gpt-judge,r1,VF1,buyer_agent,4,,,,
judge:l2,r2,none,,,,clean run,,
alice,r2,3.3,seller_agent,0,mast,,,seller;buyer
"""


@pytest.fixture
def world(session: Session):
    make_run(session, "r1")
    make_run(session, "r2")
    make_user(session, "alice", password=None)
    session.commit()
    return session


def _annotations(session) -> dict[tuple[str, str, str], tuple[Annotation, list[Label]]]:
    out = {}
    for ann in session.exec(select(Annotation)).all():
        user = session.get(User, ann.user_id)
        from app.runs.models import Run
        from app.taxonomies.models import Taxonomy

        run, tax = session.get(Run, ann.run_pk), session.get(Taxonomy, ann.taxonomy_pk)
        labels = session.exec(select(Label).where(Label.annotation_id == ann.id).order_by(Label.id)).all()
        out[(user.username, run.run_id, tax.key)] = (ann, labels)
    return out


def test_csv_happy_path(world):
    session = world
    summary = import_labels(session, CSV.encode(), "labels.csv")
    session.commit()
    assert summary.errors == []
    assert (summary.imported, summary.rejected) == (4, 0)
    assert summary.line() == "imported 4 annotations, rejected 0"
    anns = _annotations(session)
    assert set(anns) == {("alice", "r1", "a2-failures"), ("judge:gpt-judge", "r1", "a2-failures"),
                         ("judge:l2", "r2", "a2-failures"), ("alice", "r2", "mast")}
    ann, labels = anns[("alice", "r1", "a2-failures")]
    assert (ann.status, ann.origin, ann.no_failure, ann.submitted_at is not None) == ("submitted", "import", False, True)
    assert [(lb.mode, lb.agent, lb.evidence, lb.principals, lb.note, lb.confidence) for lb in labels] == [
        ("DD1", "buyer_agent", [1, 3], ["buyer"], "first", 0.9),
        ("DD1", "seller_agent", [2], [], None, None)]
    clean, clean_labels = anns[("judge:l2", "r2", "a2-failures")]
    assert clean.no_failure and clean_labels == [] and clean.note == "clean run"
    assert anns[("alice", "r2", "mast")][1][0].principals == ["seller", "buyer"]
    judge = session.exec(select(User).where(User.username == "judge:gpt-judge")).one()
    assert judge.kind == "judge"


def test_jsonl_with_taxonomy_version_and_reimport_is_idempotent(world):
    session = world
    v = resolve_taxonomy(session, "a2-failures").version
    rows = [{"annotator": "judge:x", "run_id": "r1", "mode": "GR1", "agent": "seller_agent", "evidence": [0, 2],
             "taxonomy": f"a2-failures@{v}", "confidence": 0.5},
            {"annotator": "judge:x", "run_id": "r2", "mode": "", "agent": None, "evidence": []}]
    data = "\n".join(json.dumps(r) for r in rows) + "\n"
    first = import_labels(session, data, "labels.jsonl")
    session.commit()
    assert (first.imported, first.rejected, first.replaced) == (2, 0, 0)
    before = {k: (a.id, [(lb.mode, lb.evidence) for lb in ls]) for k, (a, ls) in _annotations(session).items()}
    second = import_labels(session, data, "labels.jsonl")
    session.commit()
    assert (second.imported, second.rejected, second.replaced) == (2, 0, 2)
    after = {k: (a.id, [(lb.mode, lb.evidence) for lb in ls]) for k, (a, ls) in _annotations(session).items()}
    assert after == before  # same annotations, same labels, nothing duplicated
    assert len(session.exec(select(Label)).all()) == 1
    # a changed file replaces that annotator's imported labels for the run
    rows[0]["mode"] = "GR2"
    import_labels(session, "\n".join(json.dumps(r) for r in rows), "labels.jsonl")
    session.commit()
    assert [lb.mode for lb in _annotations(session)[("judge:x", "r1", "a2-failures")][1]] == ["GR2"]


BAD = """annotator,run_id,mode,agent,evidence,taxonomy
alice,r1,DD1,buyer_agent,1,
alice,r1,DD2,nobody,2,
bob,r1,VF1,buyer_agent,x;2,
carl,r9,VF1,buyer_agent,1,
dora,r1,VF1,buyer_agent,1,nope@3
erin,r1,none,,,
erin,r1,VF2,buyer_agent,1,
fay,r2,CF1,seller_agent,1;4,
"""


def test_errors_name_file_line_field_and_groups_are_atomic(world):
    session = world
    summary = import_labels(session, BAD, "bad.csv")
    session.commit()
    messages = [f"{e['location']}: {e['message']}" for e in summary.errors]
    assert "bad.csv:3: agent: 'nobody' is not an agent of run r1" in messages
    assert "bad.csv:4: evidence: 'x' is not an event seq (integer)" in messages
    assert "bad.csv:5: run_id: no run 'r9'" in messages
    assert "bad.csv:6: taxonomy: unknown taxonomy 'nope@3'" in messages
    assert any(m.startswith("bad.csv:7: mode: 'no failure found' conflicts with the failure labels on line(s) 8")
               for m in messages)
    assert len(messages) == 5
    assert (summary.imported, summary.rejected) == (1, 5)
    # alice's group had one good and one bad row: nothing of it was stored; fay's group was
    assert set(_annotations(session)) == {("judge:fay", "r2", "a2-failures")}


def test_file_level_errors(world):
    session = world
    s1 = import_labels(session, "annotator,run_id,mode,evidnce\nalice,r1,DD1,1\n", "typo.csv")
    assert s1.errors == [{"location": "typo.csv:1",
                          "message": "unknown column(s) 'evidnce' (columns: annotator, run_id, mode, agent, "
                                     "evidence, taxonomy, note, confidence, principals)"}]
    s2 = import_labels(session, '{"annotator": "a", "run_id": "r1", "mode": "DD1"\n', "broken.jsonl")
    assert s2.rejected == 1 and s2.errors[0]["location"] == "broken.jsonl:1"
    assert s2.errors[0]["message"].startswith("invalid JSON")
    s3 = import_labels(session, b"\xff\xfe\x00bad", "bin.csv")
    assert s3.rejected == 1 and "not UTF-8" in s3.errors[0]["message"]
    assert session.exec(select(Annotation)).all() == []


def test_import_does_not_replace_work_made_in_the_app(world):
    session = world
    from app.runs.service import get_run

    alice = session.exec(select(User).where(User.username == "alice")).one()
    save_annotation(session, alice, get_run(session, "r1"), resolve_taxonomy(session, None),
                    [{"mode": "DD1", "agent": "buyer_agent", "evidence": [1]}], status="submitted")
    session.commit()
    summary = import_labels(session, "annotator,run_id,mode,agent,evidence\nalice,r1,VF1,buyer_agent,2\n", "a.csv")
    assert summary.rejected == 1
    assert summary.errors[0]["message"].startswith("annotator: alice already has an annotation of run r1 made in the app")


def test_cli_import_labels(world, engine, tmp_path, monkeypatch):
    import app.cli.labels as labels_cli
    from app.cli import cli

    monkeypatch.setattr(labels_cli, "checked_engine", lambda: engine)
    good = tmp_path / "good.csv"
    good.write_text(CSV, encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(cli, ["import-labels", str(good)])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == "imported 4 annotations, rejected 0"
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD, encoding="utf-8")
    res = runner.invoke(cli, ["import-labels", str(bad)])
    assert res.exit_code == 1
    assert f"rejected: {bad}:3: agent: 'nobody' is not an agent of run r1" in res.output
    assert res.output.strip().splitlines()[-1] == "imported 1 annotations, rejected 5"
    with Session(engine) as s:
        assert len(s.exec(select(Annotation)).all()) == 5
