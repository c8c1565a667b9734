"""Put the demo corpus in a database: runs, demo users, assignments and simulated human labels.

The simulated annotators start from each run's seeded truth (`metadata.demo_truth`) and make the
kinds of mistakes people make (miss a mode, pick a neighbouring mode, blame the other agent,
attach less evidence), at a per-annotator rate, so agreement, adjudication and reports have
something real to show. Everything is deterministic in the seed.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.annotations.models import Annotation, Assignment, Label
from app.auth.service import create_user, get_user, set_password
from app.runs.models import Run, utcnow

#: username -> (role, password, error rate); the passwords are for the local demo only
DEMO_USERS = {
    "admin": ("admin", "admin-demo", None),
    "reviewer": ("reviewer", "reviewer-demo", None),
    "alice": ("annotator", "alice-demo", 0.10),
    "bob": ("annotator", "bob-demo", 0.20),
    "carol": ("annotator", "carol-demo", 0.30),
}

#: modes an annotator confuses with each other (boundaries named in the taxonomy)
NEIGHBOURS = {"GR1": "CF4", "CF4": "GR1", "GR2": "GR3", "GR3": "GR2", "VF1": "VF4", "VF4": "VF1",
              "CF2": "CF3", "CF3": "CF2", "DD2": "DD3", "DD3": "DD2", "VF2": "VF3", "VF3": "VF2"}


@dataclass
class DemoSeedResult:
    users: list[str]
    assigned: int
    simulated: int


def ensure_demo_users(session: Session) -> list[str]:
    made = []
    for name, (role, password, _) in DEMO_USERS.items():
        if get_user(session, name) is None:
            user = create_user(session, name, role)
            set_password(session, user, password)
            made.append(name)
    return made


def simulate_labels(truth: list[dict], agents: list[str], rate: float, rng: random.Random) -> list[dict]:
    """One simulated annotator's labels for a run, from the seeded truth with errors at `rate`."""
    out = []
    for t in truth:
        r = rng.random()
        if r < rate * 0.4:
            continue  # missed
        mode, agent, evidence = t["mode"], t["agent"], list(t["evidence"])
        if r < rate * 0.7 and mode in NEIGHBOURS:
            mode = NEIGHBOURS[mode]
        elif r < rate * 0.85 and len(agents) > 1:
            agent = rng.choice([a for a in agents if a != agent])
        if len(evidence) > 1 and rng.random() < rate:
            evidence = evidence[:1]
        out.append({"mode": mode, "agent": agent, "evidence": evidence, "principals": t.get("principals", [])})
    if rng.random() < rate * 0.3 and agents:
        out.append({"mode": rng.choice(["DD5", "VF1", "GR4", "CF2"]), "agent": rng.choice(agents),
                    "evidence": [0], "principals": []})
    dedup = {(label["mode"], label["agent"]): label for label in out}
    return list(dedup.values())


def seed_annotations(engine: Engine, taxonomy_pk: int, *, n_assigned: int = 60, n_simulated: int = 40,
                     k: int = 3, seed: int = 0, progress: Callable[[str], None] | None = None) -> DemoSeedResult:
    """Create demo users, assign `n_assigned` runs to every annotator (overlap k) and simulate
    submitted labels on the first `n_simulated` of them, leaving the rest of each queue open."""
    rng = random.Random(seed)
    with Session(engine) as session:
        made = ensure_demo_users(session)
        annotators = [n for n, (role, _, _) in DEMO_USERS.items() if role == "annotator"][:k]
        users = {n: get_user(session, n) for n in annotators}
        runs = session.exec(select(Run).order_by(Run.run_id).limit(n_assigned)).all()
        assigned = simulated = 0
        from app.runs.service import to_canonical

        for pos, run in enumerate(runs):
            canon = None
            for name in annotators:
                user = users[name]
                if session.exec(select(Assignment).where(Assignment.run_pk == run.id, Assignment.user_id == user.id,
                                                         Assignment.taxonomy_pk == taxonomy_pk)).first():
                    continue
                session.add(Assignment(run_pk=run.id, user_id=user.id, taxonomy_pk=taxonomy_pk, position=pos,
                                       batch="demo"))
                assigned += 1
                if pos >= n_simulated:
                    continue
                canon = canon or to_canonical(session, run)
                truth = (canon.get("metadata") or {}).get("demo_truth") or []
                agents = [a["id"] for a in canon["agents"]]
                labels = simulate_labels(truth, agents, DEMO_USERS[name][2], rng)
                ann = Annotation(run_pk=run.id, user_id=user.id, taxonomy_pk=taxonomy_pk, status="submitted",
                                 no_failure=not labels, origin="human", time_ms=rng.randint(60_000, 600_000),
                                 submitted_at=utcnow())
                session.add(ann)
                session.flush()
                for lab in labels:
                    session.add(Label(annotation_id=ann.id, mode=lab["mode"], agent=lab["agent"],
                                      principals=lab["principals"], evidence=lab["evidence"],
                                      time_ms=rng.randint(10_000, 120_000)))
                simulated += 1
        session.commit()
    return DemoSeedResult(users=made, assigned=assigned, simulated=simulated)
