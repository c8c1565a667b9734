"""Outcome reports: each agent against its OWN principal, beside the aggregate score.

The aggregate task score credits the agent that finished and hides what happened to each
principal.  These functions put the two side by side and show the labelled failure modes
beneath them.  Pure computation: pandas DataFrames in, pandas DataFrames / plain data out.

Input frames (the column lists are the constants below; extra columns are ignored):

* ``runs`` (:data:`RUN_COLUMNS`): one row per run.  ``status`` in :data:`STATUSES`,
  ``alignment`` in :data:`ALIGNMENTS` or missing, ``aggregate_score`` a number or missing.
* ``principals`` (:data:`PRINCIPAL_COLUMNS`): one row per (run, principal).  ``kind`` in
  :data:`PRINCIPAL_KINDS` or missing (the canonical run format makes it optional); ``success`` bool or missing; ``score`` number or missing;
  ``metrics`` a dict (numeric values, excluding booleans and NaN/inf, are averaged; the rest
  ignored) or missing.
* ``agents`` (:data:`AGENT_COLUMNS`): one row per (run, agent); ``principal_id`` must name a
  principal of the same run.
* ``labels`` (:data:`LABEL_COLUMNS` for :func:`resolve_labels`; the reports need only
  :data:`REPORT_LABEL_COLUMNS` and should be given *resolved* labels).

Outcome definitions (``threshold`` defaults to :data:`DEFAULT_THRESHOLD`):

* aggregate success of a run: ``status == "completed" and aggregate_score >= threshold``
  (a missing aggregate score is not a success);
* principal success: the ``success`` flag if present, else ``score >= threshold`` if a score is
  present, else *unknown*.  Unknown outcomes are left out of every principal success-rate
  denominator and counted in the ``principal_unknown`` column instead.

Bad input raises :class:`ReportInputError` (a ``ValueError``) naming the frame, row and field.
"""

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
#
# One parser per input frame, by column.  Each field check gives the field's values and a mask
# of the rows where it fails; a check that needs other fields (duplicates, a run or principal
# that must exist) only looks at rows where those passed.  When any mask has a row, the error
# names the first bad row and, within it, the first failing field in the order the fields are
# listed below (the order a reader goes through a row), so the message does not depend on how
# the columns are stored.  Common column types (all strings, float64, plain numbers with
# None/NaN gaps) are checked as whole arrays; any other type is checked value by value with the
# same rule.

#: types whose missing values :func:`pd.isna` finds exactly as :func:`_missing` does
_NA_EXACT_TYPES = frozenset({type(None), float, np.float64, np.float32, np.float16, type(pd.NA), type(pd.NaT),
                             bool, np.bool_, int, np.int64, np.int32, np.int16, np.int8, np.uint64, np.uint32,
                             np.uint16, np.uint8, str})
_NUMBER_TYPES = frozenset({int, float, np.float64, np.float32, np.float16, np.int64, np.int32, np.int16,
                           np.int8, np.uint64, np.uint32, np.uint16, np.uint8})
_BOOL_TYPES = frozenset({bool, np.bool_})

#: numeric metrics in long form: (row, name code, names, value)
_Metrics = tuple[np.ndarray, np.ndarray, list[str], list[float]]


def _objects(df: pd.DataFrame, field: str) -> np.ndarray:
    return df[field].to_numpy(dtype=object)


def _types(values: np.ndarray) -> set[type]:
    return set(map(type, values))


def _each(test: Any, values: np.ndarray) -> np.ndarray:
    return np.fromiter(map(test, values), dtype=bool, count=len(values))


def _missing_of(values: np.ndarray, types: set[type]) -> np.ndarray:
    """:func:`_missing` of every value."""
    if types <= {str}:
        return np.zeros(len(values), dtype=bool)
    if types <= _NA_EXACT_TYPES:
        return np.asarray(pd.isna(values), dtype=bool)
    return _each(_missing, values)


def _is_number_of(values: np.ndarray, types: set[type]) -> np.ndarray:
    """:func:`_is_number` of every value."""
    if types <= _NUMBER_TYPES:
        return np.ones(len(values), dtype=bool)
    return _each(_is_number, values)


