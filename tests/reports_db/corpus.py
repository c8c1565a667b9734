"""A small hand-built corpus stored in the database; every report number in the tests is worked
out by hand from this table (threshold 0.5, taxonomy a2-failures latest).

run  family    alignment    status     agg  -> aggregate success
r1   commerce  competitive  completed  0.9  yes
r2   commerce  competitive  completed  0.6  yes
r3   crm       cooperative  failed     0.9  no (status)
r4   crm       mixed        completed  0.3  no (0.3 < 0.5)
r5   legal     competitive  completed  0.7  yes

principal (run)    kind          flag   score  -> own success   metrics
buyer (r1)         person        False  0.2    F                surplus -100
seller (r1)        organization  True   0.8    T
buyer (r2)         person        True   0.7    T                surplus 50
seller (r2)        organization  True   0.6    T
client (r3)        person        -      0.4    F (0.4 < 0.5)
vendor (r3)        organization  True   -      T
client (r4)        person        -      -      unknown
vendor (r4)        organization  False  0.1    F
plaintiff (r5)     person        True   0.9    T
defendant (r5)     organization  True   0.6    T

agents (id -> principal, model, harness)
r1: buyer_agent -> buyer, model-a, hx        seller_agent -> seller, model-b, hx
r2: buyer_agent -> buyer, model-b, hx        seller_agent -> seller, model-a, hy
r3: client_agent -> client, model-a, hx      vendor_agent -> vendor, model-a, hx
r4: client_agent -> client, model-a, hy      vendor_agent -> vendor, model-b, hy
r5: plaintiff_agent -> plaintiff, model-b, hx   defendant_agent -> defendant, model-b, hx

labels
r1: gold (adjudicated): CF1 on buyer_agent.  alice submitted CF1 buyer_agent; bob submitted DD2 seller_agent.
r2: alice submitted VF1 seller_agent + DD1 buyer_agent; bob submitted VF1 seller_agent; carol submitted
    "no failure".  An OPEN gold run with an accepted GR2 label (not adjudicated: ignored).
r3: alice submitted "no failure"; bob has a DRAFT with GR1 (drafts never count).
r4: only the audit of judge `l2`: CF2 on vendor_agent (a judge: not counted by auto / majority).
r5: alice submitted "no failure".

source auto: r1 gold; r2, r3, r5 human majority; r4 unlabelled
  -> "gold for 1 run, human majority for 3 runs, unlabelled 1 run"
  resolved labels: r1 {CF1 buyer_agent}; r2 {VF1 seller_agent} (2 of 3 voters; DD1 has 1 of 3);
  r3 {}; r5 {}.
"""
from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.annotations.models import GoldLabel, GoldRun
from app.annotations.service import resolve_taxonomy, save_annotation, sync_audit_annotations
from app.auth.service import create_token, create_user
from app.ingest.canonical import normalize_run
from app.ingest.loader import store_run
from app.runs.service import get_run

PASSWORD = "report-tests-pw"


def _run(run_id: str, family: str, alignment: str, status: str, agg: float,
         principals: list[tuple[str, str, bool | None, float | None, dict]],
         agents: list[tuple[str, str, str, str]], audits: list[dict] | None = None,
         metadata: dict | None = None) -> dict[str, Any]:
    events = [{"seq": i, "kind": "message", "actor": agents[i % 2][0], "recipients": [agents[(i + 1) % 2][0]],
               "content": f"message {i}"} for i in range(4)]
    return {
        "run_id": run_id,
        "scenario": {"id": f"{family}/s-{run_id}", "family": family, "alignment": alignment, "title": run_id},
        "status": status,
        "aggregate_score": agg,
        "principals": [{"id": pid, "kind": kind, "outcome": {"success": ok, "score": score, "metrics": metrics}}
                       for pid, kind, ok, score, metrics in principals],
        "agents": [{"id": aid, "principal": pid, "role": pid, "model": model, "harness": harness}
                   for aid, pid, model, harness in agents],
        "events": events,
        "audits": audits or [],
        "metadata": metadata or {},
    }


