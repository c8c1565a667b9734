"""The export tables: every column with its type and meaning, in one place.

The writers (:mod:`app.exports.service`) build their Parquet schemas from these definitions and
``docs/export-schema.md`` is generated from them (``python -m app.exports.schema --write
docs/export-schema.md``; a test checks that the file is up to date).

How each type is written in CSV, Parquet and JSON Lines is described in the generated
document (:func:`render_markdown`).  Free-form objects (``metadata``, ``metrics``,
``private_state``, event ``data``) are JSON text in CSV *and* Parquet: their keys differ from row
to row, so no single struct schema fits them; lists of ids and seqs are native Parquet lists.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

__all__ = [
    "ARROW_TYPES",
    "FORMATS",
    "REPORT_TABLES",
    "TABLES",
    "Column",
    "TableSpec",
    "arrow_schema",
    "render_markdown",
    "table_spec",
]

FORMATS: tuple[str, ...] = ("csv", "parquet", "jsonl")

#: export type -> Parquet (Arrow) type
ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "list<string>": pa.list_(pa.string()),
    "list<int64>": pa.list_(pa.int64()),
    "json": pa.string(),
}


@dataclass(frozen=True)
class Column:
    """One column: ``name`` (a pattern such as ``mode:<code>`` for report columns that depend on
    the data), ``type`` (a key of :data:`ARROW_TYPES`) and its meaning."""

    name: str
    type: str
    description: str

    def __post_init__(self) -> None:
        if self.type not in ARROW_TYPES:
            raise ValueError(f"column {self.name!r}: unknown type {self.type!r}")

    @property
    def prefix(self) -> str | None:
        """Returns ``"mode:"`` for the pattern ``mode:<code>``; None for a fixed column."""
        return self.name.split("<", 1)[0] if "<" in self.name else None


@dataclass(frozen=True)
class TableSpec:
    """One export table: its columns, the formats it can be written in, and whether it holds
    labels (so blind mode applies)."""

    name: str
    description: str
    columns: tuple[Column, ...]
    formats: tuple[str, ...] = FORMATS
    labels: bool = False
    report: bool = False
    notes: str = ""

    def column(self, name: str) -> Column:
        """Returns the column definition of ``name`` (a fixed column or a pattern it matches);
        raises KeyError naming the table when there is none."""
        for c in self.columns:
            if c.name == name or (c.prefix is not None and name.startswith(c.prefix)):
                return c
        raise KeyError(f"table {self.name}: no column {name!r} in its schema")

    @property
    def fixed_names(self) -> list[str]:
        """Returns the names of the columns that are not patterns, in order."""
        return [c.name for c in self.columns if c.prefix is None]


def _c(name: str, type_: str, description: str) -> Column:
    return Column(name, type_, description)


RUN_ID = _c("run_id", "string", "The run's id (`run_id` of the canonical record).")
METADATA = _c("metadata", "json", "Fields of the source record that have no column of their own, kept verbatim.")


def _taxonomy_columns(what: str) -> tuple[Column, ...]:
    return (
        _c("taxonomy", "string", f"Taxonomy version of the {what} as `key@version` (e.g. `a2-failures@1`)."),
        _c("taxonomy_key", "string", "Taxonomy key (e.g. `a2-failures`)."),
        _c("taxonomy_version", "int64", "Taxonomy version number."),
    )


_BASE_TABLES: tuple[TableSpec, ...] = (
    TableSpec("runs", "One row per run.", (
        RUN_ID,
        _c("scenario_id", "string", "Scenario id."),
        _c("family", "string", "Scenario family (legal, crm, commerce, ...); the run's own scenario if it differs from the stored one."),
        _c("alignment", "string", "cooperative, mixed or competitive; null when not given."),
        _c("title", "string", "Scenario title."),
        _c("status", "string", "completed, failed, timeout or error."),
        _c("aggregate_score", "float64", "The task-level outcome score the benchmark reported; null when not given."),
        _c("started_at", "string", "Start time as recorded (ISO 8601 text, kept as imported)."),
        _c("ended_at", "string", "End time as recorded (ISO 8601 text, kept as imported)."),
        _c("n_events", "int64", "Number of events."),
        _c("source", "string", "Where the run was imported from (file and line, upload, demo)."),
        _c("content_hash", "string", "SHA-256 of the canonical record (re-importing identical content changes nothing)."),
        _c("imported_at", "timestamp", "When the run was stored."),
        METADATA,
    )),
    TableSpec("scenarios", "One row per scenario (the stored version; a run whose own scenario differs keeps it in the run).", (
        _c("scenario_id", "string", "Scenario id, e.g. `commerce/car-dealer/017`."),
        _c("family", "string", "Scenario family."),
        _c("alignment", "string", "cooperative, mixed or competitive; null when not given."),
        _c("title", "string", "Title."),
        _c("description", "string", "Free text shown to annotators."),
        METADATA,
    )),
    TableSpec("principals", "One row per principal of a run (the party an agent acts for).", (
        RUN_ID,
        _c("principal_id", "string", "Principal id within the run."),
        _c("position", "int64", "Order of the principal in the run record (0-based)."),
        _c("name", "string", "Display name."),
        _c("kind", "string", "person or organization; null when not given."),
        _c("objective", "string", "What the principal wanted."),
        _c("constraints", "list<string>", "The principal's constraints."),
        _c("success", "bool", "The principal's own outcome flag; null when not given."),
        _c("score", "float64", "The principal's own outcome score; null when not given."),
        _c("metrics", "json", "Outcome metrics (object)."),
        METADATA,
    )),
    TableSpec("agents", "One row per agent of a run.", (
        RUN_ID,
        _c("agent_id", "string", "Agent id within the run."),
        _c("position", "int64", "Order of the agent in the run record (0-based)."),
        _c("principal_id", "string", "The principal the agent acts for; null when none."),
        _c("role", "string", "Role (buyer, seller, counsel, ...)."),
        _c("model", "string", "Model behind the agent."),
        _c("harness", "string", "Agent harness / framework."),
        _c("private_state", "json", "State visible to this agent only (object)."),
        METADATA,
    )),
    TableSpec("events", "One row per event of a run (a run's events together, in `seq` order).", (
        RUN_ID,
        _c("seq", "int64", "Position of the event in the run (dense, from 0)."),
        _c("ts", "string", "Timestamp as recorded (ISO 8601 text); null when not given."),
        _c("kind", "string", "message, tool_call, tool_result, state_update, artifact, discovery, delegation or log."),
        _c("actor", "string", "An agent id, a principal id, or `system`."),
        _c("recipients", "list<string>", "Who received it; empty for private events."),
        _c("visibility", "string", "shared (crossed the boundary) or private (inside one agent's environment)."),
        _c("content", "string", "Text content."),
        _c("data", "json", "Structured payload: tool arguments/results, artifact body, A2A parts (any JSON value)."),
        _c("parent_seq", "int64", "The event this one answers or follows from; null when none."),
        _c("hop", "int64", "Hop count across agents; null when not given."),
        METADATA,
    )),
    TableSpec("audits", "One row per machine judgment shipped with a run (deterministic checks, LLM judges).", (
        RUN_ID,
        _c("position", "int64", "Order of the audit in the run record (0-based)."),
        _c("source", "string", "The checker or judge (becomes the annotator `judge:<source>`)."),
        _c("level", "string", "Audit level (L0, L1, L2, ...)."),
        _c("mode", "string", "Failure mode code it reported; null for an attribution (agent and evidence, no mode)."),
        _c("agent", "string", "Responsible agent it named."),
        _c("evidence", "list<int64>", "Event seqs it cited."),
        _c("note", "string", "Its note."),
        METADATA,
    ), labels=True, notes="Machine judges' labels: an annotator gets 403 under blind mode (as the runs API withholds "
                          "audits from them)."),
    TableSpec("checks", "One row per deterministic pass/fail check (L0/L1) shipped with a run; checks name no "
                        "failure mode.", (
        RUN_ID,
        _c("position", "int64", "Order of the check in the run record (0-based)."),
        _c("source", "string", "The checker (file or tool that produced it)."),
        _c("level", "string", "Check level (L0, L1, ...)."),
        _c("check_id", "string", "The check's id, e.g. `protocol.messages_well_formed`."),
        _c("passed", "bool", "True when the check passed, false when it failed; null when not given."),
        _c("agent", "string", "Responsible agent it named; null when none."),
        _c("evidence", "list<int64>", "Event seqs it cited."),
        _c("detail", "string", "Its detail text."),
        METADATA,
    ), labels=True, notes="Machine judgments of the run: an annotator gets 403 under blind mode, like `audits`."),
    TableSpec(
        "annotations",
        "One row per label, plus one row (with `mode` null) for each annotation without labels "
        "(\"no failure found\", or an empty draft). Humans and judges; drafts included.",
        (
            _c("annotation_id", "int64", "Internal id of the annotation (groups the rows of one annotator x run x taxonomy version)."),
            _c("annotator", "string", "User name (`judge:<source>` for automated judges)."),
            _c("annotator_kind", "string", "human or judge."),
            RUN_ID,
            *_taxonomy_columns("annotation"),
            _c("status", "string", "draft or submitted."),
            _c("origin", "string", "human (made in the app), import (import-labels) or audit (from the run's audits)."),
            _c("no_failure", "bool", "The annotator marked the run \"no failure found\"."),
            _c("mode", "string", "Failure mode code; null on the row of an annotation without labels (then "
                                 "`label_time_ms` is null too) and on an attribution-only label (who and when, no "
                                 "mode: `agent` and `evidence` set)."),
            _c("category", "string", "Category of the mode in its taxonomy (DD, GR, VF, CF, ...)."),
            _c("agent", "string", "Responsible agent id; null when not named."),
            _c("principals", "list<string>", "Affected principal ids."),
            _c("evidence", "list<int64>", "Event seqs that show the failure."),
            _c("note", "string", "The label's note; on a row without a label, the annotation's note."),
            _c("confidence", "float64", "The annotator's confidence in the label, 0 to 1; null when not given."),
            _c("label_time_ms", "int64", "Time spent on this label (ms); null on a row without a label."),
            _c("time_ms", "int64", "Total time the annotator spent on the run (ms)."),
            _c("annotation_note", "string", "The annotation's own note."),
            _c("submitted_at", "timestamp", "When the annotation was submitted; null for drafts."),
        ),
        labels=True,
        notes="Blind mode: an annotator exporting this table gets only their own annotations until an admin "
              "reveals labels; reviewers and admins get all.",
    ),
    TableSpec(
        "annotations_canonical",
        "Submitted annotations in the format `a2annotate import-labels` reads: one row per label, and "
        "one row with `mode` = `none` per \"no failure found\" annotation. Annotations that came from a "
        "run's audits are left out (`a2annotate import` of `runs_canonical` recreates them); drafts are "
        "left out (an import is a submission).",
        (
            _c("annotator", "string", "User name (`judge:<source>` for judges). Human annotators must exist as users in the database imported into; other names become judges."),
            RUN_ID,
            _c("taxonomy", "string", "Taxonomy version as `key@version`."),
            _c("mode", "string", "Failure mode code, or `none` for \"no failure found\"; null for an "
                                 "attribution-only label (agent and evidence, no mode)."),
            _c("agent", "string", "Responsible agent id."),
            _c("evidence", "list<int64>", "Event seqs that show the failure."),
            _c("principals", "list<string>", "Affected principal ids."),
            _c("note", "string", "The label's note; on a `none` row, the annotation's note."),
            _c("confidence", "float64", "Confidence, 0 to 1."),
        ),
        formats=("csv", "jsonl"),
        labels=True,
        notes="Blind mode applies as for `annotations`.",
    ),
    TableSpec(
        "gold_labels",
        "One row per gold label, plus one row (with `mode` null) for each gold run without labels.",
        (
            RUN_ID,
            *_taxonomy_columns("gold run"),
            _c("gold_status", "string", "open (proposed) or adjudicated (final; the reports use only these)."),
            _c("no_failure", "bool", "The reviewer decided the run has no failure."),
            _c("reviewer", "string", "User name of the reviewer who adjudicated; null when none."),
            _c("run_rationale", "string", "The reviewer's rationale for the run."),
            _c("mode", "string", "Failure mode code; null on the row of a gold run without labels."),
            _c("category", "string", "Category of the mode."),
            _c("agent", "string", "Responsible agent id."),
            _c("principals", "list<string>", "Affected principal ids."),
            _c("evidence", "list<int64>", "Event seqs."),
            _c("origin", "string", "unanimity, majority or adjudication."),
            _c("accepted", "bool", "False when the reviewer rejected the candidate or undid the label: decided, "
               "not gold (reports, agreement and scores ignore it)."),
            _c("rationale", "string", "Rationale of this label."),
            _c("created_by", "string", "User name who created the label; null for automatic ones."),
            _c("created_at", "timestamp", "When the label was created."),
        ),
        labels=True,
        notes="Holds aggregated labels: an annotator gets 403 under blind mode.",
    ),
    TableSpec(
        "runs_canonical",
        "One canonical run record per line (the shape of the run format spec, as `GET /api/v1/runs/{run_id}` "
        "returns it). `a2annotate import` reads the file back; the content hash is unchanged.",
        (_c("<run>", "json", "The whole canonical run record (JSON Lines only)."),),
        formats=("jsonl",),
    ),
)

_OUTCOME_KEY_COLUMNS: dict[str, tuple[Column, ...]] = {
    "agent": (_c("model", "string", "Model."), _c("harness", "string", "Harness."), _c("role", "string", "Agent role.")),
    "principal": (_c("kind", "string", "Principal kind."),
                  _c("role", "string", "`+`-joined roles of the principal's agents in the run.")),
    "family": (_c("family", "string", "Scenario family."),),
    "model": (_c("model", "string", "Model."),),
    "harness": (_c("harness", "string", "Harness."),),
    "alignment": (_c("alignment", "string", "Scenario alignment."),),
    "scenario": (_c("scenario_id", "string", "Scenario id."),),
}
_AGENT_UNITS = ("agent", "model", "harness")


def _outcome_table(by: str) -> TableSpec:
    unit = "agent-run" if by in _AGENT_UNITS else "principal-run"
    return TableSpec(
        f"outcomes_by_{by}",
        f"The outcome report by {by} (`GET /api/v1/reports/outcomes?by={by}`): one row per group; the unit "
        f"counted is the {unit}. Rates are in [0, 1], null when the denominator is 0.",
        (
            *_OUTCOME_KEY_COLUMNS[by],
            _c("runs", "int64", "Distinct runs in the group."),
            _c("n", "int64", f"Number of {unit}s."),
            _c("aggregate_success_rate", "float64", f"{unit}s whose run completed with aggregate score >= threshold / n."),
            _c("principal_success_rate", "float64", "Units whose own principal succeeded / principal_known."),
            _c("success_gap", "float64", "aggregate_success_rate - principal_success_rate."),
            _c("principal_known", "int64", "Units whose principal outcome is known."),
            _c("principal_unknown", "int64", "Units whose principal outcome is unknown (left out of the rate)."),
            _c("mean_principal_score", "float64", "Mean principal score over units that have one."),
            _c("metric:<name>", "float64", "Mean of a numeric principal metric over units that have it."),
            _c("labelled_n", "int64", "Units in runs with a resolved label set."),
            _c("responsible_n", "int64", "Agent-runs of the group in labelled runs."),
            _c("responsible_rate", "float64", "Those agent-runs whose agent is responsible for at least one label."),
            _c("cat:<code>", "float64", "Labelled units with a label of that category / labelled_n."),
            _c("mode:<code>", "float64", "Labelled units with a label of that mode / labelled_n."),
        ),
        labels=True, report=True,
        notes="Labels chosen by the export's `source` (default auto); an annotator gets 403 under blind mode.",
    )


_REPORT_TABLES: tuple[TableSpec, ...] = (
    *(_outcome_table(by) for by in _OUTCOME_KEY_COLUMNS),
    TableSpec(
        "blind_spots",
        "Runs whose aggregate outcome counts as success while a principal's own outcome failed or a failure "
        "mode was labelled (`GET /api/v1/reports/blind-spots`).",
        (
            RUN_ID,
            _c("scenario_id", "string", "Scenario id."),
            _c("family", "string", "Scenario family."),
            _c("alignment", "string", "Scenario alignment."),
            _c("status", "string", "Run status (always completed here)."),
            _c("aggregate_score", "float64", "Aggregate score."),
            _c("failed_principals", "list<string>", "Principals whose own outcome is a failure."),
            _c("labelled_modes", "list<string>", "Distinct labelled failure modes."),
            _c("reasons", "list<string>", "Why the run is listed, one sentence per reason."),
        ),
        labels=True, report=True,
        notes="Labels chosen by the export's `source`; an annotator gets 403 under blind mode.",
    ),
    *(
        TableSpec(
            f"crossplay_{by}",
            f"Cross-play cells by {by} (`GET /api/v1/reports/crossplay?by={by}`): one row per ordered pairing of "
            f"side a's {by} against side b's in mixed or competitive runs between different principals.",
            (
                _c("a", "string", f"Side a's {by}."),
                _c("b", "string", f"Side b's {by}."),
                _c("runs", "int64", "Distinct runs."),
                _c("n", "int64", "Observations (run x pair of principals)."),
                _c("a_mean_score", "float64", "Mean score of side a's principal."),
                _c("b_mean_score", "float64", "Mean score of side b's principal."),
                _c("a_success_rate", "float64", "Success rate of side a's principal (known outcomes)."),
                _c("b_success_rate", "float64", "Success rate of side b's principal (known outcomes)."),
                _c("a_success_unknown", "int64", "Observations where side a's outcome is unknown."),
                _c("b_success_unknown", "int64", "Observations where side b's outcome is unknown."),
            ),
            report=True,
        )
        for by in ("model", "harness")
    ),
)

TABLES: dict[str, TableSpec] = {t.name: t for t in (*_BASE_TABLES, *_REPORT_TABLES)}
REPORT_TABLES: tuple[str, ...] = tuple(t.name for t in _REPORT_TABLES)


def table_spec(name: str) -> TableSpec:
    """Returns the spec of table ``name``; raises KeyError listing the tables when unknown."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r} (tables: {', '.join(TABLES)})") from None