def _is_str_of(values: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Which values are strings (those at ``skip`` are not looked at and count as strings)."""
    out = np.ones(len(values), dtype=bool)
    look = ~skip
    if look.any():
        rest = values[look]
        if not _types(rest) <= {str}:
            out[look] = _each(lambda v: isinstance(v, str), rest)
    return out


def _not_empty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


class _Frame:
    """One input frame under validation: its field checks and the first failing (row, field)."""

    def __init__(self, df: pd.DataFrame, name: str, columns: Sequence[str]) -> None:
        _check_frame(df, columns, name)
        self.df, self.name, self.columns = _bare(df), name, columns
        self.n = len(self.df)
        self._checks = 0
        self._first: tuple[int, int, Any] | None = None

    def check(self, bad: np.ndarray, message: Any) -> None:
        """Register a check in field order: ``bad`` rows fail it, ``message(i, row)`` says why."""
        self._checks += 1
        if self.n and bad.any():
            found = (int(np.argmax(bad)), self._checks, message)
            if self._first is None or found[:2] < self._first[:2]:
                self._first = found

    def raise_first(self) -> None:
        """Raise the error of the first failing row and field, if any."""
        if self._first is not None:
            i, _, message = self._first
            row = _records(self.df.iloc[i : i + 1], self.columns)[0]
            raise ReportInputError(message(i, row))

    def _field(self, field: str, what: str, i: int, row: Mapping[str, Any]) -> str:
        return f"{_where(self.name, i, row)}: field {field!r} {what}, got {row[field]!r}"

    def req_str(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """A non-empty string field: ``(values, ok)``."""
        values = _objects(self.df, field)
        if _types(values) <= {str}:
            bad = np.asarray(values == "", dtype=bool) if self.n else np.zeros(0, dtype=bool)
        else:
            bad = ~_each(_not_empty_str, values)
        self.check(bad, lambda i, row: self._field(field, "must be a non-empty string", i, row))
        return values, ~bad

    def opt_str(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """A string-or-missing field, missing -> None: ``(values, bad)``."""
        values = _objects(self.df, field)
        types = _types(values)
        if types <= {str}:
            return values, np.zeros(self.n, dtype=bool)
        missing = _missing_of(values, types)
        bad = ~missing & ~_is_str_of(values, missing)
        self.check(bad, lambda i, row: self._field(field, "must be a string or missing", i, row))
        out = values.copy()
        out[missing | bad] = None
        return out, bad

    def choice(self, field: str, allowed: Sequence[str], optional: bool) -> tuple[np.ndarray, np.ndarray]:
        """A field whose value is one of ``allowed`` (or missing, when ``optional``, -> None):
        ``(values, ok)``."""
        values = _objects(self.df, field)
        types = _types(values)
        missing = _missing_of(values, types) if optional else np.zeros(self.n, dtype=bool)
        present = ~missing
        member = np.zeros(self.n, dtype=bool)
        if present.any():
            rest = values[present]
            member[present] = np.asarray(pd.Series(rest, dtype=object).isin(list(allowed)), dtype=bool) \
                if _types(rest) <= {str} else _each(lambda v: v in allowed, rest)
        bad = ~missing & ~member
        extra = " or missing" if optional else ""
        self.check(bad, lambda i, row: f"{_where(self.name, i, row)}: field {field!r} = {row[field]!r} "
                                       f"is not one of {', '.join(allowed)}{extra}")
        if missing.any():
            values = values.copy()
            values[missing] = None
        return values, ~bad

    def number(self, field: str) -> np.ndarray:
        """A number-or-missing field as float64, NaN for missing (what ``float(value)`` gives)."""
        col = self.df[field]
        if col.dtype.kind in "fiu":
            return col.to_numpy(dtype=np.float64, na_value=np.nan)
        values = col.to_numpy(dtype=object)
        types = _types(values)
        missing = _missing_of(values, types)
        number = _is_number_of(values, types)
        bad = ~missing & ~number
        self.check(bad, lambda i, row: self._field(field, "must be a number or missing", i, row))
        out = np.full(self.n, np.nan)
        ok = ~missing & number
        if ok.any():
            out[ok] = np.array([float(v) for v in values[ok]], dtype=np.float64) \
                if not types <= _NUMBER_TYPES | _NA_EXACT_TYPES else values[ok].astype(np.float64)
        return out

    def flag(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """A true/false-or-missing field (numbers 0 and 1 count as false and true):
        ``(known, value)``."""
        col = self.df[field]
        if col.dtype == np.bool_:
            return np.ones(self.n, dtype=bool), col.to_numpy(dtype=bool)
        values = col.to_numpy(dtype=object)
        types = _types(values)
        known = ~_missing_of(values, types)
        if not types & _BOOL_TYPES:
            is_bool = np.zeros(self.n, dtype=bool)
        elif types <= _BOOL_TYPES | {type(None)}:
            is_bool = known
        else:
            is_bool = _each(lambda v: isinstance(v, (bool, np.bool_)), values)
        number = known & ~is_bool
        if number.any():
            rest = values[number]
            number[number] = _is_number_of(rest, _types(rest))
        as_float = np.zeros(self.n)
        if number.any():
            as_float[number] = [float(v) for v in values[number]]
        bad = known & ~is_bool & ~(number & ((as_float == 0.0) | (as_float == 1.0)))
        self.check(bad, lambda i, row: self._field(field, "must be true, false or missing", i, row))
        value = np.zeros(self.n, dtype=bool)
        if is_bool.any():
            value[is_bool] = values[is_bool].astype(bool)
        value[number] = as_float[number] == 1.0
        return known & ~bad, value

    def metrics(self, field: str = "metrics") -> _Metrics:
        """The numeric metrics of every row, long form ``(row, name code, names, value)``: per
        row the entries whose value is a finite number (not a bool), keys made strings, a later
        duplicate name of one row winning; ``names[code]`` is the name.  A value that is neither
        a mapping nor missing fails the check."""
        rows: list[int] = []
        codes: list[int] = []
        code_of: dict[str, int] = {}
        vals: list[float] = []
        odd_keys = False
        isfinite = math.isfinite
        bad = np.zeros(self.n, dtype=bool)
        add_row, add_code, add_val, code_get = rows.append, codes.append, vals.append, code_of.get
        for i, d in enumerate(_objects(self.df, field)):
            if type(d) is dict or (not _missing(d) and isinstance(d, Mapping)):
                for key, v in d.items():
                    t = type(v)
                    if t is float:
                        if v - v != 0.0:  # inf or NaN
                            continue
                    elif t is int:
                        v = float(v)
                    elif t is str or t is bool or t is list or t is dict or v is None:
                        continue
                    elif _is_number(v) and isfinite(float(v)):
                        v = float(v)
                    else:
                        continue
                    if type(key) is not str:
                        key, odd_keys = str(key), True
                    code = code_get(key)
                    if code is None:
                        code = code_of[key] = len(code_of)
                    add_row(i)
                    add_code(code)
                    add_val(v)
            elif not _missing(d):
                bad[i] = True
        self.check(bad, lambda i, row: f"{_where(self.name, i, row)}: field {field!r} must be a dict or "
                                       f"missing, got {type(row[field]).__name__}")
        if odd_keys:  # str(key) may make two keys of one row the same name: the last one counts
            frame = pd.DataFrame({"row": rows, "code": codes, "value": vals}).drop_duplicates(
                ["row", "code"], keep="last").sort_index()
            rows, codes, vals = list(frame["row"]), list(frame["code"]), list(frame["value"])
        return np.asarray(rows, dtype=np.int64), np.asarray(codes, dtype=np.int64), list(code_of), vals


class _Pairs:
    """(run, id) pairs as int64 codes, for uniqueness checks and lookups without tuples:
    ``run_pos`` are positions in the runs frame, ``ids`` strings (rows outside ``ok`` get no
    pair: they never match and are never duplicates)."""

    def __init__(self, run_ids: np.ndarray, run_pos: np.ndarray, ids: np.ndarray, ok: np.ndarray | None = None
                 ) -> None:
        self.run_ids, self.ids = run_ids, ids
        ok = np.ones(len(ids), dtype=bool) if ok is None else ok & (run_pos >= 0)
        if len(ids) and ok.any():
            id_codes, uniques = pd.factorize(ids[ok])
        else:
            id_codes, uniques = np.zeros(0, np.int64), np.zeros(0, dtype=object)
        self.vocab = pd.Index(uniques, dtype=object)
        self.width = len(self.vocab) + 1
        codes = -np.arange(1, len(ids) + 1, dtype=np.int64)  # distinct, never found
        codes[ok] = run_pos[ok].astype(np.int64) * self.width + id_codes + 1
        self.codes = pd.Index(codes)
        self.ok = ok

    def duplicated(self) -> np.ndarray:
        """Rows whose pair an earlier row already has."""
        return np.asarray(self.codes.duplicated(keep="first"), dtype=bool) & self.ok

    def find(self, run_pos: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Positions of the pairs ``(run_pos, ids)`` among these pairs, -1 when absent (the pairs
        must be unique; ``ids`` strings)."""
        if not len(ids):
            return np.zeros(0, dtype=np.int64)
        code = self.vocab.get_indexer(ids)
        key = np.where((code >= 0) & (run_pos >= 0), run_pos.astype(np.int64) * self.width + code + 1, 0)
        return np.where(key > 0, self.codes.get_indexer(key), -1)


def _bare(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without its attrs: pandas deep-copies attrs on every column access, and a resolved
    label frame carries the list of labelled runs there."""
    if df.attrs:
        df = df.copy(deep=False)
        df.attrs = {}
    return df


def _positions(index: pd.Index, values: np.ndarray) -> np.ndarray:
    return index.get_indexer(values) if len(values) else np.zeros(0, dtype=np.int64)


def _runs_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs frame checked (fields run_id, scenario_id, family, alignment, status,
    aggregate_score; a run_id at most once), in row order, missing -> None (``aggregate_score``
    NaN)."""
    f = _Frame(runs, "runs", RUN_COLUMNS)
    run_id, ok = f.req_str("run_id")
    dup = ok & np.asarray(pd.Index(np.where(ok, run_id, None)).duplicated(keep="first"), dtype=bool) \
        if f.n else np.zeros(0, dtype=bool)
    f.check(dup, lambda i, row: f"runs row {i}: duplicate run_id {row['run_id']!r}")
    out = pd.DataFrame({
        "run_id": run_id,
        "scenario_id": f.req_str("scenario_id")[0],
        "family": f.req_str("family")[0],
        "alignment": f.choice("alignment", ALIGNMENTS, optional=True)[0],
        "status": f.choice("status", STATUSES, optional=False)[0],
        "aggregate_score": f.number("aggregate_score"),
    }, index=pd.RangeIndex(f.n))
    f.raise_first()
    return out


def _in_runs(f: _Frame, run_index: pd.Index) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The run_id field (a non-empty string naming a run of ``run_index``): ``(run_id, position,
    ok)``."""
    run_id, ok = f.req_str("run_id")
    run_pos = np.full(f.n, -1, dtype=np.int64)
    if ok.any():
        run_pos[ok] = _positions(run_index, run_id[ok])
    f.check(ok & (run_pos < 0), lambda i, row: f"{f.name} row {i}: run_id {row['run_id']!r} is not in runs")
    return run_id, run_pos, ok & (run_pos >= 0)


def _once_per_run(f: _Frame, run_index: pd.Index, key: str, what: str):
    """The rows' run (`_in_runs`) and their required ``key`` column, each (run, key) pair
    checked to appear once ("<frame> row i: duplicate <what> 'x' in run 'y'"): run_id, run_pos,
    run_ok, the key's values and validity, and the pairs."""
    run_id, run_pos, run_ok = _in_runs(f, run_index)
    kid, kid_ok = f.req_str(key)
    pairs = _Pairs(run_id, run_pos, kid, run_ok & kid_ok)
    f.check(pairs.duplicated(), lambda i, row: f"{f.name} row {i}: duplicate {what} {row[key]!r} "
                                               f"in run {row['run_id']!r}")
    return run_id, run_pos, run_ok, kid, kid_ok, pairs


def _principals_columns(principals: pd.DataFrame, run_index: pd.Index
                        ) -> tuple[pd.DataFrame, _Metrics, _Pairs]:
    """The principals frame checked (run_id naming a run, principal_id once per run, kind,
    success, score, metrics): columns run_id, principal_id, run (position in ``run_index``),
    kind, known (the success flag is present), flag, score (NaN when missing); the numeric
    metrics in long form (see :meth:`_Frame.metrics`); the (run, principal) pairs."""
    f = _Frame(principals, "principals", PRINCIPAL_COLUMNS)
    run_id, run_pos, run_ok, pid, pid_ok, pairs = _once_per_run(f, run_index, "principal_id", "principal")
    kind = f.choice("kind", PRINCIPAL_KINDS, optional=True)[0]
    known, flag = f.flag("success")
    out = pd.DataFrame({
        "run_id": run_id, "principal_id": pid, "run": run_pos, "kind": kind,
        "known": known, "flag": flag, "score": f.number("score"),
    }, index=pd.RangeIndex(f.n))
    metrics = f.metrics()
    f.raise_first()
    return out, metrics, pairs


def _agents_columns(agents: pd.DataFrame, run_index: pd.Index, principal_pairs: _Pairs
                    ) -> tuple[pd.DataFrame, _Pairs]:
    """The agents frame checked (run_id naming a run, agent_id once per run, principal_id naming
    a principal of that run, role, model, harness), plus ``run`` and ``p`` (the positions of the
    agent's run and principal); and the (run, agent) pairs."""
    f = _Frame(agents, "agents", AGENT_COLUMNS)
    run_id, run_pos, run_ok, aid, aid_ok, pairs = _once_per_run(f, run_index, "agent_id", "agent")
    pid, pid_ok = f.req_str("principal_id")
    p = np.full(f.n, -1, dtype=np.int64)
    both = run_ok & aid_ok & pid_ok
    if both.any():
        p[both] = principal_pairs.find(run_pos[both], pid[both])
    f.check(both & (p < 0), lambda i, row: f"agents row {i} (run_id={row['run_id']!r}, agent_id="
                                           f"{row['agent_id']!r}): principal_id {row['principal_id']!r} "
                                           "is not a principal of that run")
    out = pd.DataFrame({
        "run_id": run_id, "agent_id": aid, "principal_id": pid,
        "role": f.opt_str("role")[0], "model": f.opt_str("model")[0], "harness": f.opt_str("harness")[0],
        "run": run_pos, "p": p,
    }, index=pd.RangeIndex(f.n))
    f.raise_first()
    return out, pairs


def _report_labels_columns(labels: pd.DataFrame, run_index: pd.Index, agent_pairs: _Pairs | None
                           ) -> pd.DataFrame:
    """The labels frame checked (run_id naming a run; agent missing or, when ``agent_pairs`` is
    given, naming an agent of that run; mode; category), in row order, missing -> None."""
    f = _Frame(labels, "labels", REPORT_LABEL_COLUMNS)
    run_id, run_pos, run_ok = _in_runs(f, run_index)
    agent, agent_bad = f.opt_str("agent")
    if agent_pairs is not None:
        named = run_ok & ~agent_bad & ~pd.isna(agent)
        unknown = np.zeros(f.n, dtype=bool)
        if named.any():
            unknown[named] = agent_pairs.find(run_pos[named], agent[named]) < 0
        f.check(unknown, lambda i, row: f"labels row {i} (run_id={row['run_id']!r}): agent {row['agent']!r} "
                                        "is not an agent of that run")
    out = pd.DataFrame({
        "run_id": run_id, "mode": f.req_str("mode")[0], "category": f.opt_str("category")[0], "agent": agent,
    }, index=pd.RangeIndex(f.n))
    f.raise_first()
    return out


def _none(values: np.ndarray) -> list[Any]:
    """The values of a float column, NaN -> None."""
    return [None if v != v else v for v in values.tolist()]


def _parse_runs(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The checked runs (see :func:`_runs_columns`) as ``run_id -> dict``."""
    R = _runs_columns(runs)
    cols = [R[c].tolist() for c in RUN_COLUMNS[:-1]] + [_none(R["aggregate_score"].to_numpy())]
    return {row[0]: dict(zip(RUN_COLUMNS, row)) for row in zip(*cols)}


def _parse_principals(principals: pd.DataFrame, runs: Mapping[str, Any]
                      ) -> dict[tuple[str, str], dict[str, Any]]:
    """The checked principals (see :func:`_principals_columns`) as ``(run_id, principal_id) ->
    dict`` with success (None when missing), score (None when missing) and metrics (a dict)."""
    P, (m_row, m_code, m_names, m_vals), _ = _principals_columns(principals, pd.Index(list(runs), dtype=object))
    metrics: list[dict[str, float]] = [{} for _ in range(len(P))]
    for r, c, v in zip(m_row.tolist(), m_code.tolist(), m_vals):
        metrics[r][m_names[c]] = v
    out = {}
    for rid, pid, kind, known, flag, score, m in zip(P["run_id"], P["principal_id"], P["kind"], P["known"],
                                                      P["flag"], _none(P["score"].to_numpy()), metrics):
        out[(rid, pid)] = {"run_id": rid, "principal_id": pid, "kind": kind,
                           "success": bool(flag) if known else None, "score": score, "metrics": m}
    return out


def _principal_pairs(p_map: Mapping[tuple[str, str], Any], run_index: pd.Index) -> _Pairs:
    run_ids = np.array([k[0] for k in p_map] + [None], dtype=object)[:-1]
    pids = np.array([k[1] for k in p_map] + [None], dtype=object)[:-1]
    return _Pairs(run_ids, _positions(run_index, run_ids), pids)


def _parse_agents(agents: pd.DataFrame, runs: Mapping[str, Any], principals: Mapping[tuple[str, str], Any]
                  ) -> dict[tuple[str, str], dict[str, Any]]:
    """The checked agents (see :func:`_agents_columns`) as ``(run_id, agent_id) -> dict``."""
    run_index = pd.Index(list(runs), dtype=object)
    A, _ = _agents_columns(agents, run_index, _principal_pairs(principals, run_index))
    return {(row[0], row[1]): dict(zip(AGENT_COLUMNS, row))
            for row in zip(*(A[c].tolist() for c in AGENT_COLUMNS))}


def _parse_report_labels(labels: pd.DataFrame, runs: Mapping[str, Any],
                         agents: Mapping[tuple[str, str], Any] | None) -> list[dict[str, Any]]:
    """The checked labels (see :func:`_report_labels_columns`) as dicts, in row order."""
    run_index = pd.Index(list(runs), dtype=object)
    pairs = None
    if agents is not None:
        pairs = _principal_pairs(agents, run_index)  # (run, agent) pairs, built the same way
    L = _report_labels_columns(labels, run_index, pairs)
    return [dict(zip(REPORT_LABEL_COLUMNS, row)) for row in zip(*(L[c].tolist() for c in REPORT_LABEL_COLUMNS))]


def _codes(*columns: np.ndarray) -> tuple[np.ndarray, int]:
    """Group codes of the rows of ``columns`` (None/NaN is a value of its own): ``(codes, n_groups)``."""
    n = len(columns[0])
    codes = np.zeros(n, dtype=np.int64)
    for col in columns:
        c, uniques = pd.factorize(col, use_na_sentinel=False)
        codes = codes * max(len(uniques), 1) + c
    if len(columns) > 1:
        codes, uniques = pd.factorize(codes)
        return codes.astype(np.int64), len(uniques)
    return codes, int(codes.max()) + 1 if n else 0


def _group_fsum(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the correctly rounded sum (math.fsum) of ``values``: float64 array."""
    out = np.zeros(n_groups)
    if not len(values):
        return out
    order = np.argsort(groups, kind="stable")
    g, v = groups[order], values[order].tolist()
    bounds = np.flatnonzero(np.diff(g)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(v)]
    for s, e in zip(starts, ends):
        out[g[s]] = math.fsum(v[s:e])
    return out


def _rates(hits: np.ndarray, total: np.ndarray) -> np.ndarray:
    """hits / total, NaN where total is 0 (what :func:`_rate` gives, element by element)."""
    out = np.full(len(total), np.nan)
    nz = total > 0
    out[nz] = hits[nz].astype(np.float64) / total[nz].astype(np.float64)
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


_RESOLVE_KEYS = ("run_id", "annotator", "mode", "category", "agent", "source")


def _resolve_label_columns(labels: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """The columns :data:`_RESOLVE_KEYS` of a :data:`LABEL_COLUMNS` frame, every row checked
    (source; annotator, which a human label needs and gold and judge labels may lack; run_id;
    mode; category; agent), missing -> None; the error names the first bad row and field."""
    f = _Frame(labels, "labels", LABEL_COLUMNS)
    source, source_ok = f.choice("source", LABEL_SOURCES, optional=False)
    human = source_ok & (source == "human") if f.n else np.zeros(0, dtype=bool)
    annotator = _objects(f.df, "annotator")
    types = _types(annotator)
    missing = _missing_of(annotator, types)
    is_str = _is_str_of(annotator, np.zeros(f.n, dtype=bool)) & ~missing
    empty = np.zeros(f.n, dtype=bool)
    if is_str.any():
        empty[is_str] = annotator[is_str] == ""
    bad = np.where(human, ~is_str | empty, source_ok & ~missing & ~is_str)
    f.check(bad, lambda i, row: f._field("annotator", "must be a non-empty string" if row["source"] == "human"
                                         else "must be a string or missing", i, row))
    if missing.any():
        annotator = annotator.copy()
        annotator[missing] = None
    columns = (f.req_str("run_id")[0], annotator, f.req_str("mode")[0], f.opt_str("category")[0],
               f.opt_str("agent")[0], source)
    f.raise_first()
    return columns


def _equals(values: np.ndarray, value: str) -> np.ndarray:
    """The rows of a checked column (strings and None) equal to ``value``."""
    return np.asarray(values == value, dtype=bool) if len(values) else np.zeros(0, dtype=bool)


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

    columns = _resolve_label_columns(_bare(labels))  # every row checked, whichever the source
    label_runs, label_annotators, label_sources = columns[0], columns[1], columns[5]
    submitted: dict[str, set[str]] = defaultdict(set)
    subs = _Frame(submissions, "submissions", SUBMISSION_COLUMNS)
    pairs = list(zip(subs.req_str("run_id")[0], subs.req_str("annotator")[0]))
    subs.raise_first()
    for run_id, annotator in pairs:
        submitted[run_id].add(annotator)
    is_gold = _equals(label_sources, "gold")
    gold = _id_set(gold_runs, "gold_runs") | set(label_runs[is_gold].tolist())

    if run_ids is not None:
        universe = _id_set(run_ids, "run_ids")
    else:
        universe = set(gold) | set(submitted) | set(label_runs.tolist())

    # only the rows the chosen source can read become dicts (the loops below skip the others):
    # that annotator's, the gold ones, the human ones
    if annotator_name is not None:
        needed = _equals(label_annotators, annotator_name)
    else:
        is_human = _equals(label_sources, "human")
        needed = {"gold": is_gold, "majority": is_human}.get(source, is_gold | is_human)
    rows = [dict(zip(_RESOLVE_KEYS, values)) for values in zip(*(c[needed] for c in columns))]

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


def _label_frame(
    labels: pd.DataFrame, modes: Sequence[str] | None, mode_category: Mapping[str, str] | None
) -> tuple[pd.DataFrame, list[str], list[Any]]:
    """:func:`_label_columns` on a labels frame: the labels kept (``modes``), their effective
    category, and the mode / category columns."""
    if mode_category is not None and not isinstance(mode_category, Mapping):
        raise ReportInputError(
            f"mode_category must be a mapping of mode code -> category, got {mode_category!r}"
        )
    present = list(dict.fromkeys(labels["mode"]))
    if modes is not None:
        if isinstance(modes, str):
            raise ReportInputError(f"modes must be a list of mode codes, got the string {modes!r}")
        mode_list = list(dict.fromkeys(modes))
        bad = [m for m in mode_list if not isinstance(m, str) or not m]
        if bad:
            raise ReportInputError(f"modes: every mode code must be a non-empty string, got {bad!r}")
        keep = set(mode_list)
        labels = labels[labels["mode"].isin([m for m in present if m in keep])]
    elif mode_category is not None:
        mode_list = list(mode_category) + sorted(set(present) - set(mode_category))
    else:
        mode_list = sorted(set(present))

    category = labels["category"].to_numpy(dtype=object)
    if mode_category is not None and len(labels):
        category = np.array([mode_category[m] if m in mode_category else c
                             for m, c in zip(labels["mode"].to_numpy(dtype=object), category)] + [None],
                            dtype=object)[:-1]
    labels = pd.DataFrame({"run_id": labels["run_id"].to_numpy(dtype=object),
                           "mode": labels["mode"].to_numpy(dtype=object), "category": category,
                           "agent": labels["agent"].to_numpy(dtype=object)})
    cats: list[Any] = []
    if mode_category is not None:
        cats = list(dict.fromkeys(mode_category[m] for m in mode_list if m in mode_category))
    cats += sorted({c for c in category if c is not None} - set(cats))
    return labels, mode_list, cats


def _hits(units: np.ndarray, keys: list[Any], lab_units: np.ndarray, lab_keys: np.ndarray,
          unit_group: np.ndarray, unit_ok: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """For each of ``keys``: per group, the units (of ``unit_ok``) that have at least one
    (unit, key) pair among ``(lab_units, lab_keys)``; ``units`` is the number of units."""
    pos = {k: i for i, k in enumerate(keys)}
    code = np.array([pos.get(k, -1) if k is not None else -1 for k in lab_keys] + [0], dtype=np.int64)[:-1]
    sel = code >= 0
    out = [np.zeros(n_groups, dtype=np.int64) for _ in keys]
    if not sel.any():
        return out
    pairs = np.unique(lab_units[sel] * len(keys) + code[sel])
    u, k = pairs // len(keys), pairs % len(keys)
    ok = unit_ok[u]
    counts = np.bincount(unit_group[u[ok]] * len(keys) + k[ok], minlength=n_groups * len(keys))
    counts = counts.reshape(n_groups, len(keys))
    return [counts[:, i].astype(np.int64) for i in range(len(keys))]


def _principal_roles(a_p: np.ndarray, a_role: np.ndarray, n_principals: int) -> np.ndarray:
    """Per principal, the sorted, ``+``-joined set of its agents' roles (None without any):
    each distinct set of roles is joined once (as a bit mask of the sorted roles)."""
    out = np.full(n_principals, None, dtype=object)
    has = ~pd.isna(a_role)
    if not has.any():
        return out
    codes, uniques = pd.factorize(a_role[has])
    names = sorted(uniques.tolist())
    if len(names) > 62:  # too many for one int64 mask: one principal at a time
        roles: dict[int, set[str]] = defaultdict(set)
        for p, role in zip(a_p[has].tolist(), a_role[has]):
            roles[p].add(role)
        for p, rs in roles.items():
            out[p] = "+".join(sorted(rs)) or None
        return out
    rank = pd.Index(names, dtype=object).get_indexer(uniques)
    mask = np.zeros(n_principals, dtype=np.int64)
    np.bitwise_or.at(mask, a_p[has], np.left_shift(np.int64(1), rank[codes].astype(np.int64)))
    sets, inverse = np.unique(mask, return_inverse=True)
    joined = np.array([("+".join(n for i, n in enumerate(names) if m >> i & 1) or None) for m in sets.tolist()]
                      + [None], dtype=object)[:-1]
    return joined[inverse]


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
    R = _runs_columns(runs)
    run_index = pd.Index(R["run_id"].to_numpy(dtype=object), dtype=object)
    P, (m_row, name_codes, name_uniques, m_value), p_pairs = _principals_columns(principals, run_index)
    A, a_pairs = _agents_columns(agents, run_index, p_pairs)
    L, mode_list, cat_list = _label_frame(_report_labels_columns(labels, run_index, a_pairs), modes, mode_category)

    # runs: aggregate success, labelled
    score = R["aggregate_score"].to_numpy()
    with np.errstate(invalid="ignore"):
        r_agg = (R["status"].to_numpy(dtype=object) == "completed") & ~np.isnan(score) & (score >= threshold)
    if labelled_runs is None:
        r_lab = np.ones(len(R), dtype=bool)
    else:
        ids = _id_set(labelled_runs, "labelled_runs") | set(L["run_id"])
        r_lab = run_index.isin(list(ids)) if len(R) else np.zeros(0, dtype=bool)
    # principals: own outcome
    p_run = P["run"].to_numpy(dtype=np.int64)
    p_score = P["score"].to_numpy(dtype=np.float64)
    p_has_score = ~np.isnan(p_score)
    known_flag = P["known"].to_numpy(dtype=bool)
    with np.errstate(invalid="ignore"):
        p_known = known_flag | p_has_score
        p_ok = np.where(known_flag, P["flag"].to_numpy(dtype=bool), p_has_score & (p_score >= threshold))
    # agents
    a_p = A["p"].to_numpy(dtype=np.int64)
    a_run = A["run"].to_numpy(dtype=np.int64)
    # labels: run / agent positions
    l_run = _positions(run_index, L["run_id"].to_numpy(dtype=object))
    l_agent_col = L["agent"].to_numpy(dtype=object)
    l_agent_named = ~pd.isna(l_agent_col)
    l_agent = np.full(len(L), -1, dtype=np.int64)
    if l_agent_named.any():
        l_agent[l_agent_named] = a_pairs.find(l_run[l_agent_named], l_agent_col[l_agent_named])
    l_mode = L["mode"].to_numpy(dtype=object)
    l_cat = L["category"].to_numpy(dtype=object)

    # unit keys: agent-runs for agent groupings, principal-runs otherwise; agent-runs always
    # carry the keys of their grouping too (for responsible_n / responsible_rate)
    agent_grouping = by in _AGENT_UNIT_GROUPINGS
    key_cols = GROUPINGS[by]
    if agent_grouping:
        a_key = [A[c].to_numpy(dtype=object) for c in key_cols]
        u_key = a_key
    elif by == "principal":
        p_role = _principal_roles(a_p, A["role"].to_numpy(dtype=object), len(P))
        p_kind = P["kind"].to_numpy(dtype=object)
        u_key = [p_kind, p_role]
        a_key = [p_kind[a_p], p_role[a_p]]
    else:
        col = R[key_cols[0]].to_numpy(dtype=object)
        u_key = [col[p_run]]
        a_key = [col[a_run]]
    n_units = len(A) if agent_grouping else len(P)
    codes, n_codes = _codes(*[np.concatenate([u, a]) for u, a in zip(u_key, a_key)]) if n_units + len(A) else \
        (np.zeros(0, np.int64), 0)
    u_group, a_group = codes[:n_units], codes[n_units:]
    G = n_codes

    u_run = a_run if agent_grouping else p_run
    u_p = a_p if agent_grouping else np.arange(len(P))
    n = np.bincount(u_group, minlength=G)
    runs_n = np.bincount(np.unique(u_group * max(len(R), 1) + u_run) // max(len(R), 1), minlength=G) \
        if n_units else np.zeros(G, np.int64)
    agg_hits = np.bincount(u_group, weights=r_agg[u_run], minlength=G) if n_units else np.zeros(G)
    u_known = p_known[u_p]
    known_n = np.bincount(u_group, weights=u_known, minlength=G).astype(np.int64) if n_units else \
        np.zeros(G, np.int64)
    ok_hits = np.bincount(u_group, weights=u_known & p_ok[u_p], minlength=G) if n_units else np.zeros(G)
    u_has_score = p_has_score[u_p]
    score_n = np.bincount(u_group[u_has_score], minlength=G)
    score_sum = _group_fsum(u_group[u_has_score], p_score[u_p][u_has_score], G)
    agg_rate = _rates(agg_hits, n)
    p_rate = _rates(ok_hits, known_n)
    mean_score = _rates(score_sum, score_n)

    # metrics: per (unit, metric) of the unit's principal
    metric_names: list[str] = []
    metric_means: list[np.ndarray] = []
    if len(m_row) and n_units:
        name_uniques = np.asarray(name_uniques + [None], dtype=object)[:-1]
        m_vals = np.asarray(m_value, dtype=np.float64)
        # the entries of each unit's principal (m_row is ascending): a ragged range per unit
        starts = np.searchsorted(m_row, u_p, "left")
        counts = np.searchsorted(m_row, u_p, "right") - starts
        total = int(counts.sum())
        if total:
            idx = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)
            e_group = np.repeat(u_group, counts)
            e_name = name_codes[idx]
            metric_names = sorted(name_uniques[np.unique(e_name)].tolist())
            width = len(metric_names)
            pos = pd.Index(metric_names, dtype=object).get_indexer(name_uniques)
            gm = e_group * width + pos[e_name]
            sums = _group_fsum(gm, m_vals[idx], G * width)
            means = _rates(sums, np.bincount(gm, minlength=G * width)).reshape(G, width)
            metric_means = [means[:, i] for i in range(width)]

    # labels: labelled units, responsible agent-runs, categories and modes per unit
    u_lab = r_lab[u_run] if n_units else np.zeros(0, dtype=bool)
    labelled_n = np.bincount(u_group, weights=u_lab, minlength=G).astype(np.int64) if n_units else \
        np.zeros(G, np.int64)
    a_lab = r_lab[a_run] if len(A) else np.zeros(0, dtype=bool)
    a_has_mode = np.zeros(len(A), dtype=bool)
    a_has_mode[l_agent[l_agent >= 0]] = True
    resp_n = np.bincount(a_group, weights=a_lab, minlength=G).astype(np.int64) if len(A) else np.zeros(G, np.int64)
    resp_hits = np.bincount(a_group, weights=a_lab & a_has_mode, minlength=G) if len(A) else np.zeros(G)
    if agent_grouping:  # a label counts for the agent-run of its responsible agent
        named = l_agent >= 0
        lab_units, lab_modes, lab_cats = l_agent[named], l_mode[named], l_cat[named]
        unit_group, unit_ok = u_group, u_lab
    else:  # a label counts for every principal-run of its run: count per (group, run)
        lab_units, lab_modes, lab_cats = l_run, l_mode, l_cat
        gr, weights = np.unique(u_group * max(len(R), 1) + u_run, return_counts=True)
        unit_group, unit_ok = None, None
    if agent_grouping:
        cat_hits = _hits(n_units, cat_list, lab_units, lab_cats, unit_group, unit_ok, G)
        mode_hits = _hits(n_units, mode_list, lab_units, lab_modes, unit_group, unit_ok, G)
    else:
        cat_hits = _run_hits(cat_list, lab_units, lab_cats, gr, weights, r_lab, len(R), G)
        mode_hits = _run_hits(mode_list, lab_units, lab_modes, gr, weights, r_lab, len(R), G)

    # rows: groups present among the units, sorted by key (None last)
    groups_present, first = np.unique(u_group, return_index=True)
    keyed = sorted(((tuple(k[i] for k in u_key), g) for g, i in zip(groups_present.tolist(), first.tolist())),
                   key=lambda kg: _sort_key(kg[0]))
    order = np.array([g for _, g in keyed], dtype=np.int64)
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
    if not len(order):
        frame = pd.DataFrame([], columns=columns)
    else:
        data: dict[str, Any] = {c: [k[j] for k, _ in keyed] for j, c in enumerate(key_cols)}
        data.update({
            "runs": runs_n[order].astype(np.int64),
            "n": n[order].astype(np.int64),
            "aggregate_success_rate": agg_rate[order],
            "principal_success_rate": p_rate[order],
            "success_gap": agg_rate[order] - p_rate[order],
            "principal_known": known_n[order],
            "principal_unknown": (n[order] - known_n[order]).astype(np.int64),
            "mean_principal_score": mean_score[order],
        })
        for m, means in zip(metric_names, metric_means):
            data[f"metric:{m}"] = means[order]
        data["labelled_n"] = labelled_n[order]
        data["responsible_n"] = resp_n[order]
        data["responsible_rate"] = _rates(resp_hits[order], resp_n[order])
        for c, hits in zip(cat_list, cat_hits):
            data[f"cat:{c}"] = _rates(hits[order], labelled_n[order])
        for m, hits in zip(mode_list, mode_hits):
            data[f"mode:{m}"] = _rates(hits[order], labelled_n[order])
        frame = pd.DataFrame(data, columns=columns)
    frame.attrs.update(
        {
            "by": by,
            "unit": "agent-run" if agent_grouping else "principal-run",
            "threshold": threshold,
            "label_source": label_source,
        }
    )
    return frame


def _run_hits(keys: list[Any], lab_runs: np.ndarray, lab_keys: np.ndarray, group_runs: np.ndarray,
              weights: np.ndarray, r_lab: np.ndarray, n_runs: int, n_groups: int) -> list[np.ndarray]:
    """For each of ``keys``: per group, the principal-runs in labelled runs whose run has a label
    with that key.  ``group_runs`` are the distinct ``group * n_runs + run`` codes of the units
    and ``weights`` the number of units per such code."""
    pos = {k: i for i, k in enumerate(keys)}
    code = np.array([pos.get(k, -1) if k is not None else -1 for k in lab_keys] + [0], dtype=np.int64)[:-1]
    out = [np.zeros(n_groups, dtype=np.int64) for _ in keys]
    sel = code >= 0
    if not sel.any() or not len(group_runs):
        return out
    run_key = np.unique(lab_runs[sel] * len(keys) + code[sel])  # distinct (run, key)
    frame = pd.DataFrame({"run": group_runs % n_runs, "g": group_runs // n_runs, "w": weights}).merge(
        pd.DataFrame({"run": run_key // len(keys), "k": run_key % len(keys)}), on="run")
    frame = frame[r_lab[frame["run"].to_numpy()]]
    w = frame["w"].to_numpy()
    counts = np.bincount(frame["g"].to_numpy() * len(keys) + frame["k"].to_numpy(), weights=w,
                         minlength=n_groups * len(keys)).reshape(n_groups, len(keys))
    return [counts[:, i].astype(np.int64) for i in range(len(keys))]


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
