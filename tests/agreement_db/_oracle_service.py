"""``load_agreement_data`` before issue 14 (ORM rows, JSON decoded per value), kept verbatim as the
oracle of ``test_loader_equivalence``."""
from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import select
from sqlmodel import Session

from app.agreement.service import (
    ATTRIBUTION_COLUMNS,
    LABEL_COLUMNS,
    AgreementData,
    AgreementError,
    _resolve_taxonomy,
    parse_annotators,
)
from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.runs.models import Agent, Run, Scenario


def _run_families(session: Session) -> dict[int, tuple[str, str | None]]:
    """run pk -> (run_id, family), the run's own scenario object winning."""
    out = {}
    for pk, run_id, fam, override in session.execute(
        select(Run.id, Run.run_id, Scenario.family, Run.scenario_override).join(Scenario, Scenario.id == Run.scenario_id)
    ):
        if override:
            fam = override.get("family", fam)
        out[pk] = (run_id, fam)
    return out


def load_agreement_data(session: Session, *, taxonomy: str | None = None, family: str | None = None,
                        annotators: Any = None, include_judges: bool = False) -> AgreementData:
    """Returns the :class:`AgreementData` of the submitted annotations under the taxonomy version
    ``taxonomy`` (default the latest a2-failures), of runs of ``family`` (all when None), by
    ``annotators`` (comma list or list of user names; all humans when None) plus judges when
    ``include_judges``.  Raises :class:`AgreementError` for an unknown taxonomy or annotator."""
    from app.taxonomies.service import mode_category, mode_codes

    tax = _resolve_taxonomy(session, taxonomy)
    cats = mode_category(tax)
    modes = mode_codes(tax)
    family = family.strip() if isinstance(family, str) and family.strip() else None
    wanted = parse_annotators(annotators)
    if wanted is not None:
        found = set(session.execute(select(User.username).where(User.username.in_(wanted))).scalars())
        missing = [n for n in wanted if n not in found]
        if missing:
            raise AgreementError("annotators", f"unknown annotator {missing[0]!r}")

    runs = {pk: rid for pk, (rid, fam) in _run_families(session).items() if family is None or fam == family}

    def keep_user(name: str, kind: str) -> bool:
        if wanted is not None:
            return name in wanted
        return kind == "human" or include_judges

    kinds: dict[str, str] = {}
    sub_rows: list[tuple] = []
    for pk, name, kind in session.execute(
        select(Annotation.run_pk, User.username, User.kind).join(User, User.id == Annotation.user_id)
        .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted")
    ):
        if pk in runs and keep_user(name, kind):
            kind = "judge" if kind == "judge" else "human"
            kinds[name] = kind
            sub_rows.append((name, kind, runs[pk]))
    label_rows: list[tuple] = []
    attribution_rows: list[tuple] = []
    for pk, name, kind, mode, agent, evidence in session.execute(
        select(Annotation.run_pk, User.username, User.kind, Label.mode, Label.agent, Label.evidence)
        .join(Annotation, Annotation.id == Label.annotation_id).join(User, User.id == Annotation.user_id)
        .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted").order_by(Label.id)
    ):
        if pk in runs and keep_user(name, kind) and mode in cats:
            label_rows.append((name, "judge" if kind == "judge" else "human", runs[pk], mode, cats[mode],
                               agent or None, sorted({int(s) for s in (evidence or [])})))
        elif pk in runs and keep_user(name, kind) and mode is None:
            attribution_rows.append((name, "judge" if kind == "judge" else "human", runs[pk], agent or None,
                                     sorted({int(s) for s in (evidence or [])})))
    agent_rows = [(runs[pk], aid) for pk, aid in session.execute(
        select(Agent.run_pk, Agent.agent_id).order_by(Agent.run_pk, Agent.position)) if pk in runs]
    gold_runs = sorted({runs[pk] for (pk,) in session.execute(
        select(GoldRun.run_pk).where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated"))
        if pk in runs})
    gold_rows = [
        (runs[pk], mode, agent or None, sorted({int(s) for s in (ev or [])}), origin)
        for pk, mode, agent, ev, origin in session.execute(
            select(GoldRun.run_pk, GoldLabel.mode, GoldLabel.agent, GoldLabel.evidence, GoldLabel.origin)
            .join(GoldRun, GoldRun.id == GoldLabel.gold_run_id)
            .where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated", GoldLabel.accepted.is_(True))
            .order_by(GoldLabel.id))
        if pk in runs and mode in cats
    ]
    return AgreementData(
        taxonomy=tax, modes=modes, mode_category=cats,
        labels=pd.DataFrame(label_rows, columns=list(LABEL_COLUMNS)),
        submissions=pd.DataFrame(sorted(set(sub_rows)), columns=["annotator", "kind", "run_id"]),
        agents=pd.DataFrame(agent_rows, columns=["run_id", "agent_id"]),
        gold_labels=pd.DataFrame(gold_rows, columns=["run_id", "mode", "agent", "evidence", "origin"]),
        gold_runs=gold_runs, kinds=kinds, family=family, include_judges=bool(include_judges),
        annotators_filter=wanted,
        attributions=pd.DataFrame(attribution_rows, columns=list(ATTRIBUTION_COLUMNS)),
    )
