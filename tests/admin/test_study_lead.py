"""The study lead's pages: assignment preview (creates nothing, predicts Assign exactly), undo of a
batch (keeps started work), the progress dashboard, and the export page under blind mode."""
from __future__ import annotations

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.models import Assignment
from app.annotations.service import resolve_taxonomy, save_annotation
from app.main import create_app
from tests.annotations.factories import make_run, make_user
from tests.api.clients import login

FORM = {"annotators": ["ann", "bea"], "k": "2", "seed": "3", "sample_size": "3", "batch": "pilot"}


def _site(engine) -> TestClient:
    with Session(engine) as s:
        for i in range(5):
            make_run(s, f"r{i}")
        make_user(s, "ann")
        make_user(s, "bea")
        make_user(s, "boss", "admin")
        s.commit()
    return TestClient(create_app(engine))


def _count(engine) -> int:
    with Session(engine) as s:
        return len(s.exec(select(Assignment)).all())


def test_preview_then_assign_then_undo_a_batch(engine):
    c = _site(engine)
    token = login(c, "boss")
    r = c.post("/admin/assignments/preview", data={**FORM, "csrf_token": token})
    assert r.status_code == 200, r.text
    pv = r.json()
    assert (pv["runs_matching"], pv["runs_selected"], pv["created"]) == (5, 3, 6)
    assert pv["per_annotator"] == {"ann": 3, "bea": 3} and _count(engine) == 0  # nothing written
    page = c.post("/admin/assignments", data={**FORM, "preview": "1", "csrf_token": token}).text
    assert "6 new (run, annotator) pair(s)" in page and _count(engine) == 0
    bad = c.post("/admin/assignments/preview", data={**FORM, "k": "3", "csrf_token": token})
    assert bad.status_code == 422 and "k" in bad.json()["detail"]

    r = c.post("/admin/assignments", data={**FORM, "csrf_token": token})
    assert "6 assignment(s) created" in r.text and _count(engine) == 6
    again = c.post("/admin/assignments/preview", data={**FORM, "csrf_token": token}).json()
    assert again["created"] == 0 and again["skipped_existing"] == 6  # the preview sees what exists

    with Session(engine) as s:  # ann starts one run of the batch: undo must keep it
        from app.auth.service import get_user
        from app.runs.models import Run

        ann = get_user(s, "ann")
        mine = s.exec(select(Assignment).where(Assignment.user_id == ann.id)).first()
        save_annotation(s, ann, s.get(Run, mine.run_pk), resolve_taxonomy(s, None), [], status="draft")
        tax_pk = mine.taxonomy_pk
        s.commit()
    page = c.get("/admin/assignments").text
    assert "pilot" in page and 'action="/admin/assignments/undo"' in page
    r = c.post("/admin/assignments/undo", data={"batch": "pilot", "taxonomy_pk": str(tax_pk), "csrf_token": token},
               follow_redirects=False)
    assert r.status_code == 303
    assert "5 assignment(s) removed; 1 kept" in c.get("/admin/assignments").text
    assert _count(engine) == 1

    # an assignment made without a batch name still gets one, so it can be undone
    c.post("/admin/assignments", data={**FORM, "batch": "", "csrf_token": token})
    with Session(engine) as s:
        assert all(a.batch for a in s.exec(select(Assignment)).all())


def test_progress_dashboard_and_export_page(engine):
    from app.annotations.blind import set_revealed

    c = _site(engine)
    token = login(c, "boss")
    c.post("/admin/assignments", data={**FORM, "csrf_token": token})
    with Session(engine) as s:
        from app.auth.service import get_user
        from app.runs.models import Run

        tax = resolve_taxonomy(s, None)
        for name in ("ann", "bea"):
            u = get_user(s, name)
            a = s.exec(select(Assignment).where(Assignment.user_id == u.id).order_by(Assignment.position)).first()
            save_annotation(s, u, s.get(Run, a.run_pk), tax, [], status="submitted", no_failure=True, time_ms=90_000)
        s.commit()
    page = c.get("/admin/progress").text
    assert 'id="batch-progress"' in page and "pilot" in page and "2 of 6" in page
    assert 'id="time-on-task"' in page and "1:30" in page
    from app.admin.study import runs_per_day

    with Session(engine) as s:
        assert runs_per_day(s, resolve_taxonomy(s, None))[-1]["submitted"] == 2  # today, humans only
    assert 'id="runs-per-day"' in page and "<progress" in page and 'style="' not in page.split('id="batch-progress"')[1]

    ann = TestClient(c.app)
    login(ann, "ann")
    exp = ann.get("/exports").text
    assert 'id="export-runs"' in exp and "/api/v1/exports/runs.parquet" in exp
    assert "Only your own labels" in exp and "Reviewers and admins only while labels are blind" in exp
    r = ann.get("/exports/download", params={"table": "runs", "fmt": "csv"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/api/v1/exports/runs.csv"
    assert ann.get("/exports/download", params={"table": "runs", "fmt": "xls"}).status_code == 404
    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert "Reviewers and admins only while labels are blind" not in ann.get("/exports").text
