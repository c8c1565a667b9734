"""Exports: every table as CSV, Parquet or JSON Lines, streamed.

Rows are read in chunks (keyset pagination on the primary key, :data:`CHUNK_SIZE` rows a
query, selecting plain columns so no ORM object piles up) and written as they come:

* CSV and JSON Lines: one encoded chunk of lines per database chunk;
* Parquet: a ``pyarrow.parquet.ParquetWriter`` writes one row group per chunk into an in-memory
  sink that is emptied after every row group, so the bytes go out as soon as they exist and
  neither a temporary file nor the whole file is ever held.  The footer is written at the end.

Report tables (``outcomes_by_*``, ``blind_spots``, ``crossplay_*``) are computed in memory
(aggregates over the reports' frames) and written as one chunk.  Column types and meanings are
in :mod:`app.exports.schema`.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.core.checkpoint import checkpoint
from app.exports import arrow as _arrow
from app.exports.arrow import neutralise_formula
from app.exports.schema import FORMATS, TABLES, TableSpec, arrow_schema, table_spec
from app.runs.models import Agent, Audit, Check, Event, Principal, Run, Scenario
from app.taxonomies.models import Taxonomy

__all__ = [
    "CHUNK_SIZE",
    "MEDIA_TYPES",
    "ExportError",
    "ExportOptions",
    "default_tables",
    "export_stream",
    "export_to_dir",
    "file_name",
    "iter_chunks",
]

CHUNK_SIZE = 5000
#: events on the row-dict path (JSON Lines, blind or scoped exports) carry payloads (tool arguments,
#: artifact bodies) as Python objects: a smaller chunk keeps memory flat
ROW_EVENT_CHUNK_SIZE = 4000
#: rows a chunk on the columnar path (CSV and Parquet of the plain tables, `app.exports.arrow`): one
#: Arrow table, one Parquet row group. Arrow holds a row in about its stored size (a 16,384-row
#: chunk of the demo corpus's events is about 6 MB), and a bigger row group costs the Parquet writer
#: and the column kernels less per row: at 4,000 rows the writer took 1.45x the CPU of one
#: `write_table` of the whole table (bench/NOTES.md, "Events Parquet export")
COLUMNAR_CHUNK_SIZE = 16384
#: the events' chunk on the columnar path (the first Parquet row group is sent after this many rows)
EVENT_CHUNK_SIZE = COLUMNAR_CHUNK_SIZE
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet",
               "jsonl": "application/x-ndjson"}
_CANONICAL_RUNS_PER_CHUNK = 100


class ExportError(ValueError):
    """An export that cannot be made: unknown table or format, or a format the table lacks."""


@dataclass
class ExportOptions:
    """How to export: ``chunk_size`` rows per database read (None: :data:`CHUNK_SIZE`,
    :data:`ROW_EVENT_CHUNK_SIZE` for events, :data:`COLUMNAR_CHUNK_SIZE` on the columnar path);
    ``annotation_filter`` a SQL
    condition on ``Annotation`` (blind mode: ``visible_annotation_filter``; None = all);
    ``source``, ``taxonomy`` and ``threshold`` for the report tables."""

    chunk_size: int | None = None
    annotation_filter: Any = None
    source: str = "auto"
    taxonomy: str | None = None
    threshold: float = 0.5
    #: drop `metadata.demo_truth` (the demo corpus's seeded answers) from runs: for non-admins
    strip_demo_truth: bool = False
    #: leave the runs' `audits` (machine judges' labels) out of `runs_canonical`: blind annotators
    withhold_audits: bool = False
    #: what the viewer may see of runs (``app.annotations.blind.sight_of``): hidden metadata (labels,
    #: answers and judgements a reader kept in metadata) is left out of every table's `metadata`
    #: column and of `runs_canonical` when ``sight.labels`` is false. None: everything (CLI, admins).
    sight: Any = None
    #: a run-id subquery limiting every run-scoped table to some runs (``batch_filter``: the runs
    #: assigned in a batch). None: every run.
    run_filter: Any = None
    _declared: dict | None = None
    #: a study's run-id subquery (app.studies.service.study_run_ids): only those runs and what hangs
    #: off them (None: every run)
    run_scope: Any = None
    #: rows written per table, filled in while streaming
    counts: dict[str, int] = field(default_factory=dict)

    def blind(self) -> bool:
        """True when hidden metadata must be left out (a blind annotator's export)."""
        return self.sight is not None and not self.sight.labels

    def meta(self, value: Any, extra: Any = ()) -> Any:
        """A metadata object as the viewer may see it (unchanged without a blind `sight`)."""
        if not self.blind():
            return value
        from app.annotations.blind import visible_metadata

        return visible_metadata(value, self.sight, extra)

    def data(self, value: Any) -> Any:
        """An event's data as the viewer may see it (unchanged without a blind `sight`)."""
        if not self.blind():
            return value
        from app.annotations.blind import visible_event_data

        return visible_event_data(value, self.sight)

    def load_declared(self, session: Session) -> None:
        """Reads the runs' declared ``metadata.hidden_keys`` (only runs that have them) for :meth:`declared`."""
        if not self.blind() or self._declared is not None:
            return
        from sqlalchemy import Text, cast

        from app.annotations.blind import declared_hidden

        self._declared = {pk: declared_hidden(extra) for pk, extra in session.execute(
            select(Run.id, Run.extra).where(cast(Run.extra, Text).like('%"hidden_keys"%')))}

    def declared(self, run_pk: int, level: str) -> list[str]:
        """The paths run `run_pk` declares hidden at `level` (after :meth:`load_declared`)."""
        if not self._declared:
            return []
        return self._declared.get(run_pk, {}).get(level, [])

    def rows_per_chunk(self, table: str, columnar: bool = False) -> int:
        """Returns the chunk size for ``table`` on the row-dict path (``columnar``: on the Arrow path)."""
        if self.chunk_size is not None:
            return self.chunk_size
        if columnar:
            return COLUMNAR_CHUNK_SIZE
        return ROW_EVENT_CHUNK_SIZE if table == "events" else CHUNK_SIZE


def file_name(table: str, fmt: str) -> str:
    """Returns ``<table>.<fmt>``."""
    return f"{table}.{fmt}"


def check(table: str, fmt: str) -> TableSpec:
    """Returns the spec of ``table``; raises :class:`ExportError` for an unknown table or format,
    or a format the table is not available in."""
    if fmt not in FORMATS:
        raise ExportError(f"format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    try:
        spec = table_spec(table)
    except KeyError as exc:
        raise ExportError(f"table: {exc.args[0]}") from None
    if fmt not in spec.formats:
        raise ExportError(f"table {table}: available as {', '.join(spec.formats)} only, not {fmt}")
    return spec


def default_tables(fmt: str) -> list[str]:
    """Returns every table available in ``fmt``, in schema order."""
    return [name for name, spec in TABLES.items() if fmt in spec.formats]


# --------------------------------------------------------------------------------------------
# reading


def _keyset(session: Session, stmt, id_col, chunk_size: int) -> Iterator[list]:
    """Yields the rows of ``stmt`` (whose first column is ``id_col``) in chunks, by id."""
    last = None
    while True:
        q = stmt if last is None else stmt.where(id_col > last)
        rows = session.execute(q.order_by(id_col).limit(chunk_size)).all()
        if not rows:
            return
        last, full = rows[-1][0], len(rows) == chunk_size
        yield rows
        del rows  # not alive while the next chunk is fetched
        if not full:
            return


def _scoped(stmt, opts: ExportOptions, run_pk_col):
    """``stmt`` restricted to the runs of ``opts.run_scope`` (a study) and of ``opts.run_filter``
    (a batch), both run-id subqueries (unchanged without them)."""
    for runs in (opts.run_scope, opts.run_filter):
        if runs is not None:
            stmt = stmt.where(run_pk_col.in_(runs))
    return stmt


def _mapped(session: Session, stmt, id_col, chunk_size: int, convert: Callable[[Any], dict]) -> Iterator[list[dict]]:
    """Yields the rows of ``stmt`` in chunks (see :func:`_keyset`), each row turned into a dict by
    ``convert``; a chunk's database rows are dropped before it is handed on."""
    for rows in _keyset(session, stmt, id_col, chunk_size):
        out = [convert(r) for r in rows]
        del rows
        yield out
        del out


def batch_filter(batch: str) -> Any:
    """A ``run_filter`` for ExportOptions: the run-id subquery of the runs with an assignment in `batch`."""
    from app.annotations.models import Assignment

    return select(Assignment.run_pk).where(Assignment.batch == batch)


def _runs(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    stmt = select(Run.id, Run.run_id, Run.scenario_id, Scenario.family, Scenario.alignment, Scenario.title,
                  Run.scenario_override, Run.status, Run.aggregate_score, Run.started_at, Run.ended_at,
                  Run.n_events, Run.source, Run.content_hash, Run.imported_at, Run.extra
                  ).join(Scenario, Scenario.id == Run.scenario_id)

    def convert(r) -> dict:
        (_, run_id, sc_id, family, alignment, title, override, status, agg, started, ended, n_events, source,
         digest, imported_at, extra) = r
        if override:  # the run's own scenario object differs from the stored one
            family = override.get("family", family)
            alignment = override.get("alignment", alignment)
            title = override.get("title", title)
        metadata = dict(extra or {})
        if opts.strip_demo_truth:
            metadata.pop("demo_truth", None)
        if opts.blind():
            from app.annotations.blind import declared_hidden

            metadata = opts.meta(metadata, declared_hidden(metadata)["run"])
        return {"run_id": run_id, "scenario_id": sc_id, "family": family, "alignment": alignment, "title": title,
                "status": status, "aggregate_score": agg, "started_at": started, "ended_at": ended,
                "n_events": n_events, "source": source, "content_hash": digest, "imported_at": imported_at,
                "metadata": metadata}

    return _mapped(session, _scoped(stmt, opts, Run.id), Run.id, opts.rows_per_chunk("runs"), convert)


def _scenarios(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    # scenario ids are text: keyset on the id itself
    stmt = select(Scenario.id, Scenario.family, Scenario.alignment, Scenario.title, Scenario.description,
                  Scenario.extra)
    if opts.run_scope is not None:
        stmt = stmt.where(Scenario.id.in_(select(Run.scenario_id).where(Run.id.in_(opts.run_scope))))
    return _mapped(session, stmt, Scenario.id, opts.rows_per_chunk("scenarios"), lambda r: {
        "scenario_id": r[0], "family": r[1], "alignment": r[2], "title": r[3], "description": r[4],
        "metadata": opts.meta(r[5] or {})})


def _principals(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    stmt = select(Principal.id, Run.run_id, Principal.principal_id, Principal.position, Principal.name,
                  Principal.kind, Principal.objective, Principal.constraints, Principal.success, Principal.score,
                  Principal.metrics, Principal.extra, Run.id).join(Run, Run.id == Principal.run_pk)
    opts.load_declared(session)
    stmt = _scoped(stmt, opts, Principal.run_pk)
    return _mapped(session, stmt, Principal.id, opts.rows_per_chunk("principals"), lambda r: {
        "run_id": r[1], "principal_id": r[2], "position": r[3], "name": r[4], "kind": r[5], "objective": r[6],
        "constraints": list(r[7] or []), "success": r[8], "score": r[9], "metrics": r[10] or {},
        "metadata": opts.meta(r[11] or {}, opts.declared(r[-1], "principals"))})


def _agents(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    stmt = select(Agent.id, Run.run_id, Agent.agent_id, Agent.position, Agent.principal_id, Agent.role,
                  Agent.model, Agent.harness, Agent.private_state, Agent.extra, Run.id).join(Run, Run.id == Agent.run_pk)
    opts.load_declared(session)
    stmt = _scoped(stmt, opts, Agent.run_pk)
    return _mapped(session, stmt, Agent.id, opts.rows_per_chunk("agents"), lambda r: {
        "run_id": r[1], "agent_id": r[2], "position": r[3], "principal_id": r[4], "role": r[5], "model": r[6],
        "harness": r[7], "private_state": r[8] or {}, "metadata": opts.meta(r[9] or {}, opts.declared(r[-1], "agents"))})


def _events(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    stmt = select(Event.id, Run.run_id, Event.seq, Event.ts, Event.kind, Event.actor, Event.recipients,
                  Event.visibility, Event.content, Event.data, Event.parent_seq, Event.hop, Event.extra, Run.id
                  ).join(Run, Run.id == Event.run_pk)
    opts.load_declared(session)
    stmt = _scoped(stmt, opts, Event.run_pk)
    return _mapped(session, stmt, Event.id, opts.rows_per_chunk("events"), lambda r: {
        "run_id": r[1], "seq": r[2], "ts": r[3], "kind": r[4], "actor": r[5], "recipients": list(r[6] or []),
        "visibility": r[7], "content": r[8], "data": opts.data(r[9]), "parent_seq": r[10], "hop": r[11],
        "metadata": opts.meta(r[12] or {}, opts.declared(r[-1], "events"))})


def _audits(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    stmt = select(Audit.id, Run.run_id, Audit.position, Audit.source, Audit.level, Audit.mode, Audit.agent,
                  Audit.evidence, Audit.note, Audit.extra).join(Run, Run.id == Audit.run_pk)
    stmt = _scoped(stmt, opts, Audit.run_pk)
    return _mapped(session, stmt, Audit.id, opts.rows_per_chunk("audits"), lambda r: {
        "run_id": r[1], "position": r[2], "source": r[3], "level": r[4], "mode": r[5], "agent": r[6],
        "evidence": list(r[7] or []), "note": r[8], "metadata": r[9] or {}})


def _checks(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    stmt = select(Check.id, Run.run_id, Check.position, Check.source, Check.level, Check.check_id, Check.passed,
                  Check.agent, Check.evidence, Check.detail, Check.extra).join(Run, Run.id == Check.run_pk)
    stmt = _scoped(stmt, opts, Check.run_pk)
    return _mapped(session, stmt, Check.id, opts.rows_per_chunk("checks"), lambda r: {
        "run_id": r[1], "position": r[2], "source": r[3], "level": r[4], "check_id": r[5], "passed": r[6],
        "agent": r[7], "evidence": list(r[8] or []), "detail": r[9], "metadata": r[10] or {}})


def _categories(session: Session) -> dict[int, dict[str, str]]:
    return {t.id: {m["code"]: m["category"] for m in t.definition.get("modes", [])}
            for t in session.execute(select(Taxonomy)).scalars()}


def _annotation_rows(session: Session, opts: ExportOptions) -> Iterator[list[tuple[tuple, list[tuple]]]]:
    """Yields chunks of (annotation row, its label rows)."""
    stmt = (select(Annotation.id, User.username, User.kind, Run.run_id, Taxonomy.key, Taxonomy.version,
                   Annotation.status, Annotation.origin, Annotation.no_failure, Annotation.note, Annotation.time_ms,
                   Annotation.submitted_at, Annotation.taxonomy_pk)
            .join(User, User.id == Annotation.user_id).join(Run, Run.id == Annotation.run_pk)
            .join(Taxonomy, Taxonomy.id == Annotation.taxonomy_pk))
    if opts.annotation_filter is not None:
        stmt = stmt.where(opts.annotation_filter)
    stmt = _scoped(stmt, opts, Annotation.run_pk)
    for rows in _keyset(session, stmt, Annotation.id, opts.rows_per_chunk("annotations")):
        ids = [r[0] for r in rows]
        labels: dict[int, list[tuple]] = {i: [] for i in ids}
        for lab in session.execute(
            select(Label.annotation_id, Label.mode, Label.agent, Label.principals, Label.evidence, Label.note,
                   Label.confidence, Label.time_ms).where(Label.annotation_id.in_(ids))
            .order_by(Label.annotation_id, Label.id)
        ):
            labels[lab[0]].append(lab)
        yield [(r, labels[r[0]]) for r in rows]


def _annotations(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    cats = _categories(session)
    for chunk in _annotation_rows(session, opts):
        out = []
        for (ann_id, user, kind, run_id, key, version, status, origin, no_failure, note, time_ms, submitted_at,
             tax_pk), labels in chunk:
            base = {"annotation_id": ann_id, "annotator": user, "annotator_kind": kind, "run_id": run_id,
                    "taxonomy": f"{key}@{version}", "taxonomy_key": key, "taxonomy_version": version,
                    "status": status, "origin": origin, "no_failure": no_failure}
            tail = {"time_ms": time_ms, "annotation_note": note, "submitted_at": submitted_at}
            if not labels:
                out.append({**base, "mode": None, "category": None, "agent": None, "principals": [],
                            "evidence": [], "note": note, "confidence": None, "label_time_ms": None, **tail})
            for _, mode, agent, principals, evidence, lnote, confidence, ltime in labels:
                out.append({**base, "mode": mode, "category": cats.get(tax_pk, {}).get(mode), "agent": agent or None,
                            "principals": list(principals or []), "evidence": list(evidence or []),
                            "note": lnote, "confidence": confidence, "label_time_ms": ltime, **tail})
        yield out


def _annotations_canonical(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    for chunk in _annotation_rows(session, opts):
        out = []
        for (_, user, _, run_id, key, version, status, origin, _, note, *_), labels in chunk:
            if status != "submitted" or origin == "audit":
                continue
            tax = f"{key}@{version}"
            if not labels:
                out.append({"annotator": user, "run_id": run_id, "taxonomy": tax, "mode": "none", "agent": None,
                            "evidence": [], "principals": [], "note": note, "confidence": None})
            for _, mode, agent, principals, evidence, lnote, confidence, _ in labels:
                out.append({"annotator": user, "run_id": run_id, "taxonomy": tax, "mode": mode,
                            "agent": agent or None, "evidence": list(evidence or []),
                            "principals": list(principals or []), "note": lnote, "confidence": confidence})
        if out:
            yield out


def _gold_labels(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    cats = _categories(session)
    names = dict(session.execute(select(User.id, User.username)).all())
    stmt = (select(GoldRun.id, Run.run_id, Taxonomy.key, Taxonomy.version, GoldRun.status, GoldRun.no_failure,
                   GoldRun.reviewer_id, GoldRun.rationale, GoldRun.taxonomy_pk)
            .join(Run, Run.id == GoldRun.run_pk).join(Taxonomy, Taxonomy.id == GoldRun.taxonomy_pk))
    stmt = _scoped(stmt, opts, GoldRun.run_pk)
    for rows in _keyset(session, stmt, GoldRun.id, opts.rows_per_chunk("gold_labels")):
        ids = [r[0] for r in rows]
        labels: dict[int, list[tuple]] = {i: [] for i in ids}
        for lab in session.execute(
            select(GoldLabel.gold_run_id, GoldLabel.mode, GoldLabel.agent, GoldLabel.principals, GoldLabel.evidence,
                   GoldLabel.origin, GoldLabel.accepted, GoldLabel.rationale, GoldLabel.created_by,
                   GoldLabel.created_at).where(GoldLabel.gold_run_id.in_(ids)).order_by(GoldLabel.gold_run_id, GoldLabel.id)
        ):
            labels[lab[0]].append(lab)
        out = []
        for gid, run_id, key, version, status, no_failure, reviewer, run_rationale, tax_pk in rows:
            base = {"run_id": run_id, "taxonomy": f"{key}@{version}", "taxonomy_key": key,
                    "taxonomy_version": version, "gold_status": status, "no_failure": no_failure,
                    "reviewer": names.get(reviewer), "run_rationale": run_rationale}
            if not labels[gid]:
                out.append({**base, "mode": None, "category": None, "agent": None, "principals": [], "evidence": [],
                            "origin": None, "accepted": None, "rationale": None, "created_by": None,
                            "created_at": None})
            for _, mode, agent, principals, evidence, origin, accepted, rationale, created_by, created_at in labels[gid]:
                out.append({**base, "mode": mode, "category": cats.get(tax_pk, {}).get(mode), "agent": agent or None,
                            "principals": list(principals or []), "evidence": list(evidence or []),
                            "origin": origin, "accepted": accepted, "rationale": rationale,
                            "created_by": names.get(created_by), "created_at": created_at})
        yield out


def _runs_canonical(session: Session, opts: ExportOptions) -> Iterator[list[dict]]:
    from app.runs.service import to_canonical

    for rows in _keyset(session, _scoped(select(Run.id), opts, Run.id), Run.id, _CANONICAL_RUNS_PER_CHUNK):
        out = [to_canonical(session, session.get(Run, pk)) for (pk,) in rows]
        session.expunge_all()
        for run in out:
            if opts.strip_demo_truth:
                run["metadata"].pop("demo_truth", None)
            if opts.withhold_audits:
                run["audits"] = []
                run.pop("checks", None)
        if opts.sight is not None:
            from app.annotations.blind import visible_run

            out = [visible_run(run, opts.sight) for run in out]
        yield out


def _report(table: str, session: Session, opts: ExportOptions) -> tuple[list[str], list[dict]]:
    from app.reports import service as reports
    from app.reports.outcomes import to_records

    data = reports.load_report_data(session, threshold=opts.threshold, taxonomy=opts.taxonomy,
                                    with_labels=not table.startswith("crossplay_"), scope=opts.run_scope)
    if table.startswith("outcomes_by_"):
        frame = reports.outcome_frame(data, table.removeprefix("outcomes_by_"), opts.source)
    elif table == "blind_spots":
        frame = reports.blind_spot_frames(data, opts.source)[0]
    else:
        frame = reports.crossplay_frame(data, table.removeprefix("crossplay_"))
    return [str(c) for c in frame.columns], to_records(frame)


_READERS: dict[str, Callable[[Session, ExportOptions], Iterator[list[dict]]]] = {
    "runs": _runs,
    "scenarios": _scenarios,
    "principals": _principals,
    "agents": _agents,
    "events": _events,
    "audits": _audits,
    "checks": _checks,
    "annotations": _annotations,
    "annotations_canonical": _annotations_canonical,
    "gold_labels": _gold_labels,
    "runs_canonical": _runs_canonical,
}


def iter_chunks(session: Session, table: str, opts: ExportOptions | None = None) -> tuple[list[str], Iterator[list[dict]]]:
    """Returns ``(columns, chunks)`` for ``table``: the column names and an iterator of lists of
    row dicts (values as Python objects: lists, dicts, datetimes).  Report tables give one chunk."""
    opts = opts or ExportOptions()
    spec = table_spec(table)
    if spec.report:
        columns, rows = _report(table, session, opts)
        return columns, iter([rows])
    return spec.fixed_names, _READERS[table](session, opts)


# --------------------------------------------------------------------------------------------
# writing


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)


def _csv_cell(value: Any, type_: str) -> str:
    if value is None:
        return ""
    if type_ == "string":
        return neutralise_formula(str(value))
    if type_ in ("json", "list<string>", "list<int64>"):
        return _json_text(value)
    if type_ == "bool":
        return "true" if value else "false"
    if type_ == "timestamp":
        return _iso(value) if isinstance(value, datetime) else str(value)
    if type_ == "float64":
        f = float(value)
        return "" if math.isnan(f) else repr(f)
    return str(value)


def _jsonl_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _parquet_value(value: Any, type_: str) -> Any:
    if value is None:
        return None
    if type_ == "json":
        return _json_text(value)
    if type_ == "timestamp" and isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if type_ == "float64":
        return float(value)
    return value


_QUOTE_CHARS = frozenset(',"\n\r')


def _csv_field(text: str) -> str:
    if _QUOTE_CHARS.isdisjoint(text):
        return text
    return '"' + text.replace('"', '""') + '"'


def csv_line(cells: list[str]) -> str:
    """One CSV line: Python ``csv`` QUOTE_MINIMAL with ``\\n`` line ends, except that a cell
    holding a carriage return is quoted too (``csv.writer`` leaves it bare, and readers then
    split the row there)."""
    if len(cells) == 1 and cells[0] == "":
        return '""\n'
    return ",".join(map(_csv_field, cells)) + "\n"


def _csv_stream(spec: TableSpec, columns: list[str], chunks: Iterable[list[dict]], count: Callable[[int], None]
                ) -> Iterator[bytes]:
    types = [spec.column(c).type for c in columns]
    yield csv_line(columns).encode("utf-8")
    for rows in chunks:
        data = "".join([csv_line([_csv_cell(row.get(c), t) for c, t in zip(columns, types)]) for row in rows])
        count(len(rows))
        del rows
        yield data.encode("utf-8")
        del data


#: JSON Lines are written out in parts of about this size
_JSONL_PART_BYTES = 1 << 20


def _jsonl_stream(spec: TableSpec, columns: list[str], chunks: Iterable[list[dict]], count: Callable[[int], None]
                  ) -> Iterator[bytes]:
    whole = spec.name == "runs_canonical"
    for rows in chunks:
        count(len(rows))
        parts: list[bytes] = []
        size = 0
        # one line at a time (a run may hold strings up to MAX_STRING_BYTES each): at most about
        # 1 MiB of lines, or one long line, is held at once, never the whole chunk's text
        for row in rows:
            line = (json.dumps(row if whole else {c: _jsonl_value(row.get(c)) for c in columns}, ensure_ascii=False,
                               allow_nan=False, default=str) + "\n").encode("utf-8")
            if parts and size + len(line) > _JSONL_PART_BYTES:
                yield b"".join(parts)
                parts, size = [], 0
            parts.append(line)
            size += len(line)
        del rows
        if parts:
            yield b"".join(parts)


class _DrainSink:
    """A write-only file for ParquetWriter whose bytes are taken out after every row group."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._pos = 0
        self.closed = False

    def write(self, data) -> int:
        b = bytes(data)
        self._parts.append(b)
        self._pos += len(b)
        return len(b)

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def drain(self) -> bytes:
        out = b"".join(self._parts)
        self._parts = []
        return out


def _parquet_stream(spec: TableSpec, columns: list[str], chunks: Iterable[list[dict]], count: Callable[[int], None]
                    ) -> Iterator[bytes]:
    schema = arrow_schema(spec, columns)
    types = [spec.column(c).type for c in columns]
    sink = _DrainSink()
    writer = pq.ParquetWriter(sink, schema, compression="zstd")
    try:
        for rows in chunks:
            if not rows:
                continue
            arrays = [pa.array([_parquet_value(r.get(c), t) for r in rows], type=schema.field(c).type)
                      for c, t in zip(columns, types)]
            count(len(rows))
            del rows
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            del arrays
            data = sink.drain()
            if data:
                yield data
    finally:
        writer.close()
    yield sink.drain()


def _arrow_stream(session: Session, spec: TableSpec, fmt: str, opts: ExportOptions, count: Callable[[int], None]
                  ) -> Iterator[bytes]:
    """CSV or Parquet of a plain table, column-wise (see :mod:`app.exports.arrow`)."""
    chunks = _arrow.arrow_chunks(session, spec, opts.rows_per_chunk(spec.name, columnar=True))
    if fmt == "csv":
        yield from _arrow.csv_blocks(spec, chunks, count)
        return
    schema = arrow_schema(spec)
    sink = _DrainSink()
    writer = pq.ParquetWriter(sink, schema, compression="zstd")
    try:
        for table in chunks:
            if not table.num_rows:
                continue
            count(table.num_rows)
            writer.write_table(_arrow.parquet_table(spec, table, schema))
            del table
            data = sink.drain()
            if data:
                yield data
    finally:
        writer.close()
    yield sink.drain()


_WRITERS = {"csv": _csv_stream, "jsonl": _jsonl_stream, "parquet": _parquet_stream}


def export_stream(engine: Engine, table: str, fmt: str, opts: ExportOptions | None = None) -> Iterator[bytes]:
    """Returns an iterator of the bytes of ``table`` in ``fmt``; it opens its own session when
    iteration starts (so it can outlive a request's session).  Raises :class:`ExportError` at
    once for an unknown table/format.  ``opts.counts[table]`` holds the rows written so far."""
    spec = check(table, fmt)
    opts = opts or ExportOptions()
    opts.counts[table] = 0

    def count(n: int) -> None:
        opts.counts[table] += n

    def generate() -> Iterator[bytes]:
        with Session(engine) as session:
            # a blind annotator's export leaves hidden metadata out: the row path decodes it
            if (fmt in ("csv", "parquet") and table in _arrow.FAST_TABLES and not opts.blind()
                    and opts.run_scope is None and opts.run_filter is None):
                yield from _arrow_stream(session, spec, fmt, opts, count)
                return
            columns, chunks = iter_chunks(session, table, opts)
            yield from _WRITERS[fmt](spec, columns, chunks, count)

    return generate()


def export_to_dir(engine: Engine, out_dir: str | Path, fmt: str, tables: Iterable[str] | None = None,
                  opts: ExportOptions | None = None) -> list[tuple[str, Path, int]]:
    """Writes one file per table (``<table>.<fmt>``) into ``out_dir`` (created if needed);
    returns ``[(table, path, rows)]``.  Default tables: every table available in ``fmt``."""
    opts = opts or ExportOptions()
    names = list(tables) if tables else default_tables(fmt)
    for name in names:
        check(name, fmt)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        path = out / file_name(name, fmt)
        tmp = path.with_name(path.name + ".part")
        with open(tmp, "wb") as fh:
            for chunk in export_stream(engine, name, fmt, opts):
                fh.write(chunk)
                checkpoint(0)  # in a job: a cancel or a spent budget stops the export here
        tmp.replace(path)
        written.append((name, path, opts.counts[name]))
    return written
