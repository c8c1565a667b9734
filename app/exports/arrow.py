"""Column-wise (Arrow) export of the plain tables: events, principals, agents, audits, scenarios.

The rows come from one query read chunk by chunk (``fetchmany`` on the driver's cursor; a
server-side cursor on PostgreSQL), and each chunk becomes one Arrow table at once (one
``pa.array`` per column) that is written without touching single cells in Python:

* JSON columns are read as the text the database holds (``CAST(col AS TEXT)``), never decoded.
  The app stores JSON compactly (:func:`app.core.db.json_dumps`), which is exactly the export's
  JSON text; a value that is not in that form (written by an older version, with spaces or
  ``\\u`` escapes, or holding ``NaN``) is found by a vectorised substring test and re-encoded
  one by one, so every file is byte for byte what the per-cell writer made.
* CSV: every column is turned into its text form by Arrow compute kernels (integers, booleans,
  quoting of cells with ``,``, ``"`` or a newline, formula neutralisation of text cells), the
  columns are joined into lines and the lines' bytes are taken straight from the Arrow buffer.
* Parquet: the chunk's table goes to ``ParquetWriter.write_table``; list columns are parsed from
  their JSON text by ``pyarrow.json``.

Memory stays one chunk at a time.  :func:`app.exports.service.export_stream` uses this module for
CSV and Parquet of the tables in :data:`FAST_TABLES`; the other tables keep the row-dict path.

Where the rows come from (:func:`arrow_chunks`), fastest first:

* SQLite database file: a short-lived reader process (:mod:`app.exports.sqlite_worker`) runs the
  query with the ADBC SQLite driver (rows into Arrow in C) and streams Arrow IPC back over a
  pipe.  The driver links its own SQLite library, so it must never run inside this process
  (POSIX locks are per process: the two libraries would drop each other's locks).  SQLite's
  type inference is per batch, so every nullable text or float column is read as a non-null
  value of its own type (``ifnull(CAST(col AS type), default)``) with a separate ``col IS NULL``
  flag (an integer column all null in a first batch is inferred as int64, its own type).
* PostgreSQL: the ADBC PostgreSQL driver (libpq, binary ``COPY``) in this process.
* otherwise (an in-memory SQLite database, the drivers missing): the driver cursor's
  ``fetchmany``, one ``pa.array`` per column.

Every source gives the same Arrow chunks (same types, values and order, ``chunk_size`` rows).
"""
from __future__ import annotations

import importlib.util
import io
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
from sqlalchemy import Float, Integer, Text, cast, func, literal, select
from sqlalchemy.sql.elements import Label
from sqlmodel import Session

from app.exports.schema import ARROW_TYPES, TableSpec
from app.runs.models import Agent, Audit, Event, Principal, Run, Scenario

__all__ = ["FAST_TABLES", "FORMULA_CHARS", "arrow_chunks", "csv_blocks", "neutralise_formula", "parquet_table"]

#: a text cell starting with one of these is taken as a formula by spreadsheets
FORMULA_CHARS = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_RE = "^'*[=+\\-@\t\r]"

# JSON kinds: "value" (null stays null), "{}" / "[]" (a null or falsy value becomes that default,
# as the row-dict readers' ``value or {}`` do)
_FALSY_JSON = pa.array(["null", "{}", "[]", '""', "0", "false", "0.0", "-0.0"])
#: JSON text that is not in the export's compact form: white space or NaN / Infinity outside the
#: strings (the outside is matched from the start as other characters or whole strings), or a
#: ``\\u`` escape anywhere
_NEEDS_REENCODE = '^(?:[^"\\\\]|"(?:[^"\\\\]|\\\\.)*")*?(?:[ \\t\\n\\r]|NaN|Infinity)|\\\\u'
#: a list of ids in compact JSON whose items need no decoding: strings without escapes, integers
_SIMPLE_LISTS = {
    "string": '^\\[(?:"[^"\\\\]*"(?:,"[^"\\\\]*")*)?\\]$',
    "int64": "^\\[(?:-?(?:0|[1-9][0-9]*)(?:,-?(?:0|[1-9][0-9]*))*)?\\]$",
}


