"""Two studies in one database (the demo corpus and an imported Who&When set): reports,
agreement, progress and exports of a study hold only its runs; without a study every result is
exactly what it was before the studies existed."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.progress import progress
from app.annotations.service import resolve_taxonomy
from app.auth.models import User
from app.auth.service import create_token
from app.runs.models import Run
from app.studies.service import check_selection, create_study, get_study, study_run_ids, study_run_pks


def _run_ids(engine, study: str) -> set[str]:
    with Session(engine) as s:
        pks = study_run_pks(s, get_study(s, study))
        return {rid for pk, rid in s.exec(select(Run.id, Run.run_id)).all() if pk in pks}


def _jsonl_ids(path) -> list[str]:
    return [json.loads(line)["run_id"] for line in path.read_text().splitlines() if line.strip()]


def _outputs(run_cli, out_dir, *extra):
    report = json.loads(run_cli("report", "--json", "--by", "model", *extra).output)
    agreement = json.loads(run_cli("agreement", "--json", "--include-judges", "--n-boot", "0", "--no-gold",
                                   *extra).output)
    run_cli("export", "--format", "jsonl", "--out", out_dir, "--tables", "runs,events,annotations,gold_labels",
            *extra)
    files = {p.name: p.read_text() for p in sorted(out_dir.iterdir())}
    return report, agreement, files


def test_two_studies_scope_reports_agreement_progress_exports(engine, two_corpora, tmp_path):
    run_cli = two_corpora
    with Session(engine) as s:
        tax = resolve_taxonomy(s, None)
        base_progress = progress(s, tax)
    base = _outputs(run_cli, tmp_path / "base")
    # the demo corpus by its source, Who&When by the file it came from
    run_cli("study", "create", "demo", "--source", "demo(*", "--lead", "reviewer", "--member", "alice")
    run_cli("study", "create", "ww", "--source", "*whowhen*", "--taxonomy", "mast")
    demo_ids, ww_ids = _run_ids(engine, "demo"), _run_ids(engine, "ww")
    assert len(demo_ids) == 24 and len(ww_ids) == 2 and not demo_ids & ww_ids
    with Session(engine) as s:
        assert len(s.exec(select(Run.id)).all()) == 26

    # without a study: every output exactly as before the studies existed
    assert _outputs(run_cli, tmp_path / "after") == base
    with Session(engine) as s:
        assert progress(s, tax) == base_progress

    for name, ids, foreign in (("demo", demo_ids, ww_ids), ("ww", ww_ids, demo_ids)):
        report, agreement, _ = _outputs(run_cli, tmp_path / name, "--study", name)
        # the report counts only the study's runs: Who&When's model-less agents give the "(none)" row
        n_runs = {r["model"]: r["runs"] for r in report["rows"]}
        if name == "demo":
            assert None not in n_runs and "(none)" not in n_runs and n_runs
        else:
            assert len(n_runs) == 1 and sum(n_runs.values()) == 2
        # agreement: only the study's submissions
        with Session(engine) as s:
            from app.agreement.service import load_agreement_data

            data = load_agreement_data(s, include_judges=True, scope=study_run_ids(s, get_study(s, name)))
            assert set(data.submissions["run_id"]) <= ids
            if name == "demo":
                assert agreement["n_submissions"] == len(data.submissions) > 0
        # exports: runs, events, annotations of the study only
        runs = _jsonl_ids(tmp_path / name / "runs.jsonl")
        assert set(runs) == ids
        for table in ("events", "annotations"):
            got = set(_jsonl_ids(tmp_path / name / f"{table}.jsonl"))
            assert got and got <= ids and not got & foreign
        # progress: every count within the study
        with Session(engine) as s:
            st = get_study(s, name)
            from app.taxonomies.models import Taxonomy

            data = progress(s, s.get(Taxonomy, st.taxonomy_pk), study=st)
            assert sum(data["runs"]["counts"].values()) == len(ids)
            assert {r["run_id"] for r in data["runs"]["items"]} <= ids

    # the same through REST (study=) for an admin
    with Session(engine) as s:
        admin = s.exec(select(User).where(User.username == "admin")).one()
        token = create_token(s, admin)
        s.commit()
    from app.main import create_app

    c = TestClient(create_app(engine))
    hdr = {"Authorization": f"Bearer {token}"}
    whole = c.get("/api/v1/reports/outcomes?by=family", headers=hdr).json()
    scoped = c.get("/api/v1/reports/outcomes?by=family&study=ww", headers=hdr).json()
    assert sum(r["runs"] for r in scoped["rows"]) == 2 < sum(r["runs"] for r in whole["rows"])
    assert {r["family"] for r in scoped["rows"]} == {"who-and-when"}
    res = c.get("/api/v1/exports/runs.csv?study=demo", headers=hdr)
    assert res.status_code == 200 and len(res.text.strip().splitlines()) == 1 + 24
    assert not any(rid in res.text for rid in ww_ids)
    prog = c.get("/api/v1/progress?study=ww", headers=hdr).json()
    assert prog["study"] == "ww" and sum(prog["runs"]["counts"].values()) == 2
    assert c.get("/api/v1/reports/outcomes?study=nope", headers=hdr).status_code == 404
    assert c.get("/api/v1/agreement?study=demo&n_boot=0", headers=hdr).status_code == 200


def test_selection_filters(engine):
    """Every selection key picks what it says, on both databases (JSON fields included)."""
    from tests.annotations.factories import make_run

    with Session(engine) as s:
        a = make_run(s, "sel-a", family="commerce", model="model-a")
        b = make_run(s, "sel-b", family="legal", model="model-x")
        c = make_run(s, "sel-c", family="legal", model="model-a", status="failed")
        a.extra = {"tags": ["pilot", "q1"], "condition": "baseline"}
        b.extra = {"tags": ["q2"], "path": {"condition": "treated"}}
        c.source = "/data/batch-7/c.json"
        for r in (a, b, c):
            s.add(r)
        s.commit()

        def pick(sel):
            st = create_study(s, f"t{len(s.exec(select(Run.id)).all())}-{json.dumps(sel, sort_keys=True)}"[:200],
                              selection=sel)
            got = {rid for pk, rid in s.exec(select(Run.id, Run.run_id)).all() if pk in study_run_pks(s, st)}
            s.rollback()
            return got

        assert pick({}) == {"sel-a", "sel-b", "sel-c"}
        assert pick({"family": "legal"}) == {"sel-b", "sel-c"}
        assert pick({"model": ["model-a"]}) == {"sel-a", "sel-c"}
        assert pick({"family": "legal", "model": "model-a"}) == {"sel-c"}
        assert pick({"status": "failed"}) == {"sel-c"}
        assert pick({"tags": "pilot"}) == {"sel-a"}
        assert pick({"tags": ["q2", "q1"]}) == {"sel-a", "sel-b"}
        assert pick({"condition": "treated"}) == {"sel-b"}
        assert pick({"condition": ["baseline", "treated"]}) == {"sel-a", "sel-b"}
        assert pick({"source": "*/batch-7/*"}) == {"sel-c"}
        assert pick({"scenario": "commerce/*"}) == {"sel-a"}
        assert pick({"run_ids": ["sel-b"]}) == {"sel-b"}
        assert pick({"imported_after": "2000-01-01T00:00:00Z"}) == {"sel-a", "sel-b", "sel-c"}
        assert pick({"imported_before": "2000-01-01T00:00:00Z"}) == set()


@pytest.mark.parametrize("selection, message", [
    ({"colour": "red"}, "selection.colour: unknown filter"),
    ({"family": 3}, "selection.family: must be a string or a non-empty list"),
    ({"family": ["ok", ""]}, "selection.family[1]: must be a non-empty string"),
    ({"imported_after": "yesterday"}, "selection.imported_after: 'yesterday' is not an ISO date-time"),
    ("family=x", "selection: must be an object"),
])
def test_bad_selection_names_the_field(selection, message):
    from app.studies.service import StudyError

    with pytest.raises(StudyError) as err:
        check_selection(selection)
    assert str(err.value).startswith(message)
