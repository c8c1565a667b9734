"""Outcome reports from the database: the frames the pure functions of
:mod:`app.reports.outcomes` read, and the JSON payloads the API, the CLI and the pages share.

Which labels count (``source``, see :func:`app.reports.outcomes.resolve_labels`):

* **gold**: the accepted ``GoldLabel`` rows of ``GoldRun`` rows whose status is
  ``adjudicated`` (an open gold run is a proposal, not gold);
* **human**: labels of *submitted* annotations by users of kind ``human`` (drafts never count);
  the submitted annotations (with or without labels) are the submissions;
* **judge**: labels of submitted annotations by users of kind ``judge`` (run audits and
  imported judges); they are used only with ``source=annotator:judge:<name>``.

A report is made under one taxonomy version (``taxonomy``: ``key``, ``key@version`` or id;
default the latest a2-failures), so every mode means one thing.  The success threshold is
``Settings.success_threshold``.  Agents acting for no principal are left out (they have no
principal outcome); a label naming such an agent counts for its run without an agent.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy import Text, cast, select
from sqlmodel import Session

from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.core.db import fetch_rows, gc_paused
from app.core.errors import FieldError
from app.reports.outcomes import (
    AGENT_COLUMNS,
    BLIND_SPOT_RATE_GROUPINGS,
    GROUPINGS,
    LABEL_COLUMNS,
    PRINCIPAL_COLUMNS,
    RUN_COLUMNS,
    SUBMISSION_COLUMNS,
    blind_spot_rates,
    blind_spots,
    crossplay,
    crossplay_matrix,
    outcome_report,
    resolve_labels,
    to_records,
)
from app.runs.models import Agent, Principal, Run, Scenario
from app.taxonomies.models import Taxonomy

__all__ = [
    "BLIND_SPOT_RATE_BY",
    "CROSSPLAY_BY",
    "CROSSPLAY_VALUES",
    "OUTCOME_BY",
    "ReportData",
    "ReportError",
    "blind_spot_frames",
    "blind_spots_payload",
    "check_source",
    "crossplay_frame",
    "crossplay_payload",
    "filter_options",
    "load_report_data",
    "outcome_frame",
    "outcomes_payload",
    "resolve_taxonomy",
]

#: ``by`` values of the outcome report (the API, CLI and page offer these).
OUTCOME_BY: tuple[str, ...] = ("agent", "principal", "family", "model", "harness", "alignment", "scenario")
CROSSPLAY_BY: tuple[str, ...] = ("model", "harness")
#: Cross-play columns a matrix can show.
CROSSPLAY_VALUES: tuple[str, ...] = ("a_mean_score", "b_mean_score", "a_success_rate", "b_success_rate", "n", "runs")
#: Groupings of the blind-spot rates shipped with the blind-spot report.
BLIND_SPOT_RATE_BY: tuple[str, ...] = ("family", "model", "alignment")


class ReportError(FieldError):
    """A bad report request; ``field`` names the parameter (``taxonomy``, ``source``, ...)."""


@dataclass
class ReportData:
    """Everything a report reads, as the frames :mod:`app.reports.outcomes` expects."""

    taxonomy: Taxonomy
    threshold: float
    runs: pd.DataFrame
    principals: pd.DataFrame
    agents: pd.DataFrame
    labels: pd.DataFrame
    submissions: pd.DataFrame
    gold_runs: list[str]
    modes: list[str] = field(default_factory=list)
    mode_category: dict[str, str] = field(default_factory=dict)
    family: str | None = None

    @property
    def taxonomy_ref(self) -> str:
        """Returns ``key@version`` of the taxonomy version the report uses."""
        return f"{self.taxonomy.key}@{self.taxonomy.version}"


def _label_rows(session: Session, tax: Taxonomy, pk_to_id: dict[int, str], known_agents: set[tuple[str, str]],
                cats: dict[str, str]) -> tuple[list[tuple], list[tuple], list[str]]:
    """Returns (labels, submissions, gold_runs) rows of the runs in ``pk_to_id`` under ``tax``: the
    submitted labels in label order, then the accepted gold labels in gold label order."""
    labels = [
        (pk_to_id[pk], username, mode, cats.get(mode),
         agent if agent and (pk_to_id[pk], agent) in known_agents else None, "human" if kind == "human" else "judge")
        for pk, username, kind, mode, agent in fetch_rows(session, (
            select(Annotation.run_pk, User.username, User.kind, Label.mode, Label.agent)
            .join(Annotation, Annotation.id == Label.annotation_id)
            .join(User, User.id == Annotation.user_id)
            .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted", Label.mode.is_not(None))
            .order_by(Label.id)))
        if pk in pk_to_id
    ]
    submissions = sorted({
        (pk_to_id[pk], username)
        for pk, username in fetch_rows(session, (
            select(Annotation.run_pk, User.username).join(User, User.id == Annotation.user_id)
            .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted", User.kind == "human")))
        if pk in pk_to_id
    })
    gold_runs = sorted({
        pk_to_id[pk]
        for (pk,) in fetch_rows(session, (
            select(GoldRun.run_pk).where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated")))
        if pk in pk_to_id
    })
    labels += [
        (pk_to_id[pk], None, mode, cats.get(mode),
         agent if agent and (pk_to_id[pk], agent) in known_agents else None, "gold")
        for pk, mode, agent in fetch_rows(session, (
            select(GoldRun.run_pk, GoldLabel.mode, GoldLabel.agent)
            .join(GoldRun, GoldRun.id == GoldLabel.gold_run_id)
            .where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated", GoldLabel.accepted.is_(True))
            .order_by(GoldLabel.id)))
        if pk in pk_to_id
    ]
    return labels, submissions, gold_runs


def _json_value(value: Any) -> Any:
    """A JSON column read as text (cast in SQL), or already decoded by a driver."""
    return json.loads(value) if type(value) is str else value


def _json_dict(value: Any) -> Any:
    """A ``metrics`` value: ``{}`` for NULL / ``{}`` / ``null``, else the decoded JSON."""
    if not value or value == "{}" or value == "null":
        return {}
    return _json_value(value) or {}


def _json_dicts(texts: list[Any]) -> list[Any]:
    """:func:`_json_dict` of each value, the texts decoded with one ``json.loads`` of their JSON
    array (one call instead of one per principal); value by value when that array does not parse
    into as many values (a text that is not one JSON value)."""
    if texts and all(type(t) is str and t for t in texts):
        try:
            values = json.loads("[" + ",".join(texts) + "]")
        except ValueError:
            values = None
        if values is not None and len(values) == len(texts):
            return [v or {} for v in values]
    return [_json_dict(t) for t in texts]


def _flag(value: Any) -> bool | None:
    """A boolean column read raw: SQLite gives 0 / 1."""
    return None if value is None else bool(value)


def resolve_taxonomy(session: Session, ref: str | None) -> Taxonomy:
    """Returns the taxonomy version ``ref`` names (default latest a2-failures); raises
    :class:`ReportError` naming ``taxonomy`` when there is none."""
    from app.taxonomies.service import resolve

    tax = resolve(session, ref or None)
    if tax is None:
        raise ReportError("taxonomy", f"unknown taxonomy {ref!r}" if ref else "no taxonomy is registered")
    return tax


@gc_paused()
def load_report_data(session: Session, *, threshold: float, taxonomy: str | None = None,
                     family: str | None = None, with_labels: bool = True, scope: Any = None) -> ReportData:
    """Returns the :class:`ReportData` of every stored run (of ``family`` if given) under the
    taxonomy version ``taxonomy`` (default: latest a2-failures); ``with_labels=False`` leaves the
    label frames empty (cross-play needs none); ``scope`` (a study's run-id subquery,
    app.studies.service.study_run_ids) keeps only those runs.  Raises :class:`ReportError` for an unknown
    taxonomy."""
    from app.taxonomies.service import mode_category, mode_codes

    tax = resolve_taxonomy(session, taxonomy)
    cats = mode_category(tax)

    # Core statements read with one fetchall each (no ORM or Row handling), JSON columns cast to
    # text in SQL and decoded here: overrides where there is one, the metrics in one call
    run_q = (select(Run.id, Run.run_id, Run.scenario_id, Run.status, Run.aggregate_score,
                    cast(Run.scenario_override, Text), Scenario.family, Scenario.alignment)
             .join(Scenario, Scenario.id == Run.scenario_id).order_by(Run.run_id))
    if scope is not None:
        run_q = run_q.where(Run.id.in_(scope))
    runs: list[tuple] = []
    pk_to_id: dict[int, str] = {}
    for pk, run_id, scenario_id, status, agg, override, fam, alignment in fetch_rows(session, run_q):
        if override and type(override) is str:
            override = None if override == "null" else _json_value(override)
        if override:  # the run's own scenario object differs from the stored one
            fam = override.get("family", fam)
            alignment = override.get("alignment", alignment)
        if family is not None and fam != family:
            continue
        pk_to_id[pk] = run_id
        runs.append((run_id, scenario_id, fam, alignment, status, agg))

    p_rows = [r for r in fetch_rows(session, select(
        Principal.run_pk, Principal.principal_id, Principal.kind, Principal.success, Principal.score,
        cast(Principal.metrics, Text)).order_by(Principal.run_pk, Principal.position)) if r[0] in pk_to_id]
    principals = [
        (pk_to_id[pk], pid, kind, _flag(success), score, metrics)
        for (pk, pid, kind, success, score, _), metrics in zip(p_rows, _json_dicts([r[5] for r in p_rows]))
    ]
    agents = [
        (pk_to_id[pk], aid, pid, role, model, harness)
        for pk, aid, pid, role, model, harness in fetch_rows(session, (
            select(Agent.run_pk, Agent.agent_id, Agent.principal_id, Agent.role, Agent.model, Agent.harness)
            .order_by(Agent.run_pk, Agent.position)))
        if pk in pk_to_id and pid is not None
    ]
    labels, submissions, gold_runs = (
        _label_rows(session, tax, pk_to_id, {(a[0], a[1]) for a in agents}, cats) if with_labels else ([], [], [])
    )

    return ReportData(
        taxonomy=tax,
        threshold=float(threshold),
        runs=pd.DataFrame(runs, columns=list(RUN_COLUMNS)),
        principals=pd.DataFrame(principals, columns=list(PRINCIPAL_COLUMNS)),
        agents=pd.DataFrame(agents, columns=list(AGENT_COLUMNS)),
        labels=pd.DataFrame(labels, columns=list(LABEL_COLUMNS)),
        submissions=pd.DataFrame(submissions, columns=list(SUBMISSION_COLUMNS)),
        gold_runs=gold_runs,
        modes=mode_codes(tax),
        mode_category=cats,
        family=family,
    )


def check_source(source: Any) -> str:
    """Returns ``source`` when it is ``auto``, ``gold``, ``majority`` or ``annotator:<name>``;
    raises :class:`ReportError` naming ``source`` otherwise."""
    if isinstance(source, str) and (source in ("auto", "gold", "majority")
                                    or (source.startswith("annotator:") and len(source) > len("annotator:"))):
        return source
    raise ReportError("source", f"must be auto, gold, majority or annotator:<name>, got {source!r}")


def _resolved(data: ReportData, source: str) -> tuple[pd.DataFrame, str]:
    return resolve_labels(data.labels, data.submissions, data.gold_runs, source=check_source(source),
                          run_ids=list(data.runs["run_id"]))


def outcome_frame(data: ReportData, by: str = "agent", source: str = "auto") -> pd.DataFrame:
    """Returns the outcome report frame (see :func:`app.reports.outcomes.outcome_report`) with
    the labels chosen by ``source``; ``attrs["label_source"]`` is the sentence naming them."""
    if by not in OUTCOME_BY:
        raise ReportError("by", f"must be one of {', '.join(OUTCOME_BY)}, got {by!r}")
    resolved, summary = _resolved(data, source)
    return outcome_report(
        data.runs, data.principals, data.agents, resolved, by,
        modes=data.modes, mode_category=data.mode_category, threshold=data.threshold,
        labelled_runs=resolved.attrs["labelled_runs"], label_source=summary,
    )


def _frame_payload(frame: pd.DataFrame) -> dict[str, Any]:
    return {"columns": [str(c) for c in frame.columns], "rows": to_records(frame)}


def outcomes_payload(data: ReportData, by: str = "agent", source: str = "auto") -> dict[str, Any]:
    """Returns ``{"by", "unit", "label_source", "threshold", "taxonomy", "family",
    "labels_without_agent", "columns", "rows"}``: one row per group, rates in [0, 1] (null where the denominator is 0)."""
    frame = outcome_frame(data, by, source)
    return {
        "by": by,
        "unit": frame.attrs["unit"],
        "label_source": frame.attrs["label_source"],
        "threshold": data.threshold,
        "taxonomy": data.taxonomy_ref,
        "family": data.family,
        "labels_without_agent": labels_without_agent(data),
        **_frame_payload(frame),
    }


def labels_without_agent(data: ReportData) -> int:
    """Returns how many of the loaded labels (submitted and gold) name no responsible agent of
    their run (trace-level labels, e.g. MAST's): they count for the run, for no agent."""
    return int(data.labels["agent"].isna().sum()) if len(data.labels) else 0


def blind_spot_frames(data: ReportData, source: str = "auto") -> tuple[pd.DataFrame, dict[str, pd.DataFrame], str]:
    """Returns ``(runs, rates_by_grouping, label_source)``: the blind-spot runs and their rates
    per family, model and alignment, with the labels chosen by ``source``."""
    resolved, summary = _resolved(data, source)
    spots = blind_spots(data.runs, data.principals, resolved, threshold=data.threshold)
    rates = {
        by: blind_spot_rates(data.runs, data.principals, resolved, data.agents, by=by, threshold=data.threshold)
        for by in BLIND_SPOT_RATE_BY
    }
    return spots, rates, summary


def blind_spots_payload(data: ReportData, source: str = "auto") -> dict[str, Any]:
    """Returns ``{"label_source", "threshold", "taxonomy", "family", "columns", "runs": [...],
    "rates": {"family"|"model"|"alignment": {"columns", "rows"}}}``; each run has ``reasons``."""
    spots, rates, summary = blind_spot_frames(data, source)
    payload = _frame_payload(spots)
    return {
        "label_source": summary,
        "threshold": data.threshold,
        "taxonomy": data.taxonomy_ref,
        "family": data.family,
        "columns": payload["columns"],
        "runs": payload["rows"],
        "rates": {by: _frame_payload(f) for by, f in rates.items()},
    }


def crossplay_frame(data: ReportData, by: str = "model") -> pd.DataFrame:
    """Returns the cross-play cells (see :func:`app.reports.outcomes.crossplay`)."""
    if by not in CROSSPLAY_BY:
        raise ReportError("by", f"must be one of {', '.join(CROSSPLAY_BY)}, got {by!r}")
    return crossplay(data.runs, data.principals, data.agents, by=by, threshold=data.threshold)


def crossplay_payload(data: ReportData, by: str = "model", value: str = "a_mean_score") -> dict[str, Any]:
    """Returns ``{"by", "threshold", "family", "columns", "cells": [...], "matrix": {"value",
    "rows", "cols", "values"}}``: one cell per ordered pairing (side a vs side b) with each
    side's mean principal score and success rate, and the ``value`` column as a square matrix
    (rows = side a, columns = side b, null where never played)."""
    if value not in CROSSPLAY_VALUES:
        raise ReportError("value", f"must be one of {', '.join(CROSSPLAY_VALUES)}, got {value!r}")
    cells = crossplay_frame(data, by)
    rows, cols, values = crossplay_matrix(cells, value)
    return {
        "by": by,
        "threshold": data.threshold,
        "family": data.family,
        "columns": [str(c) for c in cells.columns], "cells": to_records(cells),
        "matrix": {"value": value, "rows": rows, "cols": cols, "values": values},
    }


def filter_options(session: Session) -> dict[str, Any]:
    """Returns the choices a report form offers: ``families``, ``taxonomies`` (key@version),
    ``annotators`` (human user names), ``judges`` (the names of judges and dataset sources: not
    people) and ``source_names`` (what each of those stands for: judge or dataset name)."""
    from app.taxonomies.service import all_versions

    families = sorted({f for (f,) in session.execute(select(Scenario.family).distinct()) if f})
    rows = session.execute(select(User.username, User.kind, User.source_name).order_by(User.username)).all()
    users = [(u, k) for u, k, _ in rows]
    return {
        "source_names": {u: (sn or u, k) for u, k, sn in rows if k != "human"},
        "families": families,
        "taxonomies": [f"{t.key}@{t.version}" for t in all_versions(session)],
        "annotators": [u for u, k in users if k == "human"],
        "judges": [u for u, k in users if k != "human"],
    }


# groupings the pure module supports, checked once at import so the constants cannot drift
assert set(OUTCOME_BY) <= set(GROUPINGS)
assert set(BLIND_SPOT_RATE_BY) <= set(BLIND_SPOT_RATE_GROUPINGS)