def neutralise_formula(value: str) -> str:
    """A text cell as written to CSV: ``'`` is put in front of a cell that starts with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return (optionally after ``'``s, so that the rule can
    be undone exactly: :func:`app.annotations.labels_import` strips one ``'`` again)."""
    s = value.lstrip("'")
    if s[:1] in FORMULA_CHARS:
        return "'" + value
    return value


def _jtext(col) -> Any:
    return cast(col, Text).label(col.key)


def _specs() -> dict[str, tuple[Any, Any, list[str | None]]]:
    """table -> (select statement whose first column is the row id, id column, JSON kind of
    every exported column (None for a plain column))."""
    return {
        "scenarios": (
            select(Scenario.id, Scenario.id, Scenario.family, Scenario.alignment, Scenario.title,
                   Scenario.description, _jtext(Scenario.extra)),
            Scenario.id, [None, None, None, None, None, "{}"]),
        "principals": (
            select(Principal.id, Run.run_id, Principal.principal_id, Principal.position, Principal.name,
                   Principal.kind, Principal.objective, _jtext(Principal.constraints), Principal.success,
                   Principal.score, _jtext(Principal.metrics), _jtext(Principal.extra))
            .join(Run, Run.id == Principal.run_pk),
            Principal.id, [None, None, None, None, None, None, "[]", None, None, "{}", "{}"]),
        "agents": (
            select(Agent.id, Run.run_id, Agent.agent_id, Agent.position, Agent.principal_id, Agent.role,
                   Agent.model, Agent.harness, _jtext(Agent.private_state), _jtext(Agent.extra))
            .join(Run, Run.id == Agent.run_pk),
            Agent.id, [None, None, None, None, None, None, None, "{}", "{}"]),
        "events": (
            select(Event.id, Run.run_id, Event.seq, Event.ts, Event.kind, Event.actor, _jtext(Event.recipients),
                   Event.visibility, Event.content, _jtext(Event.data), Event.parent_seq, Event.hop,
                   _jtext(Event.extra))
            .join(Run, Run.id == Event.run_pk),
            Event.id, [None, None, None, None, None, "[]", None, None, "value", None, None, "{}"]),
        "audits": (
            select(Audit.id, Run.run_id, Audit.position, Audit.source, Audit.level, Audit.mode, Audit.agent,
                   _jtext(Audit.evidence), Audit.note, _jtext(Audit.extra))
            .join(Run, Run.id == Audit.run_pk),
            Audit.id, [None, None, None, None, None, None, "[]", None, "{}"]),
    }


FAST_TABLES: tuple[str, ...] = ("scenarios", "principals", "agents", "events", "audits")


def _export_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)


def _json_array(arr: pa.Array, kind: str) -> pa.Array:
    """JSON text as exported: compact, non-ASCII as is; nulls / defaults as the kind says."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if kind != "value":
        falsy = pc.or_kleene(pc.is_null(arr), pc.is_in(arr, value_set=_FALSY_JSON))
        arr = pc.if_else(falsy, pa.scalar(kind), arr)
    else:
        arr = pc.if_else(pc.equal(arr, "null"), pa.scalar(None, pa.string()), arr)
    fix = pc.fill_null(pc.match_substring_regex(arr, _NEEDS_REENCODE), False)
    if pc.any(fix).as_py():
        new = []
        for text in pc.filter(arr, fix).to_pylist():
            v = json.loads(text)
            if kind != "value" and not v:
                v = json.loads(kind)
            new.append(_export_json(v))
        arr = pc.replace_with_mask(arr, fix, pa.array(new, type=pa.string()))
    return arr


def _to_table(columns: list, kinds: list[str | None], names: list[str], types: list[pa.DataType]) -> pa.Table:
    """One chunk (the columns after the row id, as Python sequences or Arrow arrays) as the
    export's Arrow table."""
    arrays = []
    for values, kind, type_ in zip(columns, kinds, types):
        if kind is not None:
            arrays.append(_json_array(values if isinstance(values, (pa.Array, pa.ChunkedArray))
                                      else pa.array(values, type=pa.string()), kind))
        elif isinstance(values, (pa.Array, pa.ChunkedArray)):
            arrays.append(values.cast(type_) if values.type != type_ else values)
        elif type_ == pa.bool_():  # SQLite hands booleans over as 0 / 1
            arrays.append(pa.array([None if v is None else bool(v) for v in values], type=type_))
        else:
            arrays.append(pa.array(values, type=type_))
    return pa.Table.from_arrays(arrays, names=names)