RUNS = [
    _run("r1", "commerce", "competitive", "completed", 0.9,
         [("buyer", "person", False, 0.2, {"surplus": -100}), ("seller", "organization", True, 0.8, {})],
         [("buyer_agent", "buyer", "model-a", "hx"), ("seller_agent", "seller", "model-b", "hx")]),
    _run("r2", "commerce", "competitive", "completed", 0.6,
         [("buyer", "person", True, 0.7, {"surplus": 50}), ("seller", "organization", True, 0.6, {})],
         [("buyer_agent", "buyer", "model-b", "hx"), ("seller_agent", "seller", "model-a", "hy")]),
    _run("r3", "crm", "cooperative", "failed", 0.9,
         [("client", "person", None, 0.4, {}), ("vendor", "organization", True, None, {})],
         [("client_agent", "client", "model-a", "hx"), ("vendor_agent", "vendor", "model-a", "hx")]),
    _run("r4", "crm", "mixed", "completed", 0.3,
         [("client", "person", None, None, {}), ("vendor", "organization", False, 0.1, {})],
         [("client_agent", "client", "model-a", "hy"), ("vendor_agent", "vendor", "model-b", "hy")],
         audits=[{"source": "l2", "level": "L2", "mode": "CF2", "agent": "vendor_agent", "evidence": [1]}]),
    _run("r5", "legal", "competitive", "completed", 0.7,
         [("plaintiff", "person", True, 0.9, {}), ("defendant", "organization", True, 0.6, {})],
         [("plaintiff_agent", "plaintiff", "model-b", "hx"), ("defendant_agent", "defendant", "model-b", "hx")],
         metadata={"demo_truth": [], "batch": "b1"}),  # seeded truth: exported to admins only
]


def label(mode: str, agent: str, evidence: list[int] | None = None) -> dict[str, Any]:
    return {"mode": mode, "agent": agent, "evidence": evidence or [1]}


def build(session: Session, passwords: tuple[str, ...] = ()) -> dict[str, str]:
    """Store the corpus, users and labels; returns API tokens by user name (alice, bob, carol:
    annotators; rita: reviewer; adam: admin).  Users named in ``passwords`` get PASSWORD (hashing
    is slow, so only the page tests ask for it)."""
    for raw in RUNS:
        store_run(session, normalize_run(raw), after_store=sync_audit_annotations)
    users = {name: create_user(session, name, role, password=PASSWORD if name in passwords else None)
             for name, role in (("alice", "annotator"), ("bob", "annotator"), ("carol", "annotator"),
                                ("rita", "reviewer"), ("adam", "admin"))}
    tax = resolve_taxonomy(session, None)
    run = {r["run_id"]: get_run(session, r["run_id"]) for r in RUNS}

    def submit(who: str, run_id: str, labels: list[dict], *, draft: bool = False) -> None:
        save_annotation(session, users[who], run[run_id], tax, labels, no_failure=not labels and not draft,
                        status="draft" if draft else "submitted")

    submit("alice", "r1", [label("CF1", "buyer_agent")])
    submit("bob", "r1", [label("DD2", "seller_agent")])
    submit("alice", "r2", [label("VF1", "seller_agent"), label("DD1", "buyer_agent")])
    submit("bob", "r2", [label("VF1", "seller_agent", [2])])
    submit("carol", "r2", [])
    submit("alice", "r3", [])
    submit("bob", "r3", [label("GR1", "client_agent")], draft=True)
    submit("alice", "r5", [])
    session.flush()

    gold_r1 = GoldRun(run_pk=run["r1"].id, taxonomy_pk=tax.id, status="adjudicated", reviewer_id=users["rita"].id)
    open_r2 = GoldRun(run_pk=run["r2"].id, taxonomy_pk=tax.id, status="open")
    session.add_all([gold_r1, open_r2])
    session.flush()
    session.add_all([
        GoldLabel(gold_run_id=gold_r1.id, mode="CF1", agent="buyer_agent", evidence=[1], origin="adjudication",
                  created_by=users["rita"].id),
        GoldLabel(gold_run_id=open_r2.id, mode="GR2", agent="buyer_agent", evidence=[1], origin="unanimity"),
    ])
    session.flush()
    return {name: create_token(session, user) for name, user in users.items()}
