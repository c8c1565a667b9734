"""Agreement from the database: the frames :mod:`app.agreement.units` reads, and the JSON
payloads the API, the CLI and the pages share.

Which labels count
------------------
* Only **submitted** annotations under **one taxonomy version** (drafts never count), so every
  mode means one thing.  A submitted annotation without labels is "no failure found" (data).
* Annotators are users of kind ``human``; users of kind ``judge`` (``judge:<source>``, from
  run audits or imported labels) are added with ``include_judges=True`` or when named in
  ``annotators``.
* ``family`` keeps the runs of one scenario family (a run's own scenario object wins over the
  stored scenario of the same id, as in the outcome reports).
* Gold: the accepted ``GoldLabel`` rows of ``GoldRun`` rows whose status is ``adjudicated`` (an
  open adjudication is a proposal, not gold).

Every payload function returns plain JSON-ready dicts (NaN never appears).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import chain, combinations
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Text, cast, select
from sqlmodel import Session

from app.agreement.coefficients import CodedRatings, pairwise_cohen_coded
from app.agreement.units import (
    BINARY,
    agreement_report,
    agreement_with_reference,
    attribution_agreement,
    build_matrices,
    disagreement_ranking,
)
from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.core.db import fetch_rows, gc_paused
from app.core.errors import FieldError
from app.runs.models import Agent, Run, Scenario
from app.taxonomies.models import Taxonomy

__all__ = [
    "LABEL_COLUMNS",
    "LEVELS",
    "AgreementData",
    "AgreementError",
    "agreement_payload",
    "attribution_payload",
    "check_level",
    "check_n_boot",
    "disagreements_payload",
    "filter_options",
    "gold_payload",
    "human_majority",
    "judges_payload",
    "load_agreement_data",
    "parse_annotators",
]

LEVELS: tuple[str, ...] = ("run", "agent")
#: Columns of :attr:`AgreementData.labels`.
LABEL_COLUMNS: tuple[str, ...] = ("annotator", "kind", "run_id", "mode", "category", "agent", "evidence")
#: Columns of :attr:`AgreementData.attributions`.
ATTRIBUTION_COLUMNS: tuple[str, ...] = ("annotator", "kind", "run_id", "agent", "evidence")
#: Largest bootstrap size a request may ask for.
MAX_N_BOOT = 10_000


class AgreementError(FieldError):
    """A bad agreement request; ``field`` names the parameter (``taxonomy``, ``annotators``, ...)."""


@dataclass
class AgreementData:
    """Everything the agreement payloads read.

    ``labels``: one row per label (columns :data:`LABEL_COLUMNS`; ``agent`` None when the label
    names none, ``evidence`` a list of event seqs); ``submissions``: ``annotator, kind, run_id``
    of every submitted annotation; ``agents``: ``run_id, agent_id``; ``gold_labels``:
    ``run_id, mode, agent, evidence, origin`` of accepted gold labels of adjudicated runs;
    ``gold_runs``: the adjudicated run ids; ``kinds``: annotator -> ``human`` | ``judge``.
    """

    taxonomy: Taxonomy
    modes: list[str]
    mode_category: dict[str, str]
    labels: pd.DataFrame
    submissions: pd.DataFrame
    agents: pd.DataFrame
    gold_labels: pd.DataFrame
    gold_runs: list[str]
    kinds: dict[str, str] = field(default_factory=dict)
    #: attribution-only labels (no mode): ``annotator, kind, run_id, agent, evidence``
    attributions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(ATTRIBUTION_COLUMNS)))
    family: str | None = None
    include_judges: bool = False
    annotators_filter: list[str] | None = None

    @property
    def taxonomy_ref(self) -> str:
        """Returns ``key@version`` of the taxonomy version."""
        return f"{self.taxonomy.key}@{self.taxonomy.version}"

    @property
    def annotators(self) -> list[str]:
        """Returns the annotators with at least one submission, sorted."""
        return sorted(set(self.submissions["annotator"]))


# --------------------------------------------------------------------------------------------
# parameter checks


def check_level(level: Any) -> str:
    """Returns ``level`` when it is ``run`` or ``agent``; raises :class:`AgreementError` otherwise."""
    if level not in LEVELS:
        raise AgreementError("level", f"must be one of {', '.join(LEVELS)}, got {level!r}")
    return level


def check_n_boot(n_boot: Any) -> int:
    """Returns ``n_boot`` when it is an integer in 0..MAX_N_BOOT; raises :class:`AgreementError`."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 0 <= n_boot <= MAX_N_BOOT:
        raise AgreementError("n_boot", f"must be a whole number from 0 to {MAX_N_BOOT}, got {n_boot!r}")
    return int(n_boot)


