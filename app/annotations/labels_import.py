"""Import annotations made elsewhere (CSV or JSON Lines): `a2annotate import-labels` and
`POST /api/v1/annotations/import`.

One row per label, with the columns (CSV header or JSON keys): `annotator`, `run_id`, `mode`,
`agent`, `evidence` (CSV: seqs separated by `;`, or a JSON list), `taxonomy` (`key` or
`key@version`; default a2-failures latest), and optional `note`, `confidence`, `principals`
(CSV: ids separated by `;`, or a JSON list). A row whose `mode` is empty or `none` marks
"no failure found", unless it names an agent and evidence: then it is an attribution-only label
(who and when, no mode). Imported labels may be trace-level (a mode, no agent, no evidence). Rows group into one submitted annotation per (annotator, run, taxonomy
version), origin "import"; each group is stored atomically (a savepoint) or rejected whole.
Annotator names starting with `judge:`, and names that are not human users, become judge users.
Re-importing replaces the annotator's imported annotation of that run (idempotent).
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from app.annotations.service import (
    AnnotationError,
    NotFoundError,
    RunContext,
    find_annotation,
    get_run_or_error,
    resolve_taxonomy,
    save_annotation,
    validate_labels,
)
from app.auth.models import User
from app.auth.service import MAX_USERNAME, judge_user
from app.core.text import is_decimal
from app.ingest.safety import safejson
from app.taxonomies.models import Taxonomy

COLUMNS = ("annotator", "run_id", "mode", "agent", "evidence", "taxonomy", "note", "confidence", "principals")
REQUIRED_COLUMNS = ("annotator", "run_id", "mode")
NO_FAILURE_MODES = ("", "none")


class LabelFileError(ValueError):
    """The file as a whole cannot be read (bad CSV header, unknown columns, not text)."""

    def __init__(self, location: str, message: str):
        self.location = location
        self.message = message
        super().__init__(f"{location}: {message}")


@dataclass
class LabelImportSummary:
    """Counts of imported / rejected annotations (groups) and one error per problem."""

    imported: int = 0
    replaced: int = 0
    rejected: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)

    def line(self) -> str:
        """Returns the summary line `imported N annotations, rejected K`."""
        return f"imported {self.imported} annotations, rejected {self.rejected}"

    def to_dict(self) -> dict[str, Any]:
        """Returns the JSON shape `{imported, replaced, rejected, errors: [{location, message}]}`."""
        return {"imported": self.imported, "replaced": self.replaced, "rejected": self.rejected,
                "errors": list(self.errors)}


@dataclass
class _Row:
    line: int
    values: dict[str, Any]


# --------------------------------------------------------------------------- reading files

def detect_format(filename: str, content_type: str = "", text: str = "") -> str:
    """Returns "csv" or "jsonl" from the file name ending, else the content type, else the text."""
    suffix = Path(filename or "").suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    ct = (content_type or "").lower()
    if "csv" in ct:
        return "csv"
    if "json" in ct:
        return "jsonl"
    return "jsonl" if text.lstrip()[:1] in ("{", "[") else "csv"


def read_rows(data: bytes | str, filename: str, content_type: str = "") -> tuple[list[_Row], list[dict[str, str]]]:
    """Returns (rows, errors): the label rows with their line numbers, and one error per row that
    could not be parsed at all. Raises LabelFileError when the whole file is unusable."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise LabelFileError(filename, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    else:
        text = data.lstrip("\ufeff")
    fmt = detect_format(filename, content_type, text)
    return _read_csv(text, filename) if fmt == "csv" else _read_json(text, filename)


def _check_columns(cols: list[str], filename: str, where: str) -> None:
    unknown = [c for c in cols if c not in COLUMNS]
    if unknown:
        raise LabelFileError(f"{filename}:{where}", f"unknown column(s) {', '.join(map(repr, unknown))} "
                             f"(columns: {', '.join(COLUMNS)})")