def arrow_schema(spec: TableSpec, columns: list[str] | None = None) -> pa.Schema:
    """Returns the Parquet schema of ``spec`` for the actual ``columns`` (default: its fixed
    columns); report columns such as ``mode:DD1`` take the type of their pattern."""
    names = columns if columns is not None else spec.fixed_names
    return pa.schema([pa.field(n, ARROW_TYPES[spec.column(n).type]) for n in names])


def render_markdown() -> str:
    """Returns the text of ``docs/export-schema.md``: every table, every column, type, meaning."""
    out = [
        "# Export schema",
        "",
        ("<!-- Generated by `python -m app.exports.schema --write docs/export-schema.md` from "
        "app/exports/schema.py; do not edit by hand (a test checks it is up to date). -->"),
        "",
        ("Every table can be exported with `a2annotate export --format csv|parquet|jsonl --out DIR "
        "[--tables ...]` (one file per table, `<table>.<format>`) or `GET /api/v1/exports/{table}.{format}` "
        "(streamed). Rows are read from the database in chunks (5,000 rows; 4,000 for events, whose rows "
        "carry payloads) by keyset pagination on the primary key, and written as they come: CSV "
        "and JSON Lines line by line, Parquet one row group per chunk into a buffer that is sent and "
        "emptied after every row group (no temporary file, no whole file in memory). Report tables are "
        "computed in memory first (they are small aggregates). CSV and Parquet of `scenarios`, `principals`, "
        "`agents`, `events` and `audits` are read with one query, chunk by chunk (a server-side cursor on "
        "PostgreSQL), and built column-wise with Arrow, 16,384 rows a chunk (one Parquet row group); their "
        "JSON values go out as the compact text the database holds, without being decoded."),
        "",
        "## Types",
        "",
        "| type | CSV | Parquet | JSON Lines |",
        "|---|---|---|---|",
        "| `string` | text | string | string |",
        "| `int64` | digits | int64 | number |",
        "| `float64` | shortest round-trip decimal (`0.1`) | double | number |",
        "| `bool` | `true` / `false` | bool | `true` / `false` |",
        "| `timestamp` | ISO 8601 with `+00:00` | `timestamp[us, tz=UTC]` | ISO 8601 string |",
        "| `list<string>` | JSON text `[\"a\",\"b\"]` | `list<string>` | array |",
        "| `list<int64>` | JSON text `[3,5]` | `list<int64>` | array |",
        "| `json` | JSON text | string holding JSON text | the JSON value itself |",
        "",
        ("A null is an empty CSV field, a Parquet null and a JSON `null` (so in CSV an empty string and a "
        "null look the same). Free-form objects (`metadata`, `metrics`, `private_state`, event `data`) are "
        "JSON text in Parquet too: their keys differ from row to row, and a struct column would force one "
        "schema on all of them. Lists of ids and seqs are native lists in Parquet. Read JSON text columns "
        "with `json.loads` (pandas), `json(...)` (DuckDB)."),
        "",
        ("CSV quoting is Python's `csv` minimal quoting with `\\n` line ends: a field is quoted when it "
        "holds `,`, `\"` (doubled inside) or a line break (`\\n` or `\\r`)."),
        "",
        ("Formula injection: in CSV, a `string` cell that begins with `=`, `+`, `-`, `@`, a tab or a "
        "carriage return (possibly after some `'`) gets a `'` put in front, so that a spreadsheet shows "
        "it as text instead of running it as a formula (`=HYPERLINK(...)` becomes `'=HYPERLINK(...)`). "
        "Numbers, JSON and list columns are not changed (`-1` stays a number). `a2annotate import-labels` "
        "removes that one `'` again, so `annotations_canonical.csv` round-trips exactly; other readers see "
        "the `'`. Parquet and JSON Lines hold the values unchanged."),
        "",
        ("Blind mode: an annotator exporting `annotations` or `annotations_canonical` gets only their own "
         "annotations until an admin reveals labels; `audits`, `gold_labels` and the label-based reports "
         "answer 403 to them, and their `runs_canonical` has no `audits`. The demo corpus's seeded truth "
         "(`metadata.demo_truth` of `runs` and `runs_canonical`) is exported to admins only. Reviewers, "
         "admins and the command line get everything else."),
        "",
        ("Round trip into an empty database: `a2annotate import runs_canonical.jsonl` (runs, and the "
        "judges' annotations made from their audits), create the human annotators as users, then "
        "`a2annotate import-labels annotations_canonical.csv` (or `.jsonl`)."),
        "",
        ("Report tables take the export's `source` (`auto`, `gold`, `majority`, `annotator:<name>`) and "
        "`taxonomy`; a column written `mode:<code>` stands for one column per value (`mode:DD1`, ...)."),
        "",
        "## Tables",
        "",
        "| table | formats | rows |",
        "|---|---|---|",
    ]
    for t in TABLES.values():
        out.append(f"| [`{t.name}`](#{t.name}) | {', '.join(t.formats)} | {t.description} |")
    for t in TABLES.values():
        out += ["", f"### {t.name}", "", t.description, ""]
        if t.notes:
            out += [t.notes, ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | `{c.type}` | {c.description} |" for c in t.columns]
    out += ["", *DATASET_EXPORTS_DOC]
    return "\n".join(out) + "\n"


#: the dataset-shaped exports (app/exports/hf.py, app/exports/mad.py), documented with the tables
DATASET_EXPORTS_DOC: tuple[str, ...] = (
    "## Dataset exports",
    "",
    ("`a2annotate export --format hf --out DIR` (or `GET /api/v1/exports/hf.zip`) writes a folder the "
     "Hugging Face `datasets` library reads: one Parquet shard per table under `data/<table>/` (tables "
     "`runs`, `agents`, `principals`, `events`, `annotations`, `gold_labels`, and `checks` where the "
     "database has that table; the columns of the tables above), and a dataset card `README.md` whose "
     "YAML header lists every config (`config_name`, `data_files`) and its features (every column with "
     "its type), followed by the schema, the taxonomy versions the labels were made under, and the label "
     "provenance (annotations by human annotators, by judges, per origin; gold labels per origin: "
     "unanimity, majority, adjudication). Load one table with `datasets.load_dataset(\"parquet\", "
     "data_dir=\"DIR/data/annotations\")` or `pandas.read_parquet(\"DIR/data/annotations\")`."),
    "",
    ("`a2annotate export --format mad --out DIR` (or `GET /api/v1/exports/mad.json`) writes "
     "`DIR/MAD_full_dataset.json` in the shape of MAST's MAD full file: a JSON array of `{mas_name, "
     "llm_name, benchmark_name, trace_id, trace: {key, index, trajectory}, mast_annotation}` for every run "
     "labelled under the MAST taxonomy (`mast`) by the chosen annotator (default `judge:mast-llm`) and every "
     "run imported from a MAD full file. `mast_annotation` holds 1 for each mode the annotator marked, 0 for "
     "the others, null where the annotator made no annotation (or where the imported record had null). Runs "
     "imported from MAD keep their original fields and their trajectory text exactly, so the file imports "
     "back to the same runs and labels; other runs get `mas_name` from their agents' harness, `llm_name` "
     "from their model and a trajectory of `actor: content` lines."),
    "",
    "## Labels, wide",
    "",
    ("`GET /api/v1/exports/labels_wide.csv` (or `.parquet`; the export page's \"Labels for analysis\") is one "
     "row per run with a submitted annotation under `taxonomy` (default latest a2-failures): `run_id`, "
     "`family`, `title`, `n_annotators` (submitted annotations of the run), then one column "
     "`<annotator>.<mode>` for every annotator (sorted by name; judges and dataset sources by their names) "
     "and every mode of the taxonomy (taxonomy order): 1 when the annotator's submitted annotation has a "
     "label of that mode, 0 when it has not, empty (null) when the annotator submitted no annotation of the "
     "run; drafts never count. In Parquet the mode columns are `int8`. It holds everyone's labels: refused "
     "to annotators under blind mode."),
    "",
    "## Batch filter",
    "",
    ("`?batch=NAME` on `GET /api/v1/exports/{table}.{fmt}` and on `labels_wide` keeps the runs with an "
     "assignment in that batch, in every run-scoped table (`runs`, `principals`, `agents`, `events`, "
     "`audits`, `checks`, `annotations`, `annotations_canonical`, `gold_labels`, `runs_canonical`); "
     "`scenarios` and the report tables are not filtered. The export page's batch select adds it to every "
     "link."),
)


def main(argv: list[str] | None = None) -> int:
    """``python -m app.exports.schema [--write PATH]``: print or write the schema document."""
    parser = argparse.ArgumentParser(description="Print or write docs/export-schema.md")
    parser.add_argument("--write", metavar="PATH", help="write the document to PATH instead of printing it")
    args = parser.parse_args(argv)
    text = render_markdown()
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