def parse_annotators(value: Any) -> list[str] | None:
    """Returns the annotator names of ``"a,b,c"`` (or a list), None when empty."""
    if value is None:
        return None
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)):
        names = []
        for v in value:
            if not isinstance(v, str):
                raise AgreementError("annotators", f"must be user names, got {v!r}")
            names.extend(x.strip() for x in v.split(","))
    else:
        raise AgreementError("annotators", f"must be a comma-separated list of user names, got {value!r}")
    names = list(dict.fromkeys(n for n in names if n))
    return names or None


def _resolve_taxonomy(session: Session, ref: str | None) -> Taxonomy:
    from app.taxonomies.service import resolve

    if ref is not None and not isinstance(ref, str):
        raise AgreementError("taxonomy", f"must be a taxonomy key like 'a2-failures@1', got {ref!r}")
    tax = resolve(session, ref.strip() if ref else None)
    if tax is None:
        raise AgreementError("taxonomy", f"unknown taxonomy {ref!r}" if ref else "no taxonomy is registered")
    return tax


# --------------------------------------------------------------------------------------------
# loading


_INT_ARRAY = r"\[(?:-?\d+(?:, ?-?\d+)*)?\]"
#: texts that are JSON arrays of integers, joined by NUL (which valid JSON never holds raw)
_INT_ARRAYS = re.compile(f"{_INT_ARRAY}(?:\x00{_INT_ARRAY})*")


def _json_values(texts: list[str | None]) -> list:
    """``json.loads`` of each text (None for SQL NULL); in one call when every text is a plain
    JSON array of integers (the stored evidence), else one call per text."""
    if not texts:
        return []
    if all(type(t) is str for t in texts):
        joined = "\x00".join(texts)
        if _INT_ARRAYS.fullmatch(joined):
            try:
                values = json.loads("[" + joined.replace("\x00", ",") + "]")
            except ValueError:  # e.g. a leading zero: the per-text path raises as before
                values = None
            if values is not None and len(values) == len(texts):
                return values
    return [None if t is None else json.loads(t) for t in texts]


def _seq_sets(values: list) -> list[list[int]]:
    """``sorted({int(s) for s in (v or [])})`` of each decoded evidence value; a list of ints that
    is already strictly increasing is kept as it is (the same list), checked for all at once."""
    out = list(values)
    if not values:
        return out
    plain = all(type(v) is list for v in values)
    if plain:
        flat = list(chain.from_iterable(values))
        plain = all(type(x) is int for x in flat)
    if plain:
        try:
            seqs = np.array(flat, dtype=np.int64)
        except OverflowError:
            plain = False
    if not plain:
        return [sorted({int(s) for s in (v or [])}) for v in values]
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    ends = np.cumsum(lengths)
    bad_step = np.flatnonzero(seqs[1:] <= seqs[:-1]) + 1  # flat positions p with seqs[p] <= seqs[p - 1]
    label_of = np.searchsorted(ends, bad_step, side="right")  # the value holding position p
    starts = ends - lengths
    for i in np.unique(label_of[bad_step != starts[label_of]]):  # both positions in one value
        v = values[int(i)]
        out[int(i)] = sorted({int(s) for s in v})
    return out


def _rows(session: Session, stmt: Any) -> list[tuple]:
    """All rows of a Core statement as the driver's tuples (`app.core.db.fetch_rows`; the
    statements select integers and text only, JSON columns cast to text)."""
    return fetch_rows(session, stmt)


def _frame(columns: dict[str, list], names: tuple[str, ...]) -> pd.DataFrame:
    """The frame ``pd.DataFrame(rows, columns=names)`` of the rows these columns hold."""
    if not columns[names[0]]:
        return pd.DataFrame([], columns=list(names))
    return pd.DataFrame({c: columns[c] for c in names}, columns=list(names))


