"""End to end on the demo corpus with simulated annotators alice, bob and carol (and the demo's
judges): dashboard with heatmap, disagreement list, adjudicating a run through the page forms,
gold labels with their origins, agreement with gold, judges' precision and recall."""
from __future__ import annotations

import functools
import re

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.agreement import adjudication as adj
from app.annotations.models import Annotation, GoldLabel, GoldRun
from app.auth.models import User
from app.auth.security import hash_password
from app.auth.service import create_user, get_user
from app.demo.generator import generate_runs
from app.demo.seeding import DEMO_USERS, seed_annotations
from app.ingest.items import ImportItem
from app.ingest.loader import _after_store_default, load_items
from app.runs.models import Event, Run
from app.taxonomies.service import latest
from tests.api.clients import login

N_RUNS = 12


@functools.lru_cache
def _hash(password: str) -> str:
    return hash_password(password)


def _demo_users(engine) -> None:
    """The demo's users (as `ensure_demo_users` makes them), hashing only the two passwords the
    test logs in with, once per process: argon2 is slow on purpose."""
    with Session(engine) as s:
        for name, (role, password, _) in DEMO_USERS.items():
            user = create_user(s, name, role)
            if name in ("reviewer", "alice"):
                user.password_hash = _hash(password)
        s.commit()


@pytest.fixture
def demo(engine):
    _demo_users(engine)
    summary = load_items(engine, (ImportItem(run=d.run, source="demo") for d in generate_runs(N_RUNS, 5)),
                         after_store=_after_store_default)
    assert summary.imported == N_RUNS, summary.errors
    with Session(engine) as s:
        tax_pk = latest(s, "a2-failures").id
    res = seed_annotations(engine, tax_pk, n_assigned=N_RUNS, n_simulated=N_RUNS, seed=2)
    assert res.simulated == 3 * N_RUNS
    return engine


def _pick_run(engine) -> tuple[str, list[int]]:
    """A run with a unanimity candidate and a judge annotation; returns (run_id, event seqs)."""
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        judged = set(s.exec(select(Annotation.run_pk).join(User, User.id == Annotation.user_id)
                            .where(User.kind == "judge")).all())
        for run in s.exec(select(Run).order_by(Run.run_id)).all():
            cands = adj.candidates(adj.submitted_labels(s, run, tax))
            if run.id in judged and any(c["status"] == "unanimity" for c in cands):
                seqs = s.exec(select(Event.seq).where(Event.run_pk == run.id).order_by(Event.seq)).all()
                return run.run_id, list(seqs)
    raise AssertionError("the demo corpus has no judged run with a unanimous label")


