"""The row-by-row outcome reports as they were before the columnar rewrite (commit 8b8737a of
app/reports/outcomes.py, kept verbatim below this note): the reference the equivalence tests
(tests/reports/test_equivalence.py) compare the columnar module against.  Not used by the app.
"""

# ruff: noqa

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "AGENT_COLUMNS",
    "ALIGNMENTS",
    "BLIND_SPOT_COLUMNS",
    "BLIND_SPOT_RATE_GROUPINGS",
    "CROSSPLAY_COLUMNS",
    "DEFAULT_THRESHOLD",
    "GROUPINGS",
    "LABEL_COLUMNS",
    "LABEL_SOURCES",
    "PRINCIPAL_COLUMNS",
    "PRINCIPAL_KINDS",
    "REPORT_LABEL_COLUMNS",
    "RESOLVED_LABEL_COLUMNS",
    "RUN_COLUMNS",
    "STATUSES",
    "SUBMISSION_COLUMNS",
    "ReportInputError",
    "aggregate_success",
    "blind_spot_rates",
    "blind_spots",
    "crossplay",
    "crossplay_matrix",
    "outcome_report",
    "principal_success",
    "report_payload",
    "resolve_labels",
    "to_records",
]

RUN_COLUMNS: tuple[str, ...] = ("run_id", "scenario_id", "family", "alignment", "status", "aggregate_score")
PRINCIPAL_COLUMNS: tuple[str, ...] = ("run_id", "principal_id", "kind", "success", "score", "metrics")
AGENT_COLUMNS: tuple[str, ...] = ("run_id", "agent_id", "principal_id", "role", "model", "harness")
LABEL_COLUMNS: tuple[str, ...] = ("run_id", "annotator", "mode", "category", "agent", "source")
#: (run_id, annotator) for every human annotator who *submitted* that run (including runs they
#: submitted as "no failure found").  Unsubmitted (draft) labels do not count.
SUBMISSION_COLUMNS: tuple[str, ...] = ("run_id", "annotator")
#: Columns of the frame returned by :func:`resolve_labels`.
RESOLVED_LABEL_COLUMNS: tuple[str, ...] = ("run_id", "mode", "category", "agent", "source", "support")
#: Columns the reports read from a labels frame.
REPORT_LABEL_COLUMNS: tuple[str, ...] = ("run_id", "mode", "category", "agent")

STATUSES: tuple[str, ...] = ("completed", "failed", "timeout", "error")
ALIGNMENTS: tuple[str, ...] = ("cooperative", "mixed", "competitive")
PRINCIPAL_KINDS: tuple[str, ...] = ("person", "organization")
LABEL_SOURCES: tuple[str, ...] = ("gold", "human", "judge")
DEFAULT_THRESHOLD = 0.5

#: ``by`` value of :func:`outcome_report` -> the group key columns of its rows.
GROUPINGS: dict[str, tuple[str, ...]] = {
    "agent": ("model", "harness", "role"),
    "model": ("model",),
    "harness": ("harness",),
    "principal": ("kind", "role"),
    "family": ("family",),
    "alignment": ("alignment",),
    "scenario": ("scenario_id",),
}
_AGENT_UNIT_GROUPINGS = frozenset({"agent", "model", "harness"})
BLIND_SPOT_RATE_GROUPINGS: dict[str, str] = {
    "family": "family",
    "alignment": "alignment",
    "scenario": "scenario_id",
    "model": "model",
    "harness": "harness",
}
BLIND_SPOT_COLUMNS: tuple[str, ...] = (
    "run_id",
    "scenario_id",
    "family",
    "alignment",
    "status",
    "aggregate_score",
    "failed_principals",
    "labelled_modes",
    "reasons",
)
CROSSPLAY_COLUMNS: tuple[str, ...] = (
    "a",
    "b",
    "runs",
    "n",
    "a_mean_score",
    "b_mean_score",
    "a_success_rate",
    "b_success_rate",
    "a_success_unknown",
    "b_success_unknown",
)
_CROSSPLAY_ALIGNMENTS = frozenset({"mixed", "competitive"})


class ReportInputError(ValueError):
    """An input frame or argument is malformed; the message names the frame, row and field."""


# --------------------------------------------------------------------------------------------
# small value helpers


def _missing(value: Any) -> bool:
    t = type(value)
    if t is str or t is int or t is bool:  # the common cases, before the generic checks
        return False
    if t is float:
        return value != value
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    return False


def _is_number(value: Any) -> bool:
    t = type(value)
    if t is int or t is float:  # fast path; bool is not int here (type(True) is bool)
        return True
    if t is str or t is bool or value is None:
        return False
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _mean(values: Sequence[float]) -> float:
    """Correctly rounded mean (math.fsum), NaN when empty."""
    return math.fsum(values) / len(values) if values else math.nan


def _rate(hits: int, total: int) -> float:
    return hits / total if total else math.nan


def _sort_key(key: tuple) -> tuple:
    """Sort group keys: None last, everything else by its string form."""
    return tuple((v is None, "" if v is None else str(v)) for v in key)


def _check_threshold(threshold: Any) -> float:
    if not _is_number(threshold) or not math.isfinite(float(threshold)):
        raise ReportInputError(f"threshold must be a finite number, got {threshold!r}")
    return float(threshold)


