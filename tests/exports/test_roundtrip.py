"""Round trip: demo runs + human, imported-judge and audit-judge annotations + gold -> export ->
an emptied database -> `a2annotate import` + `a2annotate import-labels` -> the same canonical runs
and the same annotation sets (CSV and JSON Lines label files)."""
from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session

from app.annotations.labels_import import import_labels
from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.annotations.service import resolve_taxonomy, save_annotation
from app.auth.models import User
from app.auth.service import create_user
from app.demo.generator import generate_runs
from app.ingest.loader import _after_store_default, store_run
from app.runs.models import Run
from app.runs.service import get_run, to_canonical
from app.taxonomies.models import Taxonomy
from tests.conftest import _truncate

HUMANS = ("alice", "bob")
TRICKY_NOTE = 'looked twice, said "fine";\nsecond line, ünïcode'


def _populate(engine) -> None:
    demo = list(generate_runs(12, seed=5))
    with Session(engine) as s:
        for d in demo:
            store_run(s, d.run, after_store=_after_store_default)  # audits -> judge annotations
        users = {name: create_user(s, name, "annotator") for name in HUMANS}
        tax = resolve_taxonomy(s, None)
        for i, d in enumerate(demo):
            run = get_run(s, d.run["run_id"])
            labels = [{"mode": t["mode"], "agent": t["agent"], "evidence": t["evidence"],
                       "principals": t.get("principals", []), "note": f"seen in run {i}" if j == 0 else None,
                       "confidence": 0.35 if j == 1 else None} for j, t in enumerate(d.truth)]
            if i < 9:
                save_annotation(s, users["alice"], run, tax, labels, no_failure=not labels, status="submitted",
                                note=TRICKY_NOTE if not labels else None)
            elif i == 9:
                save_annotation(s, users["alice"], run, tax, labels, status="draft")  # drafts are not exported
            if i < 4:
                save_annotation(s, users["bob"], run, tax, [], no_failure=True, status="submitted", note=TRICKY_NOTE)
            elif i < 8 and labels:
                save_annotation(s, users["bob"], run, tax, labels[:1], status="submitted")
        # an imported judge (origin "import"), not from the runs' audits
        rows = "annotator,run_id,mode,agent,evidence,note\n" + "".join(
            f"gpt-judge,{d.run['run_id']},{d.truth[0]['mode']},{d.truth[0]['agent']},"
            f"{';'.join(map(str, d.truth[0]['evidence']))},judged\n" for d in demo if d.truth)
        assert import_labels(s, rows, "judge.csv").rejected == 0
        # gold on one run (exported for analysis; not part of what import-labels reads back)
        first = next(d for d in demo if d.truth)
        gold = GoldRun(run_pk=get_run(s, first.run["run_id"]).id, taxonomy_pk=tax.id, status="adjudicated")
        s.add(gold)
        s.flush()
        t = first.truth[0]
        s.add(GoldLabel(gold_run_id=gold.id, mode=t["mode"], agent=t["agent"], evidence=t["evidence"],
                        origin="adjudication"))
        s.commit()


def _canonical_runs(engine) -> dict[str, dict]:
    with Session(engine) as s:
        return {r.run_id: to_canonical(s, r) for r in s.exec(select(Run)).scalars()}


def _annotation_set(engine) -> set[tuple]:
    """(annotator, run, taxonomy, mode, agent, evidence, principals, note, confidence) of every
    label of a submitted annotation; a "no failure found" annotation is one tuple with mode None
    and the annotation's note."""
    out = set()
    with Session(engine) as s:
        q = (select(Annotation, User.username, Run.run_id, Taxonomy.key, Taxonomy.version)
             .join(User, User.id == Annotation.user_id).join(Run, Run.id == Annotation.run_pk)
             .join(Taxonomy, Taxonomy.id == Annotation.taxonomy_pk).where(Annotation.status == "submitted"))
        for ann, user, run_id, key, version in s.execute(q).all():
            labels = s.execute(select(Label).where(Label.annotation_id == ann.id)).scalars().all()
            tax = f"{key}@{version}"
            if not labels:
                out.add((user, run_id, tax, None, None, (), (), ann.note, None))
            for lab in labels:
                out.add((user, run_id, tax, lab.mode, lab.agent or None, tuple(lab.evidence),
                         tuple(lab.principals), lab.note, lab.confidence))
    return out


def test_export_then_import_into_an_empty_database_reproduces_runs_and_annotations(engine, run_cli, tmp_path):
    _populate(engine)
    runs_before = _canonical_runs(engine)
    annotations_before = _annotation_set(engine)
    assert len(runs_before) == 12
    kinds = {a[0].split(":")[0] for a in annotations_before}
    assert kinds == {"alice", "bob", "judge"}  # humans, the imported judge and the audit judges
    assert any(a[0] == "judge:gpt-judge" for a in annotations_before)
    assert any(a[3] is None and a[7] == TRICKY_NOTE for a in annotations_before)

    out = tmp_path / "export"
    for fmt in ("jsonl", "csv"):
        res = run_cli("export", "--format", fmt, "--out", str(out),
                      "--tables", "annotations_canonical" + (",runs_canonical,gold_labels" if fmt == "jsonl" else ""))
        assert res.exit_code == 0, res.output
    assert (out / "gold_labels.jsonl").read_text().count("\n") == 1

    for labels_file in ("annotations_canonical.csv", "annotations_canonical.jsonl"):
        _truncate(engine)  # an empty database (taxonomies are registered by `db upgrade`)
        with Session(engine) as s:
            assert s.execute(select(Run)).first() is None and s.execute(select(GoldLabel)).first() is None
            for name in HUMANS:  # the human annotators exist in the new database
                create_user(s, name, "annotator")
            s.commit()
        res = run_cli("import", str(out / "runs_canonical.jsonl"))
        assert res.exit_code == 0, res.output
        assert res.stdout.strip().splitlines()[-1] == "imported 12, unchanged 0, rejected 0, warnings 0"
        res = run_cli("import-labels", str(out / labels_file))
        assert res.exit_code == 0, res.output

        assert _canonical_runs(engine) == runs_before
        assert _annotation_set(engine) == annotations_before, labels_file