def arrow_chunks(session: Session, spec: TableSpec, chunk_size: int) -> Iterator[pa.Table]:
    """Yields the table's rows in chunks of ``chunk_size`` (in id order), each an Arrow table
    with the export's columns: plain columns in their Arrow types, JSON and list columns as
    export JSON text.  The rows come from one query (one snapshot), read by the fastest source
    available (see the module docstring)."""
    stmt, id_col, kinds = _specs()[spec.name]
    names = spec.fixed_names
    types = [ARROW_TYPES[spec.column(c).type] for c in names]
    conn = session.connection()
    big = _estimated_rows(conn, spec.name, id_col) >= ADBC_MIN_ROWS
    if big and conn.dialect.name == "sqlite":
        path = sqlite_file(conn)
        if path is not None and _have("adbc_driver_sqlite", "adbc_driver_manager", "nanoarrow"):
            sql, flagged = _worker_sql(stmt, id_col, kinds, types, conn.dialect)
            yield from _convert(_prefetch(_worker_batches(path, sql, chunk_size)), flagged, kinds, names, types)
            return
    elif big and conn.dialect.name == "postgresql" and _have("adbc_driver_postgresql", "adbc_driver_manager"):
        sql = _compiled(stmt.with_only_columns(*list(stmt.selected_columns)[1:]).order_by(id_col), conn.dialect)
        flagged = [False] * len(names)  # PostgreSQL's types are the columns' own: nulls come as nulls
        yield from _convert(_prefetch(_rebatch(_pg_batches(conn, sql), chunk_size)), flagged, kinds, names, types)
        return
    yield from _cursor_chunks(conn, spec, stmt, id_col, kinds, names, types, chunk_size)


#: the ADBC readers cost a fixed 0.05-0.2 s (a process to start, a connection that loads the type
#: catalogue); below this many rows the driver cursor is faster
ADBC_MIN_ROWS = 20_000


def _estimated_rows(conn, table: str, id_col) -> int:
    """An upper bound of the table's row count, from its id range (two index look-ups); 0 for a table
    keyed by text (scenarios: small)."""
    if table == "scenarios":
        return 0
    # two scalar subqueries: SQLite answers a lone min() or max() from the index, both together by a scan
    lo, hi = conn.execute(select(select(func.min(id_col)).scalar_subquery(),
                                 select(func.max(id_col)).scalar_subquery())).one()
    return 0 if lo is None else int(hi) - int(lo) + 1