def _check_frame(df: Any, columns: Sequence[str], name: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ReportInputError(f"{name}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ReportInputError(
            f"{name}: missing column(s) {', '.join(missing)} (required: {', '.join(columns)})"
        )


def _records(df: pd.DataFrame, columns: Sequence[str]) -> list[dict[str, Any]]:
    return [dict(zip(columns, row)) for row in df[list(columns)].itertuples(index=False, name=None)]


def _where(name: str, i: int, row: Mapping[str, Any]) -> str:
    rid = row.get("run_id")
    return f"{name} row {i}" + ("" if _missing(rid) else f" (run_id={rid!r})")


def _req_str(name: str, i: int, row: Mapping[str, Any], field: str) -> str:
    value = row[field]
    if not isinstance(value, str) or not value:
        raise ReportInputError(
            f"{_where(name, i, row)}: field {field!r} must be a non-empty string, got {value!r}"
        )
    return value


def _opt_str(name: str, i: int, row: Mapping[str, Any], field: str) -> str | None:
    value = row[field]
    if _missing(value):
        return None
    if not isinstance(value, str):
        raise ReportInputError(
            f"{_where(name, i, row)}: field {field!r} must be a string or missing, got {value!r}"
        )
    return value


def _choice(
    name: str, i: int, row: Mapping[str, Any], field: str, allowed: Sequence[str], optional: bool
) -> str | None:
    value = row[field]
    if optional and _missing(value):
        return None
    if value not in allowed:
        extra = " or missing" if optional else ""
        raise ReportInputError(
            f"{_where(name, i, row)}: field {field!r} = {value!r} is not one of {', '.join(allowed)}{extra}"
        )
    return value


def _opt_number(name: str, i: int, row: Mapping[str, Any], field: str) -> float | None:
    value = row[field]
    if _missing(value):
        return None
    if not _is_number(value):
        raise ReportInputError(
            f"{_where(name, i, row)}: field {field!r} must be a number or missing, got {value!r}"
        )
    return float(value)


def _opt_bool(name: str, i: int, row: Mapping[str, Any], field: str) -> bool | None:
    value = row[field]
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if _is_number(value) and float(value) in (0.0, 1.0):
        return bool(value)
    raise ReportInputError(
        f"{_where(name, i, row)}: field {field!r} must be true, false or missing, got {value!r}"
    )


def _numeric_metrics(name: str, i: int, row: Mapping[str, Any]) -> dict[str, float]:
    value = row["metrics"]
    if _missing(value):
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ReportInputError(
            f"{_where(name, i, row)}: field 'metrics' must be a dict or missing, got {type(value).__name__}"
        )
    out: dict[str, float] = {}
    for key, v in value.items():
        if _is_number(v) and math.isfinite(float(v)):
            out[str(key)] = float(v)
    return out


def _id_set(values: Any, name: str) -> set[str]:
    if values is None:
        return set()
    if isinstance(values, str):
        raise ReportInputError(f"{name}: expected a collection of run ids, got a single string {values!r}")
    out: set[str] = set()
    for v in values:
        if not isinstance(v, str):
            raise ReportInputError(f"{name}: run ids must be strings, got {v!r}")
        out.add(v)
    return out


# --------------------------------------------------------------------------------------------
# parsing / validation


def _parse_runs(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    _check_frame(runs, RUN_COLUMNS, "runs")
    out: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(_records(runs, RUN_COLUMNS)):
        run_id = _req_str("runs", i, row, "run_id")
        if run_id in out:
            raise ReportInputError(f"runs row {i}: duplicate run_id {run_id!r}")
        out[run_id] = {
            "run_id": run_id,
            "scenario_id": _req_str("runs", i, row, "scenario_id"),
            "family": _req_str("runs", i, row, "family"),
            "alignment": _choice("runs", i, row, "alignment", ALIGNMENTS, optional=True),
            "status": _choice("runs", i, row, "status", STATUSES, optional=False),
            "aggregate_score": _opt_number("runs", i, row, "aggregate_score"),
        }
    return out


def _parse_principals(
    principals: pd.DataFrame, runs: Mapping[str, Any]
) -> dict[tuple[str, str], dict[str, Any]]:
    _check_frame(principals, PRINCIPAL_COLUMNS, "principals")
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for i, row in enumerate(_records(principals, PRINCIPAL_COLUMNS)):
        run_id = _req_str("principals", i, row, "run_id")
        if run_id not in runs:
            raise ReportInputError(f"principals row {i}: run_id {run_id!r} is not in runs")
        pid = _req_str("principals", i, row, "principal_id")
        if (run_id, pid) in out:
            raise ReportInputError(f"principals row {i}: duplicate principal {pid!r} in run {run_id!r}")
        out[(run_id, pid)] = {
            "run_id": run_id,
            "principal_id": pid,
            "kind": _choice("principals", i, row, "kind", PRINCIPAL_KINDS, optional=True),
            "success": _opt_bool("principals", i, row, "success"),
            "score": _opt_number("principals", i, row, "score"),
            "metrics": _numeric_metrics("principals", i, row),
        }
    return out


def _parse_agents(
    agents: pd.DataFrame, runs: Mapping[str, Any], principals: Mapping[tuple[str, str], Any]
) -> dict[tuple[str, str], dict[str, Any]]:
    _check_frame(agents, AGENT_COLUMNS, "agents")
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for i, row in enumerate(_records(agents, AGENT_COLUMNS)):
        run_id = _req_str("agents", i, row, "run_id")
        if run_id not in runs:
            raise ReportInputError(f"agents row {i}: run_id {run_id!r} is not in runs")
        aid = _req_str("agents", i, row, "agent_id")
        if (run_id, aid) in out:
            raise ReportInputError(f"agents row {i}: duplicate agent {aid!r} in run {run_id!r}")
        pid = _req_str("agents", i, row, "principal_id")
        if (run_id, pid) not in principals:
            raise ReportInputError(
                f"agents row {i} (run_id={run_id!r}, agent_id={aid!r}): principal_id {pid!r} "
                "is not a principal of that run"
            )
        out[(run_id, aid)] = {
            "run_id": run_id,
            "agent_id": aid,
            "principal_id": pid,
            "role": _opt_str("agents", i, row, "role"),
            "model": _opt_str("agents", i, row, "model"),
            "harness": _opt_str("agents", i, row, "harness"),
        }
    return out


def _parse_report_labels(
    labels: pd.DataFrame, runs: Mapping[str, Any], agents: Mapping[tuple[str, str], Any] | None
) -> list[dict[str, Any]]:
    _check_frame(labels, REPORT_LABEL_COLUMNS, "labels")
    out = []
    for i, row in enumerate(_records(labels, REPORT_LABEL_COLUMNS)):
        run_id = _req_str("labels", i, row, "run_id")
        if run_id not in runs:
            raise ReportInputError(f"labels row {i}: run_id {run_id!r} is not in runs")
        agent = _opt_str("labels", i, row, "agent")
        if agent is not None and agents is not None and (run_id, agent) not in agents:
            raise ReportInputError(
                f"labels row {i} (run_id={run_id!r}): agent {agent!r} is not an agent of that run"
            )
        out.append(
            {
                "run_id": run_id,
                "mode": _req_str("labels", i, row, "mode"),
                "category": _opt_str("labels", i, row, "category"),
                "agent": agent,
            }
        )
    return out


def aggregate_success(
    status: str, aggregate_score: float | None, threshold: float = DEFAULT_THRESHOLD
) -> bool:
    """Return True when the run counts as a success by its aggregate outcome:
    ``status == "completed"`` and a present ``aggregate_score >= threshold``."""
    return status == "completed" and not _missing(aggregate_score) and float(aggregate_score) >= threshold


def principal_success(
    success: bool | None, score: float | None, threshold: float = DEFAULT_THRESHOLD
) -> bool | None:
    """Return a principal's own outcome: the ``success`` flag if present, else
    ``score >= threshold`` if a score is present, else None (unknown)."""
    if not _missing(success):
        return bool(success)
    if not _missing(score):
        return float(score) >= threshold
    return None


# --------------------------------------------------------------------------------------------
# label-source resolution


def _plural(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _pick_category(categories: Iterable[str | None], run_id: str, mode: str) -> str | None:
    found = sorted({c for c in categories if c is not None})
    if len(found) > 1:
        raise ReportInputError(
            f"labels: run {run_id!r} mode {mode!r} is labelled with conflicting categories {found}"
        )
    return found[0] if found else None


def resolve_labels(
    labels: pd.DataFrame,
    submissions: pd.DataFrame,
    gold_runs: Iterable[str] | pd.Series | None = None,
    *,
    source: str = "auto",
    run_ids: Iterable[str] | pd.Series | None = None,
) -> tuple[pd.DataFrame, str]:
    """Choose, per run, which labels the reports should use.

    ``labels`` has :data:`LABEL_COLUMNS` (``source`` in :data:`LABEL_SOURCES`);
    ``submissions`` has :data:`SUBMISSION_COLUMNS`, one row per human annotator who submitted a
    run (a submission with no labels means "no failure found").  ``gold_runs`` are the runs that
    have been adjudicated; a run with gold and no gold labels therefore has no failure.  A run
    that has a label with ``source == "gold"`` counts as gold even if absent from ``gold_runs``.

    ``source``:

    * ``"auto"`` (default): gold labels for gold runs; otherwise the human majority of the
      annotators who submitted the run; otherwise the run is unlabelled.
    * ``"gold"``: gold runs only; every other run is unlabelled.
    * ``"majority"``: human majority for every submitted run, ignoring gold.
    * ``"annotator:<name>"``: that one annotator's labels: for a human, on the runs they
      submitted (drafts ignored); for a judge or gold annotator, on the runs it labelled (a
      judge has no submissions, so its silence cannot be told from "not looked at"); other runs
      are unlabelled.

    Human majority: among the human annotators who submitted the run, a (mode, agent) pair is
    kept when more than half of them labelled it (each annotator counted once per pair).  Tie
    rule: exactly half is *not* a majority, so with two annotators who disagree neither label is
    kept.  Human labels of annotators who did not submit that run (drafts) and judge labels are
    not counted.  A run whose submitters share no majority pair is labelled "no failure".

    ``run_ids`` is the universe of runs to resolve (rows for other runs are ignored); by default
    every run that appears in ``gold_runs``, ``submissions`` or ``labels``.

    Returns ``(resolved, summary)``.  ``resolved`` has :data:`RESOLVED_LABEL_COLUMNS`, one row per
    distinct (run, mode, agent) sorted by run_id, mode, agent: ``source`` is ``"gold"``,
    ``"majority"`` or ``"annotator:<name>"``; ``support`` is the share of submitting humans who
    gave the label (1.0 for gold and single-annotator labels).  ``resolved.attrs`` holds
    ``"labelled_runs"`` (sorted list of runs that have a resolved label set, possibly empty; pass
    it to :func:`outcome_report`) and ``"label_source"`` (= ``summary``).  ``summary`` names the
    source(s) used, e.g. ``"gold for 2 runs, human majority for 3 runs, unlabelled 1 run"``.
    """
    _check_frame(labels, LABEL_COLUMNS, "labels")
    _check_frame(submissions, SUBMISSION_COLUMNS, "submissions")
    if not isinstance(source, str):
        raise ReportInputError(f"source must be a string, got {source!r}")
    annotator_name: str | None = None
    if source.startswith("annotator:"):
        annotator_name = source[len("annotator:") :]
        if not annotator_name:
            raise ReportInputError("source 'annotator:' needs an annotator name, e.g. 'annotator:alice'")
    elif source not in ("auto", "gold", "majority"):
        raise ReportInputError(
            f"source must be 'auto', 'gold', 'majority' or 'annotator:<name>', got {source!r}"
        )

    rows = []
    for i, row in enumerate(_records(labels, LABEL_COLUMNS)):
        label_source = _choice("labels", i, row, "source", LABEL_SOURCES, optional=False)
        # gold and judge labels may come without an annotator name; a human vote needs one
        annotator = (_req_str if label_source == "human" else _opt_str)("labels", i, row, "annotator")
        rows.append(
            {
                "run_id": _req_str("labels", i, row, "run_id"),
                "annotator": annotator,
                "mode": _req_str("labels", i, row, "mode"),
                "category": _opt_str("labels", i, row, "category"),
                "agent": _opt_str("labels", i, row, "agent"),
                "source": label_source,
            }
        )
    submitted: dict[str, set[str]] = defaultdict(set)
    for i, row in enumerate(_records(submissions, SUBMISSION_COLUMNS)):
        submitted[_req_str("submissions", i, row, "run_id")].add(_req_str("submissions", i, row, "annotator"))
    gold = _id_set(gold_runs, "gold_runs") | {r["run_id"] for r in rows if r["source"] == "gold"}

    if run_ids is not None:
        universe = _id_set(run_ids, "run_ids")
    else:
        universe = set(gold) | set(submitted) | {r["run_id"] for r in rows}

    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["run_id"] in universe:
            by_run[r["run_id"]].append(r)

    def collapse(run_id: str, items: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
        cats: dict[tuple[str, str | None], list[str | None]] = defaultdict(list)
        for r in items:
            cats[(r["mode"], r["agent"])].append(r["category"])
        return [
            {
                "run_id": run_id,
                "mode": m,
                "category": _pick_category(c, run_id, m),
                "agent": a,
                "source": tag,
                "support": 1.0,
            }
            for (m, a), c in cats.items()
        ]

    def majority(run_id: str) -> list[dict[str, Any]]:
        voters = submitted[run_id]
        votes: dict[tuple[str, str | None], set[str]] = defaultdict(set)
        cats: dict[tuple[str, str | None], list[str | None]] = defaultdict(list)
        for r in by_run.get(run_id, []):
            if r["source"] == "human" and r["annotator"] in voters:
                votes[(r["mode"], r["agent"])].add(r["annotator"])
                cats[(r["mode"], r["agent"])].append(r["category"])
        return [
            {
                "run_id": run_id,
                "mode": m,
                "category": _pick_category(cats[(m, a)], run_id, m),
                "agent": a,
                "source": "majority",
                "support": len(who) / len(voters),
            }
            for (m, a), who in votes.items()
            if 2 * len(who) > len(voters)
        ]

    resolved: list[dict[str, Any]] = []
    counts = {"gold": 0, "majority": 0, "annotator": 0}
    labelled: list[str] = []
    for run_id in sorted(universe):
        has_submissions = bool(submitted.get(run_id))
        if annotator_name is not None:
            did_submit = annotator_name in submitted.get(run_id, set())
            mine = [
                r
                for r in by_run.get(run_id, [])
                if r["annotator"] == annotator_name and (r["source"] != "human" or did_submit)
            ]
            if mine or did_submit:
                resolved += collapse(run_id, mine, source)
                counts["annotator"] += 1
                labelled.append(run_id)
        elif source in ("auto", "gold") and run_id in gold:
            resolved += collapse(run_id, [r for r in by_run.get(run_id, []) if r["source"] == "gold"], "gold")
            counts["gold"] += 1
            labelled.append(run_id)
        elif source in ("auto", "majority") and has_submissions:
            resolved += majority(run_id)
            counts["majority"] += 1
            labelled.append(run_id)
    unlabelled = len(universe) - len(labelled)

    if annotator_name is not None:
        parts = [f"annotator {annotator_name} for {_plural(counts['annotator'])}"]
    else:
        parts = []
        if source in ("auto", "gold"):
            parts.append(f"gold for {_plural(counts['gold'])}")
        if source in ("auto", "majority"):
            parts.append(f"human majority for {_plural(counts['majority'])}")
    parts.append(f"unlabelled {_plural(unlabelled)}")
    summary = ", ".join(parts)

    resolved.sort(key=lambda r: (r["run_id"], r["mode"], r["agent"] is None, r["agent"] or ""))
    frame = pd.DataFrame(resolved, columns=list(RESOLVED_LABEL_COLUMNS))
    frame["support"] = frame["support"].astype(float)
    frame.attrs["labelled_runs"] = labelled
    frame.attrs["label_source"] = summary
    return frame, summary


# --------------------------------------------------------------------------------------------
# outcome report


def _label_columns(
    labels: list[dict[str, Any]], modes: Sequence[str] | None, mode_category: Mapping[str, str] | None
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Filter labels to ``modes``, attach the effective category, and list mode/category columns."""
    if mode_category is not None and not isinstance(mode_category, Mapping):
        raise ReportInputError(
            f"mode_category must be a mapping of mode code -> category, got {mode_category!r}"
        )
    if modes is not None:
        if isinstance(modes, str):
            raise ReportInputError(f"modes must be a list of mode codes, got the string {modes!r}")
        mode_list = list(dict.fromkeys(modes))
        bad = [m for m in mode_list if not isinstance(m, str) or not m]
        if bad:
            raise ReportInputError(f"modes: every mode code must be a non-empty string, got {bad!r}")
        keep = set(mode_list)
        labels = [lab for lab in labels if lab["mode"] in keep]
    elif mode_category is not None:
        mode_list = list(mode_category) + sorted({lab["mode"] for lab in labels} - set(mode_category))
    else:
        mode_list = sorted({lab["mode"] for lab in labels})

    out = []
    for lab in labels:
        cat = lab["category"]
        if mode_category is not None and lab["mode"] in mode_category:
            cat = mode_category[lab["mode"]]
        out.append({**lab, "category": cat})
    cats: list[str] = []
    if mode_category is not None:
        cats = list(dict.fromkeys(mode_category[m] for m in mode_list if m in mode_category))
    cats += sorted({lab["category"] for lab in out if lab["category"] is not None} - set(cats))
    return out, mode_list, cats


def _build_units(
    runs: pd.DataFrame,
    principals: pd.DataFrame,
    agents: pd.DataFrame,
    labels: pd.DataFrame,
    threshold: float,
    labelled_runs: Iterable[str] | None,
    modes: Sequence[str] | None,
    mode_category: Mapping[str, str] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], list[str]]:
    run_map = _parse_runs(runs)
    p_map = _parse_principals(principals, run_map)
    a_map = _parse_agents(agents, run_map, p_map)
    labs, mode_list, cat_list = _label_columns(
        _parse_report_labels(labels, run_map, a_map), modes, mode_category
    )

    if labelled_runs is None:
        labelled = set(run_map)
    else:
        labelled = _id_set(labelled_runs, "labelled_runs") | {lab["run_id"] for lab in labs}

    run_modes: dict[str, set[str]] = defaultdict(set)
    run_cats: dict[str, set[str]] = defaultdict(set)
    agent_modes: dict[tuple[str, str], set[str]] = defaultdict(set)
    agent_cats: dict[tuple[str, str], set[str]] = defaultdict(set)
    for lab in labs:
        run_modes[lab["run_id"]].add(lab["mode"])
        if lab["category"] is not None:
            run_cats[lab["run_id"]].add(lab["category"])
        if lab["agent"] is not None:
            agent_modes[(lab["run_id"], lab["agent"])].add(lab["mode"])
            if lab["category"] is not None:
                agent_cats[(lab["run_id"], lab["agent"])].add(lab["category"])

    roles: dict[tuple[str, str], set[str]] = defaultdict(set)
    for a in a_map.values():
        if a["role"] is not None:
            roles[(a["run_id"], a["principal_id"])].add(a["role"])

    def run_part(run_id: str) -> dict[str, Any]:
        r = run_map[run_id]
        return {
            "run_id": run_id,
            "family": r["family"],
            "alignment": r["alignment"],
            "scenario_id": r["scenario_id"],
            "agg_success": aggregate_success(r["status"], r["aggregate_score"], threshold),
            "labelled": run_id in labelled,
        }

    def principal_part(key: tuple[str, str]) -> dict[str, Any]:
        p = p_map[key]
        return {
            "p_kind": p["kind"],
            "p_role": "+".join(sorted(roles[key])) or None,
            "p_success": principal_success(p["success"], p["score"], threshold),
            "score": p["score"],
            "metrics": p["metrics"],
        }

    # each run's and each principal's part once (a run has several principal and agent units)
    run_parts = {run_id: run_part(run_id) for run_id in run_map}
    principal_parts = {key: principal_part(key) for key in p_map}
    p_units = []
    for key in sorted(p_map):
        p_units.append(
            {**run_parts[key[0]], **principal_parts[key], "modes": run_modes[key[0]], "cats": run_cats[key[0]]}
        )
    a_units = []
    for key in sorted(a_map):
        a = a_map[key]
        a_units.append(
            {
                **run_parts[key[0]],
                **principal_parts[(key[0], a["principal_id"])],
                "model": a["model"],
                "harness": a["harness"],
                "role": a["role"],
                "modes": agent_modes[key],
                "cats": agent_cats[key],
            }
        )
    return p_units, a_units, mode_list, cat_list


def _key_fn(by: str):
    """Key of a unit for grouping ``by``; works for agent units and principal units alike
    (an agent unit carries its principal's kind and role set as ``p_kind`` / ``p_role``)."""
    cols = ("p_kind", "p_role") if by == "principal" else GROUPINGS[by]
    return lambda u: tuple(u[c] for c in cols)


def _group(units: list[dict[str, Any]], key_fn) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for u in units:
        groups[key_fn(u)].append(u)
    return groups


def outcome_report(
    runs: pd.DataFrame,
    principals: pd.DataFrame,
    agents: pd.DataFrame,
    labels: pd.DataFrame,
    by: str = "agent",
    *,
    modes: Sequence[str] | None = None,
    mode_category: Mapping[str, str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    labelled_runs: Iterable[str] | None = None,
    label_source: str | None = None,
) -> pd.DataFrame:
    """Return one row per group: the aggregate outcome beside each principal's own outcome and
    the labelled failure modes.

    ``by`` and the *unit* counted in a group:

    * ``"agent"`` (key columns model, harness, role), ``"model"``, ``"harness"``: the unit is an
      **agent-run** (one agent in one run); its principal outcome is that of the agent's own
      principal, and a label counts for it only when that agent is the label's responsible agent.
    * ``"principal"`` (key columns kind, role), ``"family"``, ``"alignment"``, ``"scenario"``
      (key column scenario_id): the unit is a **principal-run**; a label counts for it when it is
      in the same run.  For ``"principal"``, ``role`` is the sorted, ``+``-joined set of roles of
      the principal's agents in that run (None if it has none).

    Columns (rates are in [0, 1], NaN when the denominator is 0):

    * key columns (None is a group of its own and sorts last); rows sorted by key;
    * ``runs``: distinct runs among the group's units; ``n``: number of units;
    * ``aggregate_success_rate``: units whose run is an aggregate success / ``n``;
    * ``principal_success_rate``: units whose principal succeeded / ``principal_known``;
      ``principal_known``, ``principal_unknown``: units whose principal outcome is known /
      unknown (unknown ones are excluded from the rate);
    * ``success_gap``: ``aggregate_success_rate - principal_success_rate``;
    * ``mean_principal_score``: mean principal score over units whose principal has a score;
    * ``metric:<name>``: mean over units whose principal has a numeric value for that metric;
    * ``labelled_n``: units in labelled runs (``labelled_runs``; default every run; a run with a
      label always counts as labelled).  ``cat:<code>`` / ``mode:<code>``: units in labelled runs
      with a label of that category / mode (see above for agent-runs) / ``labelled_n``;
    * ``responsible_n``: the group's agent-runs in labelled runs (for agent units equal to
      ``labelled_n``; for principal units the agent-runs of those principal-runs);
      ``responsible_rate``: those agent-runs whose agent is responsible for >= 1 label /
      ``responsible_n``.

    ``modes`` restricts the labels used (for every column) and fixes the ``mode:`` columns and
    their order, so modes with no labels still get a 0 column.  ``mode_category`` maps mode ->
    category and overrides the labels' ``category``; with ``modes`` unset its keys set the
    ``mode:`` columns (plus any labelled mode not in it).  Without either, the columns are the
    sorted modes / categories present in ``labels``.  Labels with no category count for ``mode:``
    and responsibility only.

    ``labels`` should be the resolved labels of :func:`resolve_labels`.  ``attrs`` of the result
    hold ``by``, ``unit``, ``threshold`` and ``label_source``.
    """
    if by not in GROUPINGS:
        raise ReportInputError(f"by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    threshold = _check_threshold(threshold)
    p_units, a_units, mode_list, cat_list = _build_units(
        runs, principals, agents, labels, threshold, labelled_runs, modes, mode_category
    )
    agent_grouping = by in _AGENT_UNIT_GROUPINGS
    units = a_units if agent_grouping else p_units
    groups = _group(units, _key_fn(by))
    responsible_groups = _group(a_units, _key_fn(by))
    metric_names = sorted({m for u in units for m in u["metrics"]})
    key_cols = GROUPINGS[by]

    rows = []
    for key in sorted(groups, key=_sort_key):
        g = groups[key]
        n = len(g)
        known = [u["p_success"] for u in g if u["p_success"] is not None]
        agg_rate = _rate(sum(u["agg_success"] for u in g), n)
        p_rate = _rate(sum(known), len(known))
        lab = [u for u in g if u["labelled"]]
        resp = [u for u in responsible_groups.get(key, []) if u["labelled"]]
        row: dict[str, Any] = dict(zip(key_cols, key))
        row.update(
            {
                "runs": len({u["run_id"] for u in g}),
                "n": n,
                "aggregate_success_rate": agg_rate,
                "principal_success_rate": p_rate,
                "success_gap": agg_rate - p_rate,
                "principal_known": len(known),
                "principal_unknown": n - len(known),
                "mean_principal_score": _mean([u["score"] for u in g if u["score"] is not None]),
            }
        )
        for m in metric_names:
            row[f"metric:{m}"] = _mean([u["metrics"][m] for u in g if m in u["metrics"]])
        row["labelled_n"] = len(lab)
        row["responsible_n"] = len(resp)
        row["responsible_rate"] = _rate(sum(bool(u["modes"]) for u in resp), len(resp))
        for c in cat_list:
            row[f"cat:{c}"] = _rate(sum(c in u["cats"] for u in lab), len(lab))
        for m in mode_list:
            row[f"mode:{m}"] = _rate(sum(m in u["modes"] for u in lab), len(lab))
        rows.append(row)

    columns = [
        *key_cols,
        "runs",
        "n",
        "aggregate_success_rate",
        "principal_success_rate",
        "success_gap",
        "principal_known",
        "principal_unknown",
        "mean_principal_score",
        *(f"metric:{m}" for m in metric_names),
        "labelled_n",
        "responsible_n",
        "responsible_rate",
        *(f"cat:{c}" for c in cat_list),
        *(f"mode:{m}" for m in mode_list),
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs.update(
        {
            "by": by,
            "unit": "agent-run" if agent_grouping else "principal-run",
            "threshold": threshold,
            "label_source": label_source,
        }
    )
    return frame


# --------------------------------------------------------------------------------------------
# blind spots


def _blind_spot_rows(
    run_map: Mapping[str, dict[str, Any]],
    p_map: Mapping[tuple[str, str], dict[str, Any]],
    labs: list[dict[str, Any]],
    threshold: float,
) -> list[dict[str, Any]]:
    failed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for key in sorted(p_map):
        p = p_map[key]
        if principal_success(p["success"], p["score"], threshold) is False:
            failed[key[0]].append(p)
    pairs: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for lab in labs:
        pairs[lab["run_id"]].add((lab["mode"], lab["agent"]))

    rows = []
    for run_id in sorted(run_map):
        r = run_map[run_id]
        if not aggregate_success(r["status"], r["aggregate_score"], threshold):
            continue
        if not failed[run_id] and not pairs[run_id]:
            continue
        reasons = []
        for p in failed[run_id]:
            detail = "no score" if p["score"] is None else f"score {p['score']:.2f}"
            reasons.append(f"principal {p['principal_id']} failed ({detail})")
        ordered = sorted(pairs[run_id], key=lambda ma: (ma[0], ma[1] is None, ma[1] or ""))
        for mode, agent in ordered:
            reasons.append(f"labelled {mode} ({agent if agent is not None else 'no agent named'})")
        rows.append(
            {
                **{
                    c: r[c]
                    for c in ("run_id", "scenario_id", "family", "alignment", "status", "aggregate_score")
                },
                "failed_principals": [p["principal_id"] for p in failed[run_id]],
                "labelled_modes": sorted({m for m, _ in pairs[run_id]}),
                "reasons": reasons,
            }
        )
    return rows


def blind_spots(
    runs: pd.DataFrame,
    principals: pd.DataFrame,
    labels: pd.DataFrame,
    threshold: float = DEFAULT_THRESHOLD,
) -> pd.DataFrame:
    """Return the runs the aggregate outcome calls a success (see :func:`aggregate_success`)
    while at least one principal's own outcome failed or at least one failure mode was labelled.

    One row per such run, sorted by run_id, with :data:`BLIND_SPOT_COLUMNS`:
    the run's fields, ``failed_principals`` (sorted principal ids whose own outcome is a
    failure; unknown outcomes are not failures), ``labelled_modes`` (sorted distinct modes) and
    ``reasons``: one string per failed principal, ``"principal buyer failed (score 0.20)"`` (or
    ``"(no score)"`` when only the flag says so), then one per distinct labelled (mode, agent),
    ``"labelled CF3 (buyer_agent)"`` (``"(no agent named)"`` without an agent), sorted by mode then
    agent.  ``labels`` should be resolved labels (see :func:`resolve_labels`).
    """
    threshold = _check_threshold(threshold)
    run_map = _parse_runs(runs)
    p_map = _parse_principals(principals, run_map)
    labs = _parse_report_labels(labels, run_map, None)
    rows = _blind_spot_rows(run_map, p_map, labs, threshold)
    return pd.DataFrame(rows, columns=list(BLIND_SPOT_COLUMNS))


def blind_spot_rates(
    runs: pd.DataFrame,
    principals: pd.DataFrame,
    labels: pd.DataFrame,
    agents: pd.DataFrame | None = None,
    by: str = "family",
    threshold: float = DEFAULT_THRESHOLD,
) -> pd.DataFrame:
    """Return blind-spot rates per group: blind-spot runs / runs with aggregate success.

    ``by`` is one of :data:`BLIND_SPOT_RATE_GROUPINGS` (family, alignment, scenario, model,
    harness); ``agents`` is required for model and harness, where a run belongs to every model
    (harness) used by at least one of its agents, counted once per group.  Columns: the key
    column (``family``, ``alignment``, ``scenario_id``, ``model`` or ``harness``), ``runs`` (runs
    in the group), ``aggregate_success_runs``, ``blind_spot_runs`` and ``blind_spot_rate``
    (NaN when no run of the group is an aggregate success).  Rows sorted by key, None last.
    """
    if by not in BLIND_SPOT_RATE_GROUPINGS:
        raise ReportInputError(f"by must be one of {', '.join(BLIND_SPOT_RATE_GROUPINGS)}, got {by!r}")
    threshold = _check_threshold(threshold)
    run_map = _parse_runs(runs)
    p_map = _parse_principals(principals, run_map)
    col = BLIND_SPOT_RATE_GROUPINGS[by]
    a_map = None
    if by in ("model", "harness"):
        if agents is None:
            raise ReportInputError(f"blind_spot_rates(by={by!r}) needs the agents frame")
        a_map = _parse_agents(agents, run_map, p_map)
    elif agents is not None:
        a_map = _parse_agents(agents, run_map, p_map)
    labs = _parse_report_labels(labels, run_map, a_map)
    spots = {r["run_id"] for r in _blind_spot_rows(run_map, p_map, labs, threshold)}

    members: dict[tuple, set[str]] = defaultdict(set)
    if by in ("model", "harness"):
        assert a_map is not None
        for a in a_map.values():
            members[(a[col],)].add(a["run_id"])
    else:
        for r in run_map.values():
            members[(r[col],)].add(r["run_id"])
    rows = []
    for key in sorted(members, key=_sort_key):
        ids = members[key]
        ok = [
            rid
            for rid in ids
            if aggregate_success(run_map[rid]["status"], run_map[rid]["aggregate_score"], threshold)
        ]
        hits = sum(rid in spots for rid in ok)
        rows.append(
            {
                col: key[0],
                "runs": len(ids),
                "aggregate_success_runs": len(ok),
                "blind_spot_runs": hits,
                "blind_spot_rate": _rate(hits, len(ok)),
            }
        )
    frame = pd.DataFrame(
        rows, columns=[col, "runs", "aggregate_success_runs", "blind_spot_runs", "blind_spot_rate"]
    )
    frame.attrs.update({"by": by, "threshold": threshold})
    return frame


# --------------------------------------------------------------------------------------------
# cross-play


def crossplay(
    runs: pd.DataFrame,
    principals: pd.DataFrame,
    agents: pd.DataFrame,
    by: str = "model",
    threshold: float = DEFAULT_THRESHOLD,
) -> pd.DataFrame:
    """Return cross-play cells: how each side's principal fared against the other side.

    Only runs whose alignment is ``mixed`` or ``competitive`` and which have agents of at least
    two different principals are used.  An *observation* is a run together with an ordered pair
    of sides ((principal P, value a), (principal Q, value b)) with P != Q, where P has an agent
    whose ``by`` value (model or harness) is a and Q has one whose value is b; each distinct
    observation is counted once (two agents of one principal with the same model count once).
    Both orders are included, so cell (b, a) mirrors cell (a, b), and self-play (a, a) gets two
    observations per pair of principals.

    Columns (:data:`CROSSPLAY_COLUMNS`), one row per ordered pairing, sorted by (a, b), None last:
    ``a``, ``b``; ``runs``: distinct runs; ``n``: observations; ``a_mean_score`` /
    ``b_mean_score``: mean score of side A's / B's principal over observations where it has one;
    ``a_success_rate`` / ``b_success_rate``: principal success over observations where it is
    known; ``a_success_unknown`` / ``b_success_unknown``: observations with unknown outcome.
    See :func:`crossplay_matrix` for the heatmap form.
    """
    if by not in ("model", "harness"):
        raise ReportInputError(f"by must be 'model' or 'harness', got {by!r}")
    threshold = _check_threshold(threshold)
    run_map = _parse_runs(runs)
    p_map = _parse_principals(principals, run_map)
    a_map = _parse_agents(agents, run_map, p_map)

    sides: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for a in a_map.values():
        if run_map[a["run_id"]]["alignment"] in _CROSSPLAY_ALIGNMENTS:
            sides[a["run_id"]].add((a["principal_id"], a[by]))

    cells: dict[tuple, list[tuple[str, dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for run_id in sorted(sides):
        for pa, va in sorted(sides[run_id], key=lambda s: (s[0], s[1] is None, s[1] or "")):
            for pb, vb in sorted(sides[run_id], key=lambda s: (s[0], s[1] is None, s[1] or "")):
                if pa != pb:
                    cells[(va, vb)].append((run_id, p_map[(run_id, pa)], p_map[(run_id, pb)]))

    rows = []
    for key in sorted(cells, key=_sort_key):
        obs = cells[key]
        row: dict[str, Any] = {"a": key[0], "b": key[1], "runs": len({o[0] for o in obs}), "n": len(obs)}
        for side, idx in (("a", 1), ("b", 2)):
            ps = [o[idx] for o in obs]
            succ = [principal_success(p["success"], p["score"], threshold) for p in ps]
            known = [s for s in succ if s is not None]
            row[f"{side}_mean_score"] = _mean([p["score"] for p in ps if p["score"] is not None])
            row[f"{side}_success_rate"] = _rate(sum(known), len(known))
            row[f"{side}_success_unknown"] = len(succ) - len(known)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(CROSSPLAY_COLUMNS))
    frame.attrs.update({"by": by, "threshold": threshold})
    return frame


def crossplay_matrix(
    cells: pd.DataFrame, value: str = "a_mean_score"
) -> tuple[list[str | None], list[str | None], list[list[float | None]]]:
    """Return ``(row_labels, col_labels, values)`` for a heatmap of one :func:`crossplay` column.

    Rows are side A, columns side B; both axes list every value seen on either side, sorted
    (None last), so the matrix is square.  ``values[i][j]`` is the cell (row i, column j) or None
    when that pairing was never played or the value is NaN.
    """
    _check_frame(cells, ("a", "b", value), "cells")
    if value not in CROSSPLAY_COLUMNS[2:]:
        raise ReportInputError(f"value must be one of {', '.join(CROSSPLAY_COLUMNS[2:])}, got {value!r}")
    recs = _records(cells, ("a", "b", value))
    labels = sorted({(r["a"],) for r in recs} | {(r["b"],) for r in recs}, key=_sort_key)
    axis = [k[0] for k in labels]
    pos = {v: i for i, v in enumerate(axis)}
    matrix: list[list[float | None]] = [[None] * len(axis) for _ in axis]
    for r in recs:
        v = r[value]
        matrix[pos[r["a"]]][pos[r["b"]]] = None if _missing(v) else float(v)
    return axis, list(axis), matrix


# --------------------------------------------------------------------------------------------
# JSON-safe output


def _json_safe(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted(items, key=lambda x: (x is None, str(x)))
        return [_json_safe(v) for v in items]
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, (pd.Timestamp, datetime, date)):
        return value.isoformat()
    if isinstance(value, (str, int)) or value is None:
        return value
    if isinstance(value, Hashable):
        return str(value)
    raise TypeError(f"cannot make {type(value).__name__} JSON-safe")


def to_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Return the frame as a JSON-safe list of dicts (one per row, keys = column names, in
    order): NaN / NA / inf -> None, numpy scalars -> Python scalars, lists/sets/arrays -> lists,
    timestamps -> ISO strings."""
    if not isinstance(frame, pd.DataFrame):
        raise ReportInputError(f"to_records: expected a pandas DataFrame, got {type(frame).__name__}")
    cols = [str(c) for c in frame.columns]
    return [{c: _json_safe(v) for c, v in zip(cols, row)} for row in frame.itertuples(index=False, name=None)]


def report_payload(frame: pd.DataFrame) -> dict[str, Any]:
    """Return ``{"meta": <frame.attrs, JSON-safe>, "columns": [...], "rows": to_records(frame)}``,
    so that an API response states the grouping, threshold and label source it used."""
    return {
        "meta": _json_safe(dict(frame.attrs)),
        "columns": [str(c) for c in frame.columns],
        "rows": to_records(frame),
    }