def _records(reader: csv.DictReader, filename: str):
    """The reader's records; a record csv cannot read (a field over the limit, a NUL byte) ends
    the file with an error naming its line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise LabelFileError(f"{filename}:{reader.line_num + 1}", f"not readable as CSV: {exc}") from None


def unneutralise_formula(value: str) -> str:
    """Undoes the exports' CSV formula neutralisation (app.exports.arrow.neutralise_formula): a
    cell of ``'``s followed by ``=``, ``+``, ``-``, ``@``, a tab or a carriage return loses one ``'``."""
    if value.startswith("'"):
        rest = value.lstrip("'")
        if rest[:1] in ("=", "+", "-", "@", "\t", "\r"):
            return value[1:]
    return value


def _read_csv(text: str, filename: str) -> tuple[list[_Row], list[dict[str, str]]]:
    from app.ingest.safety.limits import input_limits

    # one field may be as long as a JSON string (MAX_STRING_BYTES); csv's own default is 128 KiB
    csv.field_size_limit(max(input_limits().max_string_bytes, 1 << 17))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fieldnames = reader.fieldnames
    except csv.Error as exc:
        raise LabelFileError(f"{filename}:1", f"not readable as CSV: {exc}") from None
    header = [h.strip() for h in (fieldnames or [])]
    if not header:
        raise LabelFileError(filename, f"empty file (expected a CSV header: {', '.join(COLUMNS)})")
    reader.fieldnames = header
    _check_columns([h for h in header if h], filename, "1")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise LabelFileError(f"{filename}:1", f"missing column(s) {', '.join(missing)} in the CSV header")
    rows, errors = [], []
    for rec in _records(reader, filename):
        line = reader.line_num  # the (last) physical line of this record
        if None in rec:
            errors.append(_err(filename, line, None, f"{len(header) + len(rec[None])} fields, header has {len(header)}"))
            continue
        values = {k: (unneutralise_formula(v.strip()).strip() if isinstance(v, str) else v)
                  for k, v in rec.items() if k}
        if not any(values.values()):
            continue  # blank line
        rows.append(_Row(line, values))
    return rows, errors


def _read_json(text: str, filename: str) -> tuple[list[_Row], list[dict[str, str]]]:
    rows, errors = [], []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = safejson.loads(text)
        except json.JSONDecodeError as exc:
            raise LabelFileError(f"{filename}:{exc.lineno}", f"invalid JSON ({exc.msg})") from None
        numbered = [(i + 1, item) for i, item in enumerate(items)]
        unit = "item"
    else:
        numbered = []
        for n, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                numbered.append((n, safejson.loads(raw)))
            except json.JSONDecodeError as exc:
                errors.append(_err(filename, n, None, f"invalid JSON ({exc.msg} at column {exc.colno})"))
        unit = "line"
    for n, item in numbered:
        if not isinstance(item, dict):
            errors.append(_err(filename, n, None, f"{unit} must be a JSON object, got {type(item).__name__}"))
            continue
        unknown = [k for k in item if k not in COLUMNS]
        if unknown:
            errors.append(_err(filename, n, unknown[0], f"unknown field (fields: {', '.join(COLUMNS)})"))
            continue
        rows.append(_Row(n, dict(item)))
    return rows, errors


def _err(filename: str, line: int | None, fld: str | None, message: str) -> dict[str, str]:
    loc = f"{filename}:{line}" if line is not None else filename
    return {"location": loc, "message": f"{fld}: {message}" if fld else message}


# --------------------------------------------------------------------------- cell values

class _CellError(ValueError):
    """A cell value that cannot be read (the message says why)."""


def _seqs(value: Any) -> list[int]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                value = safejson.loads(s)
            except json.JSONDecodeError:
                raise _CellError(f"{value!r} is not a JSON list of event seqs") from None
        else:
            value = [p.strip() for p in s.replace(",", ";").split(";") if p.strip()]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise _CellError(f"must be a list of event seqs, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, str) and is_decimal(v.strip(), signed=True):
            v = int(v)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _CellError(f"{v!r} is not an event seq (integer)")
        out.append(v)
    return out


def _ids(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                value = safejson.loads(s)
            except json.JSONDecodeError:
                raise _CellError(f"{value!r} is not a JSON list of ids") from None
        else:
            return [p.strip() for p in s.split(";") if p.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _CellError(f"must be a list of ids, got {value!r}")
    return value


def _confidence(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _CellError(f"{value!r} is not a number") from None
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise _CellError(f"must be a number from 0 to 1, got {_short(value)}")
        return float(value)
    except OverflowError:  # an integer too large for a float
        raise _CellError(f"must be a number from 0 to 1, got {_short(value)}") from None


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 4000 else "a huge integer"
    return text if len(text) <= 80 else text[:60] + f"... ({len(text)} characters)"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise _CellError(f"must be text, got {value!r}")
    return value.strip() or None


# --------------------------------------------------------------------------- import

def _annotator(session: Session, name: str) -> User:
    """The human user `name`, or the judge user for any other name (created on first use)."""
    if not name.startswith("judge:"):
        user = session.exec(select(User).where(User.username == name)).first()
        if user is not None and user.kind == "human":
            return user
    return judge_user(session, name)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(x) for x in value)
    return False


def _storage_problem(session: Session, values: dict[str, Any]) -> tuple[str, str] | None:
    """Returns (column, message) for a cell the database cannot store, the same on every backend:
    a NUL character anywhere, or an annotator name too long for its (judge) user; else None."""
    for key, value in values.items():
        if _has_nul(value):
            return key, "contains a NUL character (\\u0000), which the database cannot store"
    name = values["annotator"].strip()
    longest = MAX_USERNAME if name.startswith("judge:") else MAX_USERNAME - len("judge:")
    if len(name) > longest:
        human = session.exec(select(User).where(User.username == name, User.kind == "human")).first()
        if human is None:
            return "annotator", (f"{len(name)} characters: a name that is not a user becomes the judge "
                                 f"'judge:<name>', which holds at most {MAX_USERNAME} characters")
    return None


def import_label_rows(session: Session, rows: list[_Row], filename: str,
                      summary: LabelImportSummary | None = None) -> LabelImportSummary:
    """Group `rows` into annotations and store each group atomically; returns the summary.

    Every problem becomes an error `{location: "FILE:LINE", message: "FIELD: ..."}` and rejects
    its whole group. The caller commits the session.
    """
    summary = summary or LabelImportSummary()
    tax_cache: dict[str, Taxonomy] = {}
    groups: dict[tuple[str, str, int], list[tuple[_Row, Taxonomy]]] = {}
    for row in rows:
        v = row.values
        annotator, run_id = v.get("annotator"), v.get("run_id")
        bad = next((f for f, x in (("annotator", annotator), ("run_id", run_id))
                    if not isinstance(x, str) or not x.strip()), None)
        if bad:
            summary.rejected += 1
            summary.errors.append(_err(filename, row.line, bad, f"required, got {v.get(bad)!r}"))
            continue
        problem = _storage_problem(session, v)
        if problem:
            summary.rejected += 1
            summary.errors.append(_err(filename, row.line, *problem))
            continue
        ref = v.get("taxonomy") or None
        try:
            if ref not in tax_cache:
                tax_cache[ref] = resolve_taxonomy(session, ref)
        except AnnotationError as exc:
            summary.rejected += 1
            summary.errors.append(_err(filename, row.line, "taxonomy", exc.message))
            continue
        tax = tax_cache[ref]
        groups.setdefault((annotator.strip(), run_id.strip(), tax.id), []).append((row, tax))
    for (annotator, run_id, _), members in groups.items():
        errors, replaced = _import_group(session, annotator, run_id, members, filename)
        if errors:
            summary.rejected += 1
            summary.errors.extend(errors)
        else:
            summary.imported += 1
            summary.replaced += int(replaced)
    summary.errors.sort(key=_line_of)  # in file order, whichever check found them
    return summary


def _line_of(error: dict[str, str]) -> int:
    tail = error["location"].rsplit(":", 1)[-1]
    return int(tail) if is_decimal(tail) else 0


def _import_group(session: Session, annotator: str, run_id: str, members: list[tuple[_Row, Taxonomy]],
                  filename: str) -> tuple[list[dict[str, str]], bool]:
    """Store one (annotator, run, taxonomy) group in a savepoint; returns (its errors, whether an
    earlier import was replaced). No errors means it was stored."""
    first = members[0][0]
    tax = members[0][1]
    savepoint = session.begin_nested()
    try:
        try:
            run = get_run_or_error(session, run_id)
        except NotFoundError as exc:
            savepoint.rollback()
            return [_err(filename, first.line, "run_id", str(exc))], False
        ctx = RunContext(session, run)
        errors: list[dict[str, str]] = []
        labels: list[dict[str, Any]] = []
        none_rows: list[_Row] = []
        for row, _ in members:
            v = row.values
            mode = v.get("mode")
            if isinstance(mode, (int, float)) and not isinstance(mode, bool):
                mode = str(mode)  # MAST codes written as JSON numbers (1.1)
            no_mode = mode is None or (isinstance(mode, str) and mode.strip().lower() in NO_FAILURE_MODES)
            if no_mode and not (v.get("agent") and v.get("evidence") not in (None, "", [])):
                none_rows.append(row)
                continue
            if no_mode:
                mode = None  # an attribution: who and when, no mode
            try:
                fld = "evidence"
                evidence = _seqs(v.get("evidence"))
                fld = "principals"
                principals = _ids(v.get("principals"))
                fld = "confidence"
                confidence = _confidence(v.get("confidence"))
                fld = "note"
                note = _text(v.get("note"))
                fld = "agent"
                agent = _text(v.get("agent"))
            except _CellError as exc:
                errors.append(_err(filename, row.line, fld, str(exc)))
                continue
            label = {"mode": mode, "agent": agent, "principals": principals, "evidence": evidence,
                     "note": note, "confidence": confidence}
            try:
                labels.extend(validate_labels(ctx, tax, [label], complete=True, imported=True))
            except AnnotationError as exc:
                errors.append(_err(filename, row.line, exc.field.split(".", 1)[-1], exc.message))
        if none_rows and (labels or len(none_rows) != len(members)):
            lines = ", ".join(str(r.line) for r, _ in members if r not in none_rows)
            errors.append(_err(filename, none_rows[0].line, "mode",
                               f"'no failure found' conflicts with the failure labels on line(s) {lines} "
                               f"for annotator {annotator!r}, run {run_id!r}"))
        user = _annotator(session, annotator)
        existing = find_annotation(session, user, run, tax)
        if existing is not None and existing.origin != "import":
            made = "in the app" if existing.origin == "human" else "from the run's audits"
            errors.append(_err(filename, first.line, "annotator",
                               f"{user.username} already has an annotation of run {run_id} made {made}; "
                               "it is not replaced by an import"))
        if errors:
            savepoint.rollback()
            return errors, False
        notes = [r.values.get("note") for r in none_rows if r.values.get("note")]
        note = notes[0] if notes and isinstance(notes[0], str) else None
        save_annotation(session, user, run, tax, labels, no_failure=not labels, status="submitted",
                        note=note, origin="import", check_lock=False, imported=True)
        savepoint.commit()
        return [], existing is not None
    except Exception:
        if savepoint.is_active:
            savepoint.rollback()
        raise


def import_labels(session: Session, data: bytes | str, filename: str, content_type: str = "") -> LabelImportSummary:
    """Read a CSV / JSON Lines label file and import it (see the module docstring).

    Returns the summary; a file that cannot be read at all gives one error and nothing stored.
    The caller commits the session.
    """
    summary = LabelImportSummary()
    try:
        rows, errors = read_rows(data, filename, content_type)
    except LabelFileError as exc:
        summary.rejected += 1
        summary.errors.append({"location": exc.location, "message": exc.message})
        return summary
    summary.rejected += len(errors)
    summary.errors.extend(errors)
    return import_label_rows(session, rows, filename, summary)