def _have(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def _compiled(stmt, dialect) -> str:
    return str(stmt.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def _cursor_chunks(conn, spec: TableSpec, stmt, id_col, kinds, names, types, chunk_size: int) -> Iterator[pa.Table]:
    """``fetchmany`` on the driver's own cursor (a server-side cursor on PostgreSQL, so the client
    holds one chunk at a time), skipping SQLAlchemy's row objects."""
    sql = _compiled(stmt.order_by(id_col), conn.dialect)
    raw = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        cur = raw.cursor(name=f"a2annotate_export_{spec.name}")
    else:
        cur = raw.cursor()
    try:
        cur.execute(sql)
        while True:
            rows = cur.fetchmany(chunk_size)
            if not rows:
                return
            cols = list(zip(*rows))
            del rows
            table = _to_table(cols[1:], kinds, names, types)
            del cols
            yield table
            del table
    finally:
        cur.close()


def _prefetch(source: Iterator[pa.Table], depth: int = 2) -> Iterator[pa.Table]:
    """Runs ``source`` in a thread of its own, at most ``depth`` chunks ahead, so that the database
    read overlaps the conversion and writing of the chunk before (the drivers, Arrow kernels and
    the Parquet writer release the GIL).  When the caller stops early, the thread stops at its
    next chunk and closes ``source`` (which ends its reader)."""
    chunks: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in source:
                if not put(item):
                    break
                del item
            else:
                put(done)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller)
            put(exc)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=run, name="a2annotate-export-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            del item
    finally:
        stop.set()
        thread.join()


def _convert(tables: Iterable[pa.Table], flagged: list[bool], kinds, names, types) -> Iterator[pa.Table]:
    """Arrow chunks from a reader as the export's chunks: a flagged column is followed by its
    ``IS NULL`` column (0 / 1), which puts the nulls back."""
    for raw in tables:
        columns, i = [], 0
        for flag in flagged:
            col = raw.column(i)
            if flag:
                col = _with_nulls(col, raw.column(i + 1))
                i += 2
            else:
                i += 1
            columns.append(col)
        del raw
        yield _to_table(columns, kinds, names, types)


def _with_nulls(col: pa.ChunkedArray, flags: pa.ChunkedArray) -> pa.Array:
    """``col`` with nulls where ``flags`` (0 / 1) is 1: the values' buffers are kept as they are
    and the validity bitmap is made from the flags (no copy of the text)."""
    col, flags = col.combine_chunks(), flags.combine_chunks()
    if not pc.max(flags).as_py():
        return col
    valid = pc.equal(flags, 0)
    plain = pa.types.is_primitive(col.type) or pa.types.is_string(col.type)
    if plain and col.offset == 0 and valid.offset == 0 and col.null_count == 0:
        return pa.Array.from_buffers(col.type, len(col), [valid.buffers()[1], *col.buffers()[1:]])
    return pc.if_else(valid, col, pa.scalar(None, col.type))


# -- SQLite: the reader process


WORKER = Path(__file__).with_name("sqlite_worker.py")


def sqlite_file(conn) -> str | None:
    """The file of the connection's main SQLite database; None for an in-memory one."""
    for _, name, file in conn.exec_driver_sql("PRAGMA database_list").all():
        if name == "main":
            return file or None
    return None


def _base(col):
    while isinstance(col, Label) or hasattr(col, "clause"):
        col = col.element if isinstance(col, Label) else col.clause
    return col


def _worker_sql(stmt, id_col, kinds: list[str | None], types: list[pa.DataType], dialect) -> tuple[str, list[bool]]:
    """The query for the reader process: every exported column as a value of one SQLite type
    (the driver infers a column's Arrow type from its first batch); a nullable text or float
    column read non-null and followed by its ``IS NULL`` flag (integer and boolean columns keep
    their nulls); returns (SQL, flagged per exported column)."""
    exprs, flagged = [], []
    for i, (col, kind, type_) in enumerate(zip(list(stmt.selected_columns)[1:], kinds, types)):
        if kind is not None or type_ == pa.string():
            sql_type, default = Text, ""
        elif type_ in (pa.int64(), pa.bool_()):
            sql_type, default = Integer, 0
        elif type_ == pa.float64():
            sql_type, default = Float, 0.0
        else:
            raise AssertionError(f"no SQLite reader column for {type_}")
        value = col if isinstance(col, Label) and sql_type is Text else cast(_base(col), sql_type)
        if isinstance(value, Label):
            value = value.element
        # an integer column that is all null in the driver's first batch is inferred as int64, its own
        # type, and later values fit it: nulls can come as nulls. A text or float column cannot (int64
        # inferred from nulls, then a string or a float fails the batch), so it is read non-null with a flag.
        nullable = getattr(_base(col), "nullable", True) and sql_type is not Integer
        if nullable:
            exprs.append(func.ifnull(value, literal(default, sql_type)).label(f"c{i}"))
            exprs.append(cast(_base(col).is_(None), Integer).label(f"n{i}"))
        else:
            exprs.append(value.label(f"c{i}"))
        flagged.append(bool(nullable))
    return _compiled(stmt.with_only_columns(*exprs).order_by(id_col), dialect), flagged


def _worker_env() -> dict[str, str]:
    """The reader's environment: ``-S`` skips the site setup (half its start-up time), so the
    folders holding the driver and nanoarrow are put on PYTHONPATH instead."""
    dirs = []
    for module in ("adbc_driver_manager", "adbc_driver_sqlite", "nanoarrow"):
        spec = importlib.util.find_spec(module)
        origin = Path(spec.origin if spec and spec.origin else "")
        folder = str(origin.parent.parent)
        if folder not in dirs:
            dirs.append(folder)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dirs), "PYTHONSAFEPATH": "1"}


