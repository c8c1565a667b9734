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


#: `Run.source` of the runs `a2annotate demo` stores (see app/cli/demo.py): the demo seeds these only
DEMO_SOURCE_PREFIX = "demo"
#: `Assignment.batch` of the assignments the demo creates
DEMO_BATCH = "demo"


def demo_runs(session: Session, run_ids: list[str] | None = None, limit: int | None = None) -> list[Run]:
    """The demo's own runs, by run_id: stored by the demo (source ``demo...``) and, when `run_ids`
    is given, among those ids. A run the user imported is never one of them, whatever its id."""
    q = select(Run).where(Run.source.startswith(DEMO_SOURCE_PREFIX)).order_by(Run.run_id)
    if run_ids is not None:
        if not run_ids:
            return []
        q = q.where(Run.run_id.in_(list(run_ids)))
    if limit is not None:
        q = q.limit(limit)
    return list(session.exec(q).all())


def seed_annotations(engine: Engine, taxonomy_pk: int, *, n_assigned: int = 60, n_simulated: int = 40,
                     k: int = 3, seed: int = 0, run_ids: list[str] | None = None,
                     progress: Callable[[str], None] | None = None) -> DemoSeedResult:
    """Create demo users, assign `n_assigned` of the demo's own runs (`demo_runs`, optionally only
    `run_ids`) to every demo annotator (overlap k) and simulate submitted labels on the first
    `n_simulated` of them, leaving the rest of each queue open.

    Every step is idempotent and touches only what the demo creates: existing users keep their
    password; a (run, annotator) pair that already has an assignment or an annotation under any
    taxonomy version is left alone, so simulated labels are only ever written together with the
    demo assignment they belong to, on a demo run, for a demo annotator who has none there."""
    with Session(engine) as session:
        made = ensure_demo_users(session)
        annotators = [n for n, (role, _, _) in DEMO_USERS.items() if role == "annotator"][:k]
        users = {n: get_user(session, n) for n in annotators}
        runs = demo_runs(session, run_ids, n_assigned)
        pks = [r.id for r in runs]
        uids = [u.id for u in users.values()]
        taken: set[tuple[int, int]] = set()
        if pks and uids:
            for model in (Assignment, Annotation):
                taken |= set(session.exec(select(model.run_pk, model.user_id).where(
                    model.run_pk.in_(pks), model.user_id.in_(uids))).all())
        assigned = simulated = 0
        from app.runs.service import to_canonical

        for pos, run in enumerate(runs):
            canon = None
            for name in annotators:
                user = users[name]
                # the pair's random draws happen whether or not it is seeded: same seed, same labels
                pair_rng = random.Random(f"{seed}:{run.run_id}:{name}")
                if (run.id, user.id) in taken:
                    continue
                session.add(Assignment(run_pk=run.id, user_id=user.id, taxonomy_pk=taxonomy_pk, position=pos,
                                       batch=DEMO_BATCH))
                assigned += 1
                if pos >= n_simulated:
                    continue
                canon = canon or to_canonical(session, run)
                truth = (canon.get("metadata") or {}).get("demo_truth") or []
                agents = [a["id"] for a in canon["agents"]]
                labels = simulate_labels(truth, agents, DEMO_USERS[name][2], pair_rng)
                ann = Annotation(run_pk=run.id, user_id=user.id, taxonomy_pk=taxonomy_pk, status="submitted",
                                 no_failure=not labels, origin="human", time_ms=pair_rng.randint(60_000, 600_000),
                                 submitted_at=utcnow())
                session.add(ann)
                session.flush()
                for lab in labels:
                    session.add(Label(annotation_id=ann.id, mode=lab["mode"], agent=lab["agent"],
                                      principals=lab["principals"], evidence=lab["evidence"],
                                      time_ms=pair_rng.randint(10_000, 120_000)))
                simulated += 1
        session.commit()
    return DemoSeedResult(users=made, assigned=assigned, simulated=simulated)
