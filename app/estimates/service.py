"""Failure-rate estimates from the database: the units of a study (runs, or (run, agent) or
(run, principal) pairs), each unit's human label, judge label and sampling weight, and the rows
the CLI, the API and the page share.

Which labels count
------------------
* The **human label** of a run is its gold label where the run is adjudicated, otherwise the
  strict majority of the humans who submitted it (one human: that human's labels). A unit is
  positive when the mode (or any mode of the category) is in that label; for a (run, agent)
  unit, when it names that agent; for a (run, principal) unit, an agent acting for that
  principal.
* The **judge label** of a unit comes from the submitted annotation of the judge annotator
  (``judge:<name>``; detectors, ``detector:<name>``, count as judges too). Units the judge did
  not look at are left out of the judge and PPI rows.
* **Sampling weights**: 1 / the run's inclusion probability where the batch that sampled it
  recorded one (``inclusion`` argument), else every human label weighs the same, which is right
  only for a simple random sample (the payload says which).

Pure computation lives in :mod:`app.estimates.rates`; this module only gathers the data.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlmodel import Session

from app.agreement.service import AgreementData, load_agreement_data
from app.core.errors import FieldError
from app.estimates.rates import Estimate, human_rate, judge_rate, plan_more_labels, ppi_rate
from app.runs.models import Agent

BY: tuple[str, ...] = ("agent", "principal", "family", "model", "harness")
METHODS: tuple[str, ...] = ("human", "judge", "ppi")
#: columns of an estimates table (CSV / Parquet / JSON rows)
ROW_COLUMNS: tuple[str, ...] = ("group", "mode", "method", "rate", "ci_low", "ci_high", "n_human", "n_judge",
                                "lam", "n_effective", "note")


class EstimateError(FieldError):
    """A bad estimate request; ``field`` names the parameter."""


@dataclass
class UnitTable:
    """One row per unit: ``unit`` (a tuple key), ``run_id``, ``group``, ``human`` (0/1, NaN when
    no human labelled the run), ``judge`` (0/1, NaN when the judge did not), ``weight``."""

    target: str
    frame: pd.DataFrame
    judge: str | None
    weighted: bool
    notes: list[str] = field(default_factory=list)


def _target_modes(data: AgreementData, mode: str | None, category: str | None) -> tuple[str, set[str]]:
    if (mode is None) == (category is None):
        raise EstimateError("mode", "give one of mode or category")
    if mode is not None:
        if mode not in data.mode_category:
            raise EstimateError("mode", f"unknown mode {mode!r} in {data.taxonomy_ref}")
        return mode, {mode}
    codes = {m for m, c in data.mode_category.items() if c == category}
    if not codes:
        known = ", ".join(sorted(set(data.mode_category.values())))
        raise EstimateError("category", f"unknown category {category!r} in {data.taxonomy_ref} (known: {known})")
    return category, codes


def _resolve_judge(data: AgreementData, judge: str | None) -> str | None:
    if judge is None:
        return None
    for name in (judge, f"judge:{judge}", f"detector:{judge}"):
        if data.kinds.get(name) == "judge":
            return name
    judges = sorted(a for a, k in data.kinds.items() if k == "judge")
    raise EstimateError("judge", f"no submitted labels by a judge named {judge!r}"
                                 + (f" (judges: {', '.join(judges)})" if judges else " (no judge has labelled)"))


def _agent_rows(session: Session) -> pd.DataFrame:
    from app.runs.models import Run

    rows = session.connection().execute(
        select(Run.run_id, Agent.agent_id, Agent.principal_id, Agent.model, Agent.harness)
        .join(Run, Run.id == Agent.run_pk).order_by(Agent.run_pk, Agent.position)).all()
    return pd.DataFrame(rows, columns=["run_id", "agent", "principal", "model", "harness"])


def _positive_keys(labels: pd.DataFrame, agents: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """(run_id, key) of the units a set of labels makes positive; key is the agent or principal
    for unit levels below the run, else ''."""
    if by in ("agent", "model", "harness"):
        out = labels[["run_id", "agent"]].dropna().rename(columns={"agent": "key"})
    elif by == "principal":
        m = labels[["run_id", "agent"]].dropna().merge(agents[["run_id", "agent", "principal"]], on=["run_id", "agent"])
        out = m[["run_id", "principal"]].dropna().rename(columns={"principal": "key"})
    else:
        out = labels[["run_id"]].assign(key="")
    return out.drop_duplicates()


def _units(data: AgreementData, agents: pd.DataFrame, families: dict[str, str | None], by: str | None) -> pd.DataFrame:
    runs = sorted(set(data.submissions["run_id"]) | set(data.gold_runs) | set(agents["run_id"]))
    runs = [r for r in runs if r in families]
    if by in ("agent", "model", "harness"):
        u = agents[agents["run_id"].isin(runs)].copy()
        u["key"] = u["agent"]
        u["group"] = u[by if by != "agent" else "agent"].fillna("(none)")
    elif by == "principal":
        u = agents[agents["run_id"].isin(runs)][["run_id", "principal"]].dropna().drop_duplicates()
        u = u.rename(columns={"principal": "key"})
        u["group"] = u["key"]
    else:
        u = pd.DataFrame({"run_id": runs, "key": ""})
        u["group"] = [families.get(r) or "(none)" for r in runs] if by == "family" else "all"
    return u[["run_id", "key", "group"]].drop_duplicates(["run_id", "key"]).reset_index(drop=True)


def _human_positive(data: AgreementData, target: pd.DataFrame, agents: pd.DataFrame, by: str | None,
                    ) -> tuple[set[str], set[tuple[str, str]]]:
    """(runs with a human label, positive (run_id, key) units by the human label)."""
    gold = set(data.gold_runs)
    pos: set[tuple[str, str]] = set()
    gold_lab = data.gold_labels[data.gold_labels["mode"].isin(target["mode"])]
    for r in _positive_keys(gold_lab, agents, by).itertuples(index=False):
        pos.add((r.run_id, r.key))
    subs = data.submissions[(data.submissions["kind"] == "human") & ~data.submissions["run_id"].isin(gold)]
    n_sub = subs.groupby("run_id")["annotator"].nunique()
    lab = data.labels[(data.labels["kind"] == "human") & data.labels["mode"].isin(target["mode"])
                      & data.labels["run_id"].isin(n_sub.index)]
    if len(lab):
        per = []
        for annotator, g in lab.groupby("annotator"):
            k = _positive_keys(g, agents, by)
            per.append(k.assign(annotator=annotator))
        marks = pd.concat(per).merge(subs[["annotator", "run_id"]], on=["annotator", "run_id"])
        support = marks.groupby(["run_id", "key"])["annotator"].nunique().reset_index(name="n")
        support = support[support["n"] * 2 > support["run_id"].map(n_sub)]
        pos.update(zip(support["run_id"], support["key"]))
    return gold | set(n_sub.index), pos


def load_units(session: Session, *, mode: str | None = None, category: str | None = None,
               by: str | None = None, judge: str | None = None, taxonomy: str | None = None,
               run_ids: Iterable[str] | None = None, inclusion: dict[str, float] | None = None) -> UnitTable:
    """The :class:`UnitTable` of the runs (``run_ids``: a study's selection; all when None)."""
    if by is not None and by not in BY:
        raise EstimateError("by", f"by must be one of {', '.join(BY)}")
    try:
        data = load_agreement_data(session, taxonomy=taxonomy, include_judges=True)
    except FieldError as exc:
        raise EstimateError(exc.field, exc.message) from None
    target_name, codes = _target_modes(data, mode, category)
    target = pd.DataFrame({"mode": sorted(codes)})
    judge_name = _resolve_judge(data, judge)
    agents = _agent_rows(session)
    from app.agreement.service import _run_families

    families = {rid: fam for rid, fam in _run_families(session).values()}
    if run_ids is not None:
        keep = set(run_ids)
        families = {r: f for r, f in families.items() if r in keep}
    units = _units(data, agents, families, by)
    labelled, hpos = _human_positive(data, target, agents, by)
    keys = list(zip(units["run_id"], units["key"]))
    units["human"] = [(1.0 if k in hpos else 0.0) if k[0] in labelled else np.nan for k in keys]
    if judge_name is not None:
        jsubs = set(data.submissions.loc[data.submissions["annotator"] == judge_name, "run_id"])
        jlab = data.labels[(data.labels["annotator"] == judge_name) & data.labels["mode"].isin(codes)]
        jpos = set(map(tuple, _positive_keys(jlab, agents, by)[["run_id", "key"]].itertuples(index=False)))
        units["judge"] = [(1.0 if k in jpos else 0.0) if k[0] in jsubs else np.nan for k in keys]
    else:
        units["judge"] = np.nan
    weighted = bool(inclusion)
    notes = []
    if inclusion:
        probs = units["run_id"].map(inclusion)
        missing = units.loc[units["human"].notna() & probs.isna(), "run_id"].unique()
        if len(missing):
            raise EstimateError("study", f"run {missing[0]!r} was labelled but its batch recorded no inclusion "
                                         "probability: estimate within the study that sampled it")
        units["weight"] = 1.0 / probs
    else:
        units["weight"] = 1.0
        notes.append("human labels weighed equally: valid when the labelled runs are a simple random sample "
                     "(make batches with policy random)")
    return UnitTable(target=target_name, frame=units, judge=judge_name, weighted=weighted, notes=notes)


def group_estimates(frame: pd.DataFrame, *, judge: bool, confidence: float = 0.95) -> list[Estimate]:
    """The estimates of one group's units (columns ``human``, ``judge``, ``weight``)."""
    h = frame[frame["human"].notna()]
    out = [human_rate(h["human"].to_numpy(), h["weight"].to_numpy(), confidence)]
    if judge:
        j = frame[frame["judge"].notna()]
        out.append(judge_rate(j["judge"].to_numpy(), confidence))
        lab = j[j["human"].notna()]
        unl = j[j["human"].isna()]
        out.append(ppi_rate(lab["human"].to_numpy(), lab["judge"].to_numpy(), unl["judge"].to_numpy(),
                            weights=lab["weight"].to_numpy(), confidence=confidence))
    return out


def estimate_rows(table: UnitTable, *, confidence: float = 0.95) -> list[dict[str, Any]]:
    """One row per (group, method), groups sorted, methods in the order human, judge, ppi."""
    rows = []
    for group, g in sorted(table.frame.groupby("group", sort=False), key=lambda x: str(x[0])):
        for est in group_estimates(g, judge=table.judge is not None, confidence=confidence):
            d = est.as_dict()
            rows.append({"group": str(group), "mode": table.target, **{k: d[k] for k in ROW_COLUMNS[2:]}})
    return rows


def plan_rows(table: UnitTable, *, target_half_width: float | None, more: int = 0,
              confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per group, how many more randomly sampled human labels bring the interval to the target:
    the human-only interval always, the PPI interval too when a judge is given."""
    out = []
    for group, g in sorted(table.frame.groupby("group", sort=False), key=lambda x: str(x[0])):
        h = g[g["human"].notna()]
        calls: list[tuple[Any, dict[str, Any]]] = [(h["human"].to_numpy(), {"available": int(g["human"].isna().sum())})]
        if table.judge is not None:
            j = g[g["judge"].notna()]
            lab, unl = j[j["human"].notna()], j[j["human"].isna()]
            calls.append((lab["human"].to_numpy(), {"yhat": lab["judge"].to_numpy(),
                                                    "yhat_unlabeled": unl["judge"].to_numpy()}))
        for y, kwargs in calls:
            try:
                plan = plan_more_labels(y, more=more, target_half_width=target_half_width, confidence=confidence,
                                        **kwargs).as_dict()
            except ValueError as exc:
                raise EstimateError("more", str(exc)) from None
            if target_half_width is not None and plan["more_needed"] is None and plan["half_width_now"] is not None:
                plan["note"] += "; no number of the units left to label reaches the target"
            out.append({"group": str(group), "mode": table.target, **plan})
    return out


def estimates_payload(session: Session, *, mode: str | None = None, category: str | None = None,
                      by: str | None = None, judge: str | None = None, taxonomy: str | None = None,
                      run_ids: Iterable[str] | None = None, inclusion: dict[str, float] | None = None,
                      confidence: float = 0.95, target_half_width: float | None = None,
                      study: str | None = None) -> dict[str, Any]:
    """The JSON the API answers and `a2annotate estimate --json` prints."""
    if not 0.5 <= confidence < 1:
        raise EstimateError("confidence", "confidence must be at least 0.5 and below 1")
    table = load_units(session, mode=mode, category=category, by=by, judge=judge, taxonomy=taxonomy,
                       run_ids=run_ids, inclusion=inclusion)
    payload: dict[str, Any] = {
        "target": table.target, "kind": "mode" if mode is not None else "category",
        "by": by, "judge": table.judge, "study": study, "confidence": confidence,
        "weighted": table.weighted, "notes": table.notes,
        "n_units": int(len(table.frame)),
        "rows": estimate_rows(table, confidence=confidence),
    }
    if target_half_width is not None:
        payload["plan"] = plan_rows(table, target_half_width=target_half_width, confidence=confidence)
    return payload