def _worker_batches(path: str, sql: str, chunk_size: int) -> Iterator[pa.Table]:
    """The rows of ``sql`` read by a reader process (see :mod:`app.exports.sqlite_worker`), one
    Arrow table of ``chunk_size`` rows at a time; the process is ended when the caller stops."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-S", str(WORKER), path, str(chunk_size)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=_worker_env())
        try:
            _grow_pipe(proc.stdout)
            with proc.stdin:
                proc.stdin.write(sql.encode("utf-8"))
            try:
                reader = pa.ipc.open_stream(proc.stdout)
                for batch in reader:
                    yield pa.Table.from_batches([batch])
                    del batch
            except (OSError, pa.ArrowInvalid) as exc:
                proc.wait()
                raise RuntimeError(f"SQLite export reader failed: {_stderr(err) or exc}") from exc
            if proc.wait() != 0:
                raise RuntimeError(f"SQLite export reader failed: {_stderr(err)}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def _grow_pipe(pipe) -> None:
    """A 1 MiB pipe (Linux; 64 KiB by default), so the reader can write most of a batch while
    the exporter works on the one before."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


def _stderr(err) -> str:
    err.seek(0)
    return err.read().decode("utf-8", "replace").strip()


# -- PostgreSQL: ADBC


def _pg_batches(conn, sql: str) -> Iterator[pa.RecordBatch]:
    """The rows of ``sql`` through the ADBC PostgreSQL driver (binary ``COPY`` into Arrow), on a
    connection of its own to the session's database."""
    import adbc_driver_postgresql.dbapi as pg

    url = conn.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with pg.connect(url) as db, db.cursor() as cur:
        cur.execute(sql)
        reader = cur.fetch_record_batch()
        for batch in reader:
            yield batch
            del batch


def _rebatch(batches: Iterable[pa.RecordBatch], n: int) -> Iterator[pa.Table]:
    """Record batches of any size as tables of ``n`` rows (the last one shorter)."""
    pending: list[pa.RecordBatch] = []
    have = 0
    for batch in batches:
        while batch.num_rows:
            take = min(n - have, batch.num_rows)
            pending.append(batch.slice(0, take))
            have += take
            batch = batch.slice(take)
            if have == n:
                yield pa.Table.from_batches(pending)
                pending, have = [], 0
    if have:
        yield pa.Table.from_batches(pending)


# --------------------------------------------------------------------------------------------
# CSV


def _quoted(arr: pa.Array) -> pa.Array:
    """CSV quoting of a non-null text array: a cell with ``,``, ``"``, ``\\n`` or ``\\r`` is quoted
    (:func:`app.exports.service.csv_line` does the same per row)."""
    needs = pc.match_substring_regex(arr, '[,"\n\r]')
    n = pc.sum(needs).as_py() or 0
    if not n:
        return arr
    sub = arr if n == len(arr) else pc.filter(arr, needs)  # only the cells that are quoted
    q = pc.binary_join_element_wise(pa.scalar('"'), pc.replace_substring(sub, '"', '""'), pa.scalar('"'), "")
    return q if n == len(arr) else pc.replace_with_mask(arr, needs, q)


