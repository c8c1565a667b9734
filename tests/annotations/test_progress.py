"""Progress per annotator and per run, judges included; hand-counted expectations."""
from __future__ import annotations

from sqlmodel import Session

from app.annotations.models import Assignment, GoldRun
from app.annotations.progress import progress
from app.annotations.service import resolve_taxonomy, save_annotation
from tests.annotations.factories import make_run, make_user

LABEL = {"mode": "VF1", "agent": "buyer_agent", "evidence": [1]}


def test_progress_tables(session: Session):
    tax = resolve_taxonomy(session, None)
    r1 = make_run(session, "p1", audits=[{"source": "judge-l2", "mode": "VF1", "agent": "buyer_agent",
                                          "evidence": [1]}])
    r2 = make_run(session, "p2")
    r3 = make_run(session, "p3")
    make_run(session, "p4")  # untouched
    ann, bea = make_user(session, "ann", password=None), make_user(session, "bea", password=None)
    make_user(session, "idle", password=None)  # an annotator with nothing yet
    for run, user, pos in ((r1, ann, 0), (r1, bea, 0), (r2, ann, 1), (r2, bea, 1), (r3, ann, 2)):
        session.add(Assignment(run_pk=run.id, user_id=user.id, taxonomy_pk=tax.id, position=pos))
    session.flush()
    save_annotation(session, ann, r1, tax, [LABEL], status="submitted")
    save_annotation(session, bea, r1, tax, [], no_failure=True, status="submitted")
    save_annotation(session, ann, r2, tax, [LABEL], status="submitted")
    save_annotation(session, bea, r2, tax, [LABEL], status="draft")
    save_annotation(session, bea, r3, tax, [LABEL], status="submitted")  # not assigned to bea
    session.add(GoldRun(run_pk=r3.id, taxonomy_pk=tax.id, status="adjudicated"))
    session.commit()

    data = progress(session, tax)
    people = {row["username"]: row for row in data["annotators"]}
    assert [r["username"] for r in data["annotators"]] == ["ann", "bea", "idle", "judge:judge-l2"]
    pick = ("kind", "assigned", "drafts", "submitted", "remaining")
    assert {n: tuple(r[k] for k in pick) for n, r in people.items()} == {
        "ann": ("human", 3, 0, 2, 1),
        "bea": ("human", 2, 1, 2, 1),
        "idle": ("human", 0, 0, 0, 0),
        "judge:judge-l2": ("judge", 0, 0, 1, 0),
    }
    assert people["bea"]["submitted_unassigned"] == 1
    runs = {r["run_id"]: r for r in data["runs"]["items"]}
    assert set(runs) == {"p1", "p2", "p3"}
    assert (runs["p1"]["state"], runs["p1"]["label"], runs["p1"]["n_judges"]) == ("submitted", "submitted by 2 of 2", 1)
    assert (runs["p2"]["state"], runs["p2"]["n_submitted"], runs["p2"]["n_drafts"]) == ("in_progress", 1, 1)
    assert runs["p2"]["label"] == "in progress: submitted by 1 of 2"
    assert runs["p3"]["state"] == "adjudicated"
    assert data["runs"]["counts"] == {"unassigned": 1, "in_progress": 1, "submitted": 1, "adjudicated": 1}
    only = progress(session, tax, state="in_progress")["runs"]
    assert [r["run_id"] for r in only["items"]] == ["p2"] and only["total"] == 1
    # another taxonomy version has its own progress
    mast = progress(session, resolve_taxonomy(session, "mast"))
    assert mast["runs"]["items"] == [] and mast["runs"]["counts"]["unassigned"] == 4