def _run_families(session: Session, scope: Any = None) -> dict[int, tuple[str, str | None]]:
    """run pk -> (run_id, family), the run's own scenario object winning (runs in `scope` only,
    a study's run-id subquery, when given)."""
    out = {}
    q = select(Run.id, Run.run_id, Scenario.family, cast(Run.scenario_override, Text)).join(
        Scenario, Scenario.id == Run.scenario_id)
    if scope is not None:
        q = q.where(Run.id.in_(scope))
    for pk, run_id, fam, override in _rows(session, q):
        if override is not None and override != "null":
            override = json.loads(override)
            if override:
                fam = override.get("family", fam)
        out[pk] = (run_id, fam)
    return out


@gc_paused()
def load_agreement_data(session: Session, *, taxonomy: str | None = None, family: str | None = None,
                        annotators: Any = None, include_judges: bool = False,
                        include_sources: bool = True, scope: Any = None) -> AgreementData:
    """Returns the :class:`AgreementData` of the submitted annotations under the taxonomy version
    ``taxonomy`` (default the latest a2-failures), of runs of ``family`` (all when None), by
    ``annotators`` (comma list or list of user names; all humans when None) plus judges when
    ``include_judges`` and the annotators of imported datasets (kind "source", e.g. MAD's
    ``mad:annotator_N``: people's labels, though not people of this app) when ``include_sources``;
    only the runs of ``scope`` (a study's run-id subquery) when given.  Raises :class:`AgreementError`
    for an unknown taxonomy or annotator.

    One query per table read (runs with their scenarios, users, submitted annotations, their
    labels, agents, gold runs, gold labels); JSON columns are read as text and the evidence
    decoded in one call."""
    from app.taxonomies.service import mode_category, mode_codes

    tax = _resolve_taxonomy(session, taxonomy)
    cats = mode_category(tax)
    modes = mode_codes(tax)
    family = family.strip() if isinstance(family, str) and family.strip() else None
    wanted = parse_annotators(annotators)
    users = {uid: (name, kind) for uid, name, kind in _rows(session, select(User.id, User.username, User.kind))}
    if wanted is not None:
        found = {name for name, _ in users.values()}
        missing = [n for n in wanted if n not in found]
        if missing:
            raise AgreementError("annotators", f"unknown annotator {missing[0]!r}")

    runs = {pk: rid for pk, (rid, fam) in _run_families(session, scope).items() if family is None or fam == family}

    def keep_user(name: str, kind: str) -> bool:
        if wanted is not None:
            return name in wanted
        return kind == "human" or include_judges or (include_sources and kind == "source")

    kept_users = {uid: (name, kind if kind in ("judge", "source") else "human")
                  for uid, (name, kind) in users.items() if keep_user(name, kind)}
    # annotation id -> (annotator, kind, run_id) of the kept submitted annotations
    kept: dict[int, tuple[str, str, str]] = {}
    kinds: dict[str, str] = {}
    sub_rows: list[tuple] = []
    for aid, pk, uid in _rows(session, select(Annotation.id, Annotation.run_pk, Annotation.user_id)
                              .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted")
                              .order_by(Annotation.id)):
        user = kept_users.get(uid)
        if user is not None and pk in runs:
            kinds[user[0]] = user[1]
            kept[aid] = row = (user[0], user[1], runs[pk])
            sub_rows.append(row)
    # the labels, column by column (no tuple per label)
    lab: dict[str, list] = {c: [] for c in LABEL_COLUMNS}
    att: dict[str, list] = {c: [] for c in ATTRIBUTION_COLUMNS}
    lab_texts: list[str | None] = []
    att_texts: list[str | None] = []
    for aid, mode, agent, evidence in _rows(session, select(
            Label.annotation_id, Label.mode, Label.agent, cast(Label.evidence, Text))
            .where(Label.annotation_id.in_(select(Annotation.id).where(
                Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted")))
            .order_by(Label.id)):
        owner = kept.get(aid)
        if owner is None:
            continue
        if mode in cats:
            cols, texts = lab, lab_texts
            cols["mode"].append(mode)
            cols["category"].append(cats[mode])
        elif mode is None:
            cols, texts = att, att_texts
        else:
            continue
        cols["annotator"].append(owner[0])
        cols["kind"].append(owner[1])
        cols["run_id"].append(owner[2])
        cols["agent"].append(agent or None)
        texts.append(evidence)
    lab["evidence"] = _seq_sets(_json_values(lab_texts))
    att["evidence"] = _seq_sets(_json_values(att_texts))
    agent_rows = [(runs[pk], aid) for pk, aid in _rows(session, select(Agent.run_pk, Agent.agent_id)
                                                       .order_by(Agent.run_pk, Agent.position)) if pk in runs]
    gold_runs = sorted({runs[pk] for (pk,) in _rows(session, select(GoldRun.run_pk).where(
        GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated")) if pk in runs})
    gold_keep = [(pk, mode, agent, ev, origin) for pk, mode, agent, ev, origin in _rows(session, select(
        GoldRun.run_pk, GoldLabel.mode, GoldLabel.agent, cast(GoldLabel.evidence, Text), GoldLabel.origin)
        .join(GoldRun, GoldRun.id == GoldLabel.gold_run_id)
        .where(GoldRun.taxonomy_pk == tax.id, GoldRun.status == "adjudicated", GoldLabel.accepted.is_(True))
        .order_by(GoldLabel.id)) if pk in runs and mode in cats]
    gold_ev = _seq_sets(_json_values([r[3] for r in gold_keep]))
    gold_rows = [(runs[pk], mode, agent or None, ev, origin)
                 for (pk, mode, agent, _, origin), ev in zip(gold_keep, gold_ev)]
    return AgreementData(
        taxonomy=tax, modes=modes, mode_category=cats,
        labels=_frame(lab, LABEL_COLUMNS),
        submissions=pd.DataFrame(sorted(set(sub_rows)), columns=["annotator", "kind", "run_id"]),
        agents=pd.DataFrame(agent_rows, columns=["run_id", "agent_id"]),
        gold_labels=pd.DataFrame(gold_rows, columns=["run_id", "mode", "agent", "evidence", "origin"]),
        gold_runs=gold_runs, kinds=kinds, family=family, include_judges=bool(include_judges),
        annotators_filter=wanted,
        attributions=_frame(att, ATTRIBUTION_COLUMNS),
    )


def filter_options(session: Session) -> dict[str, Any]:
    """Returns the choices the filter forms offer: ``taxonomies`` (``key@version``), ``families``,
    ``humans``, ``judges`` and ``sources`` (the annotators of imported datasets) with at least one
    submitted annotation."""
    from app.taxonomies.service import all_versions

    fams = sorted({f for _, f in _run_families(session).values() if f})
    rows = session.execute(
        select(User.username, User.kind, User.source_name).join(Annotation, Annotation.user_id == User.id)
        .where(Annotation.status == "submitted").distinct()).all()
    users = [(n, k) for n, k, _ in rows]
    return {
        "taxonomies": [f"{t.key}@{t.version}" for t in all_versions(session)],
        "families": fams,
        "humans": sorted(n for n, k in users if k == "human"),
        "judges": sorted(n for n, k in users if k == "judge"),
        "sources": sorted(n for n, k in users if k == "source"),
        #: what each judge or source stands for (dataset or judge name)
        "source_names": {n: sn for n, k, sn in rows if k != "human" and sn},
    }


# --------------------------------------------------------------------------------------------
# payloads


def _header(data: AgreementData) -> dict[str, Any]:
    return {
        "taxonomy": data.taxonomy_ref,
        "family": data.family,
        "include_judges": data.include_judges,
        "annotators_filter": data.annotators_filter,
        "annotator_kinds": {a: data.kinds.get(a, "human") for a in data.annotators},
        "n_labels": len(data.labels),
        "n_submissions": len(data.submissions),
        "labels_without_agent": int(data.labels["agent"].isna().sum()) if len(data.labels) else 0,
        "labels_without_mode": len(data.attributions),
    }


def agreement_payload(data: AgreementData, *, level: str = "run", n_boot: int = 1000, seed: int = 0,
                      confidence: float = 0.95) -> dict[str, Any]:
    """Returns the agreement report (see :func:`app.agreement.units.agreement_report`: ``modes``,
    ``categories``, ``overall`` with every coefficient ``{"value", "n_units", "ci", "reason"?}``,
    ``prevalence``, ``kappa_paradox`` and ``advice`` per row, ``pairwise_cohen``,
    ``blame_agreement``, ``evidence_overlap``, ``attribution_agreement`` with k=1, without
    ``per_run``) plus ``taxonomy``, ``family``, ``include_judges``, ``annotators_filter``,
    ``annotator_kinds``, ``n_labels``, ``n_submissions``, ``labels_without_agent`` (mode labels
    naming no responsible agent: trace-level, counted in mode agreement, left out of blame
    agreement) and ``labels_without_mode`` (attribution-only labels)."""
    check_level(level)
    check_n_boot(n_boot)
    report = agreement_report(
        data.labels, data.submissions, data.modes, data.mode_category, data.agents,
        level=level, n_boot=n_boot, seed=seed, confidence=confidence)
    attribution = attribution_agreement(data.attributions, data.submissions, k=1)
    attribution.pop("per_run")
    return {**_header(data), **report, "attribution_agreement": attribution}


def attribution_payload(data: AgreementData, *, k: int = 1) -> dict[str, Any]:
    """Returns the attribution agreement of the attribution-only labels (no mode; e.g. Who&When's
    mistake agent and step), see :func:`app.agreement.units.attribution_agreement`: ``agent``,
    ``step_exact``, ``step_within_k``, ``agent_and_step`` (each ``{n_pairs, n_agree,
    proportion}``), ``k``, ``n_runs``, ``per_run`` plus the header keys (``labels_without_agent``,
    ``labels_without_mode``, ...)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 1_000_000:
        raise AgreementError("k", f"must be a whole number >= 0, got {k!r}")
    return {**_header(data), **attribution_agreement(data.attributions, data.submissions, k=k)}


def gold_payload(data: AgreementData, *, n_boot: int = 0, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Returns each annotator's agreement with gold (see
    :func:`app.agreement.units.agreement_with_reference`): ``{"n_reference_runs", "annotators": [
    {annotator, kind, n_runs, percent, cohen_kappa, micro, per_mode}]}`` plus the header keys and
    ``gold_origins`` (how many accepted gold labels came from unanimity, majority, adjudication)."""
    check_n_boot(n_boot)
    ref = data.gold_labels[["run_id", "mode"]]
    res = agreement_with_reference(data.labels, data.submissions, ref, data.gold_runs, data.modes,
                                   n_boot=n_boot, seed=seed, confidence=confidence)
    for row in res["annotators"]:
        row["kind"] = data.kinds.get(row["annotator"], row["kind"])
    origins = {o: int((data.gold_labels["origin"] == o).sum()) for o in ("unanimity", "majority", "adjudication")}
    return {**_header(data), **res, "gold_origins": origins}


def human_majority(data: AgreementData) -> tuple[pd.DataFrame, list[str]]:
    """Returns (labels ``run_id, mode`` marked by a strict majority of the human annotators who
    submitted the run, the runs with at least two human submitters)."""
    subs = data.submissions[data.submissions["kind"] == "human"]
    n_sub = subs.groupby("run_id")["annotator"].nunique()
    runs = sorted(n_sub[n_sub >= 2].index)
    lab = data.labels[(data.labels["kind"] == "human") & data.labels["run_id"].isin(runs)]
    lab = lab.merge(subs[["annotator", "run_id"]], on=["annotator", "run_id"])
    support = lab.groupby(["run_id", "mode"])["annotator"].nunique().reset_index(name="n")
    support["n_sub"] = support["run_id"].map(n_sub)
    maj = support[support["n"] * 2 > support["n_sub"]][["run_id", "mode"]].reset_index(drop=True)
    return maj, runs


def judges_payload(data: AgreementData, *, n_boot: int = 0, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Humans vs machines, over the annotators of ``data`` (load it with ``include_judges=True``).

    Returns ``pairwise_cohen`` (``annotators``, ``kinds``, ``matrix`` of pooled run x mode Cohen
    kappas between every two annotators, humans and judges, ``n_units``), ``judges`` (per judge:
    ``mean_kappa_with_humans`` and ``n_humans_compared``), ``human_baseline`` (mean kappa over the
    human-human pairs), ``vs_gold`` (each annotator against the gold labels: as
    :func:`gold_payload`) and ``vs_human_majority`` (each judge against the strict human majority
    on runs with at least two human submitters: kappa, percent, micro and per-mode
    precision/recall) plus the header keys."""
    check_n_boot(n_boot)
    head = _header(data)
    annotators = data.annotators
    kinds = [data.kinds.get(a, "human") for a in annotators]
    if annotators:
        mx = build_matrices(data.labels, data.submissions, data.modes, data.mode_category, level="run")
        n_u, n_m, n_a = mx.presence.shape
        pooled = mx.presence.reshape(n_u * n_m, n_a).astype(np.int64)
        pw = pairwise_cohen_coded(CodedRatings(pooled, BINARY), n_boot=0)
        matrix, n_units = pw["matrix"], pw["n_units"]
    else:
        matrix, n_units = [], []
    judges = []
    humans = [i for i, k in enumerate(kinds) if k == "human"]
    for j, name in enumerate(annotators):
        if kinds[j] != "judge":
            continue
        vals = [matrix[j][h] for h in humans if matrix[j][h] is not None]
        judges.append({"judge": name, "mean_kappa_with_humans": float(np.mean(vals)) if vals else None,
                       "n_humans_compared": len(vals)})
    hh = [matrix[a][b] for a, b in combinations(humans, 2) if matrix[a][b] is not None]
    gold = gold_payload(data, n_boot=n_boot, seed=seed, confidence=confidence)
    maj, maj_runs = human_majority(data)
    judge_mask_l = data.labels["kind"] == "judge"
    judge_mask_s = data.submissions["kind"] == "judge"
    vs_maj = agreement_with_reference(data.labels[judge_mask_l], data.submissions[judge_mask_s], maj, maj_runs,
                                      data.modes, n_boot=n_boot, seed=seed, confidence=confidence)
    return {
        **head,
        "pairwise_cohen": {"annotators": annotators, "kinds": kinds, "matrix": matrix, "n_units": n_units},
        "judges": judges,
        "human_baseline": {"mean_kappa": float(np.mean(hh)) if hh else None, "n_pairs": len(hh)},
        "vs_gold": {"n_reference_runs": gold["n_reference_runs"], "annotators": gold["annotators"]},
        "vs_human_majority": vs_maj,
    }


def disagreements_payload(data: AgreementData, *, page: int = 1, page_size: int = 50) -> dict[str, Any]:
    """Returns the runs with at least two submitted annotators, most disputed first (see
    :func:`app.agreement.units.disagreement_ranking`), one page of them, each with ``labels``
    (annotator -> list of ``{mode, agent, evidence}``) and ``no_failure`` (annotators who
    submitted the run without labels): ``{"total", "page", "page_size", "runs": [...]}``."""
    if page < 1:
        raise AgreementError("page", f"must be 1 or more, got {page!r}")
    if page_size < 1:
        raise AgreementError("page_size", f"must be 1 or more, got {page_size!r}")
    ranking = disagreement_ranking(data.labels, data.submissions, data.modes)
    rows = ranking[(page - 1) * page_size: page * page_size]
    wanted = {r["run_id"] for r in rows}
    by_run: dict[str, dict[str, list[dict]]] = {}
    for ann, run_id, mode, agent, ev in data.labels[["annotator", "run_id", "mode", "agent", "evidence"]].itertuples(
            index=False):
        if run_id in wanted:
            by_run.setdefault(run_id, {}).setdefault(ann, []).append(
                {"mode": mode, "agent": agent, "evidence": list(ev)})
    order = {m: i for i, m in enumerate(data.modes)}
    for r in rows:
        labs = by_run.get(r["run_id"], {})
        r["labels"] = {a: sorted(labs.get(a, []), key=lambda x: (order.get(x["mode"], 0), x["agent"] or ""))
                       for a in r["annotator_modes"]}
        r["no_failure"] = [a for a, m in r["annotator_modes"].items() if not m]
        r["annotator_kinds"] = {a: data.kinds.get(a, "human") for a in r["annotator_modes"]}
        r["adjudicated"] = r["run_id"] in data.gold_runs
    return {**_header(data), "total": len(ranking), "page": page, "page_size": page_size, "runs": rows}