def test_agreement_pages_and_adjudication_on_demo_data(demo, app):
    client = TestClient(app)
    csrf = login(client, "reviewer", "reviewer-demo")

    page = client.get("/agreement", params={"n_boot": 50})
    assert page.status_code == 200
    assert 'id="kappa-heatmap"' in page.text and "<svg" in page.text and "Pairwise Cohen" in page.text
    assert 'id="agreement-table"' in page.text and 'id="paradox-note"' in page.text
    for name in ("alice", "bob", "carol"):
        assert f">{name}<" in page.text or f"{name}</text>" in page.text
    assert client.get("/agreement", params={"level": "agent", "include_judges": "1", "n_boot": 20}).status_code == 200
    assert client.get("/agreement", params={"annotators": ["alice", "bob"], "n_boot": 0}).status_code == 200
    assert client.get("/agreement", params={"taxonomy": "nope@9"}).status_code == 422

    dis = client.get("/disagreements")
    assert dis.status_code == 200
    listed = re.findall(r'<section class="card disagreement"', dis.text)
    total = client.get("/api/v1/agreement/disagreements").json()["total"]
    assert len(listed) == total == N_RUNS  # every run has three submitted annotators
    assert re.search(r'href="/runs/[^"#]+#e-\d+"', dis.text)  # evidence links into the trace
    assert "/adjudicate/" in dis.text

    run_id, seqs = _pick_run(demo)
    url = f"/adjudicate/{run_id}"
    page = client.get(url)
    assert page.status_code == 200
    unanimity = re.findall(r'data-gold-id="(\d+)" data-origin="unanimity"', page.text)
    assert unanimity, "pre-accepted unanimity labels are shown"
    with Session(demo) as s:
        run = s.exec(select(Run).where(Run.run_id == run_id)).one()
        tax = latest(s, "a2-failures")
        view = adj.adjudication_view(s, run, tax)
    used = {(g["mode"], g["agent"]) for g in view["gold"]}
    agent = view["agents"][0]
    new_mode = next(m for m in ("DD1", "DD2", "GR5", "VF5", "CF5") if (m, agent) not in used)

    def post(**form):
        return client.post(url, data={"csrf_token": csrf, "taxonomy": view["taxonomy"], **form}, follow_redirects=False)

    r = post(action="undo", gold_label_id=unanimity[0])
    assert r.status_code == 303
    assert "Rejected gold label" in client.get(r.headers["location"]).text  # undo: the button says Reject
    r = post(action="add", label_mode=new_mode, label_agent=agent, label_evidence="9999", rationale="x")
    assert r.status_code == 303
    assert "label.evidence[0]: 9999 is not an event seq" in client.get(r.headers["location"]).text
    r = post(action="add", label_mode=new_mode, label_agent=agent, label_evidence=f"{seqs[0]}, {seqs[-1]}",
             rationale="seen in the trace")
    assert r.status_code == 303
    assert client.post(url, data={"action": "finish", "rationale": "no token"}).status_code == 403  # CSRF
    r = post(action="finish", rationale="unanimous labels kept except one; one failure added")
    assert r.status_code == 303
    done = client.get(r.headers["location"]).text
    assert "adjudicated" in done and 'id="reopen-form"' in done

    with Session(demo) as s:
        run = s.exec(select(Run).where(Run.run_id == run_id)).one()
        gold = s.exec(select(GoldRun).where(GoldRun.run_pk == run.id)).one()
        assert gold.status == "adjudicated" and gold.no_failure is False
        assert gold.reviewer_id == get_user(s, "reviewer").id and gold.rationale.startswith("unanimous labels")
        rows = s.exec(select(GoldLabel).where(GoldLabel.gold_run_id == gold.id)).all()
        by_id = {g.id: g for g in rows}
        assert by_id[int(unanimity[0])].origin == "unanimity" and by_id[int(unanimity[0])].accepted is False
        added = [g for g in rows if g.origin == "adjudication"]
        assert [(g.mode, g.agent, g.evidence, g.accepted) for g in added] == [
            (new_mode, agent, [seqs[0], seqs[-1]], True)]
        assert all(g.origin in ("unanimity", "adjudication") for g in rows)

    g = client.get("/api/v1/agreement/gold", params={"n_boot": 0}).json()
    assert g["n_reference_runs"] == 1
    rows = {a["annotator"]: a for a in g["annotators"]}
    assert {"alice", "bob", "carol"} <= set(rows)
    assert all(rows[n]["n_runs"] == 1 and rows[n]["cohen_kappa"]["n_units"] == 20  # one run x 20 modes
               for n in ("alice", "bob", "carol"))
    # every human missed the added mode: recall below 1
    assert all(rows[n]["micro"]["fn"] >= 1 and rows[n]["micro"]["recall"] < 1 for n in ("alice", "bob", "carol"))
    judges = [a for a in g["annotators"] if a["kind"] == "judge" and a["n_runs"] == 1]
    assert judges, "a judge of the adjudicated run is compared with gold"
    for a in judges:
        assert {"precision", "recall", "f1"} <= set(a["micro"])
        assert all({"precision", "recall"} <= set(p) for p in a["per_mode"])
        assert a["micro"]["fn"] >= 1  # the judge did not flag the reviewer's added failure either

    page = client.get("/agreement", params={"n_boot": 0})
    assert 'id="gold-agreement"' in page.text and "1 adjudicated run(s)" in page.text

    jp = client.get("/agreement/judges")
    assert jp.status_code == 200 and 'id="judge-heatmap"' in jp.text and 'id="judges-vs-gold"' in jp.text
    j = client.get("/api/v1/agreement/judges", params={"n_boot": 0}).json()
    kinds = dict(zip(j["pairwise_cohen"]["annotators"], j["pairwise_cohen"]["kinds"]))
    assert {k for k, v in kinds.items() if v == "human"} == {"alice", "bob", "carol"}
    assert any(v == "judge" for v in kinds.values())
    vm = j["vs_human_majority"]["annotators"]
    assert vm and all(a["kind"] == "judge" for a in vm)
    assert any(a["micro"]["recall"] is not None and a["micro"]["precision"] is not None for a in vm)

    # annotators and visitors do not get the reviewer pages
    client = TestClient(app)
    login(client, "alice", "alice-demo")
    for path in ("/agreement", "/agreement/judges", "/disagreements", "/adjudicate/whatever"):
        assert client.get(path).status_code == 403, path
    anon = TestClient(app)
    r = anon.get("/agreement", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