def _csv_text(arr: pa.ChunkedArray | pa.Array, type_: str) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if type_ == "string":
        bad = pc.fill_null(pc.match_substring_regex(arr, _FORMULA_RE), False)
        if pc.any(bad).as_py():
            arr = pc.if_else(bad, pc.binary_join_element_wise(pa.scalar("'"), arr, ""), arr)
    elif type_ == "bool":
        arr = pc.if_else(arr, pa.scalar("true"), pa.scalar("false"))
    elif type_ == "int64":
        arr = pc.cast(arr, pa.string())
    elif type_ == "float64":  # repr(): Python's shortest round trip, as the row writer does
        arr = pa.array([None if v is None or v != v else repr(v) for v in arr.to_pylist()], type=pa.string())
    elif type_ not in ("json", "list<string>", "list<int64>"):
        raise AssertionError(f"no Arrow CSV text for type {type_}")
    return _quoted(pc.fill_null(arr, ""))


def _buffer_bytes(arr: pa.Array) -> bytes:
    """The concatenated values of a non-null string array, straight from its data buffer."""
    if len(arr) == 0:
        return b""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)
    start, end = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    return arr.buffers()[2][start:end].to_pybytes()


def csv_blocks(spec: TableSpec, chunks: Iterator[pa.Table], count: Callable[[int], None]) -> Iterator[bytes]:
    """The CSV bytes: the header, then one block per chunk (the same bytes as the row writer)."""
    from app.exports.service import csv_line

    names = spec.fixed_names
    yield csv_line(names).encode("utf-8")
    types = [spec.column(c).type for c in names]
    for table in chunks:
        n = table.num_rows
        cols = [_csv_text(table.column(i), t) for i, t in enumerate(types)]
        del table
        lines = pc.binary_join_element_wise(pc.binary_join_element_wise(*cols, ","), pa.scalar(""), "\n")
        del cols
        count(n)
        yield _buffer_bytes(lines)
        del lines


# --------------------------------------------------------------------------------------------
# Parquet


def _json_lists(arr: pa.ChunkedArray | pa.Array, type_: pa.DataType) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) == 0:
        return pa.array([], type=type_)
    item = "string" if type_.value_type == pa.string() else "int64"
    if pc.all(pc.match_substring_regex(arr, _SIMPLE_LISTS[item])).as_py():
        # every value is `[]` or `["a","b"]` / `[1,2]`: the items are the text between the
        # separators, split by Arrow kernels (no JSON parser)
        empty = pc.equal(arr, "[]")
        any_empty = pc.any(empty).as_py()
        if item == "string":
            parts = pc.split_pattern(pc.utf8_slice_codeunits(arr, 2, -2), '","')
        else:
            inner = pc.utf8_slice_codeunits(arr, 1, -1)
            if any_empty:  # a placeholder item, replaced by [] below
                inner = pc.if_else(empty, pa.scalar("0"), inner)
            parts = pc.split_pattern(inner, ",")
        parts = parts.cast(type_)
        if any_empty:
            parts = pc.if_else(empty, pa.scalar([], type=type_), parts)
        return parts
    lines = pc.binary_join_element_wise(pa.scalar('{"v":'), pc.fill_null(arr, "null"), pa.scalar("}\n"), "")
    parsed = pajson.read_json(
        io.BytesIO(_buffer_bytes(lines)),
        parse_options=pajson.ParseOptions(explicit_schema=pa.schema([("v", type_)])),
    )
    return parsed.column("v").combine_chunks().cast(type_)


def parquet_table(spec: TableSpec, table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The chunk's table in its Parquet schema: list columns parsed from their JSON text."""
    arrays = []
    for name in spec.fixed_names:
        type_ = spec.column(name).type
        col = table.column(name)
        if type_ in ("list<string>", "list<int64>"):
            arrays.append(_json_lists(col, ARROW_TYPES[type_]))
        else:
            arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)
