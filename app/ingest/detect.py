"""Format detection and the entry points `iter_path` and `iter_bytes`.

`detect_format(path)`: a directory (or a .zip archive, read as the directory it holds) is
"tree"; for a file the first non-blank line decides: ``[`` -> "canonical" (JSON array); SSE
(``data:``/``event:``/``id:`` lines) -> "wire"; a JSON object with ``jsonrpc``, an envelope
``body``, ``type: run_context|agent_card`` or an agent card -> "wire"; an object with
``resourceSpans`` (an OTLP/JSON trace export, as the collector's file exporter writes it) -> "otlp"
(`--format openinference` reads the same files: one mapping in app.ingest.otlp); any other object (a run,
with ``run_id``) -> "canonical", unless the (first) record has the keys of one of the field's
datasets: MAST's MAD (``mast_annotation``, or ``round`` + ``annotations``) -> "mad", Who&When
(``history`` + ``mistake_agent``/``mistake_step``/``question_ID``) -> "whowhen". A pretty-printed single object is sniffed by its top-level keys.

Directories: run directories go to the tree reader (with the import profile given, or the one
inferred for the tree); every other file is sniffed and, when it is canonical or wire data, read
as such (so a directory written by `write_files` reads back); the rest is reported as unused.
"""
from __future__ import annotations

import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from app.core.scratch import process_dir
from app.ingest import budget as _budget_mod
from app.ingest import safejson
from app.ingest.a2a import looks_like_agent_card
from app.ingest.budget import BudgetExceeded, ImportBudget
from app.ingest.canonical import RunFormatError
from app.ingest.items import ImportItem, ReadSummary, error_item
from app.ingest.jsonio import BOM, iter_canonical_file
from app.ingest.limits import InputLimits, input_limits
from app.ingest.mad import iter_mad_file, looks_like_mad_keys
from app.ingest.otlp import iter_otlp_file, looks_like_otlp
from app.ingest.tree import Mapping, iter_tree, load_mapping
from app.ingest.whowhen import iter_whowhen_file, looks_like_whowhen_keys
from app.ingest.wire import iter_wire_file

FORMATS = ("canonical", "tree", "wire", "mad", "whowhen", "otlp", "openinference")
#: formats of the field's published datasets, recognised by the keys of their first record
DATASET_FORMATS = ("mad", "whowhen")
OTLP_FORMATS = ("otlp", "openinference")  # one reader: app.ingest.otlp maps GenAI semconv and OpenInference
MAX_ZIP_BYTES = 2 << 30  # the default of the setting MAX_ZIP_BYTES (app.ingest.limits)
ZIP_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-zip")
_SSE_START = (b"data:", b"event:", b"id:", b"retry:", b":")


def _classify_object(obj: Any) -> str:
    if not isinstance(obj, dict):
        return "canonical"
    if looks_like_otlp(obj):
        return "otlp"
    if "jsonrpc" in obj or obj.get("type") in ("run_context", "agent_card"):
        return "wire"
    if isinstance(obj.get("body"), dict) or looks_like_agent_card(obj):
        return "wire"
    return "canonical"


def _top_level_keys(path: str | os.PathLike, limit: int = 64) -> set[str]:
    # not ijson: its C backend segfaults on an integer of more than 4,300 digits (app.ingest.safejson)
    try:
        with open(path, "rb") as f:
            return safejson.top_level_keys(f, limit)
    except (ValueError, OSError):
        return set()


def _first_record_keys(path: str | os.PathLike, limit: int = 64) -> set[str]:
    """The top-level keys of the file's object, or of the first object of its top-level array
    (or of its first JSON line); read with safejson, never ijson (see `_top_level_keys`)."""
    try:
        with open(path, "rb") as f:
            return safejson.top_level_keys(f, limit, max_bytes=1 << 20, stop=("run_id",), first_record=True)
    except (ValueError, OSError):
        return set()


def dataset_format(path: str | os.PathLike) -> str | None:
    """Returns "mad" or "whowhen" when the file's (first) record has that dataset's keys, else None."""
    keys = _first_record_keys(path)
    if looks_like_whowhen_keys(keys):
        return "whowhen"
    if looks_like_mad_keys(keys):
        return "mad"
    return None


def sniff_file(path: str | os.PathLike) -> str | None:
    """Return "canonical", "wire", "otlp", "mad", "whowhen" or None (not JSON / SSE data) for one file."""
    fmt = _sniff_file(path)
    if fmt == "canonical":
        return dataset_format(path) or fmt
    return fmt


def _first_content(f, chunk_size: int = 1 << 16, max_line: int = 1 << 20) -> bytes:
    """The start (at most `max_line` bytes) of the first non-blank line of binary file `f`. Leading
    blank lines are skipped a chunk at a time (not a line at a time: 0.09 CPU-s per MiB of blank lines) and
    count against the import's record budget, one record a line (MAX_IMPORT_RECORDS)."""
    first = True
    while chunk := f.read(chunk_size):
        if first and chunk.startswith(BOM):
            chunk = chunk[3:]
        first = False
        stripped = chunk.lstrip()
        skipped = chunk[:len(chunk) - len(stripped)]
        if skipped:
            _budget_mod.charge(skipped.count(b"\n"))
        if stripped:
            line = stripped.split(b"\n", 1)[0]
            if b"\n" not in stripped and len(line) < max_line:  # the line goes on: at most a MiB of it
                line += f.readline(max_line - len(line)).split(b"\n", 1)[0]
            return line.strip()
    return b""


def _sniff_file(path: str | os.PathLike) -> str | None:
    try:
        with open(path, "rb") as f:
            first = _first_content(f)
    except OSError:
        return None
    if not first:
        return None
    if first.startswith(b"["):
        return "canonical"
    if first.startswith(_SSE_START):
        return "wire"
    if not first.startswith(b"{"):
        return None
    try:
        return _classify_object(safejson.loads(first))
    except (ValueError, UnicodeDecodeError):
        keys = _top_level_keys(path)
        if "resourceSpans" in keys:
            return "otlp"
        if keys & {"jsonrpc", "body"}:
            return "wire"
        if "type" in keys or "name" in keys:
            try:
                with open(path, "rb") as f:
                    return _classify_object(safejson.load(f))
            except (ValueError, OSError):
                return "canonical"
        return "canonical"


def detect_format(path: str | os.PathLike) -> str:
    """Return "canonical", "tree", "wire", "mad" or "whowhen" for a path; raises RunFormatError
    when it cannot tell."""
    if os.path.isdir(path) or (os.path.isfile(path) and zipfile.is_zipfile(path)):
        return "tree"
    fmt = sniff_file(path)
    if fmt is None:
        raise RunFormatError(os.fspath(path), "cannot tell the format: not JSON, JSON Lines or an SSE stream")
    return fmt


def _read_file(path: Path, shown: str, fmt: str | None) -> Iterator[ImportItem]:
    fmt = fmt or sniff_file(path)
    if fmt == "canonical":
        return iter_canonical_file(path, shown)
    if fmt == "wire":
        return iter_wire_file(path, shown)
    if fmt == "mad":
        return iter_mad_file(path, shown)
    if fmt == "whowhen":
        return iter_whowhen_file(path, shown)
    if fmt in OTLP_FORMATS:
        return iter_otlp_file(path, shown)
    return iter([error_item(shown, "cannot tell the format: not JSON, JSON Lines or an SSE stream")])


def _iter_dir(path: str | os.PathLike, shown: str, fmt: str | None, mapping: Mapping,
              profile: Any = None, budget: ZipBudget | None = None) -> Iterator[ImportItem]:
    loose_fmt = fmt if fmt in ("canonical", "wire", *DATASET_FORMATS, *OTLP_FORMATS) else None

    def loose(p: Path, name: str) -> Iterator[ImportItem] | None:
        if p.name == "agent-card.json" and p.parent.name == ".well-known":
            # read by the wire logs next to the .well-known directory, if there are any
            logs = [s for s in p.parent.parent.iterdir() if s.is_file() and sniff_file(s) == "wire"]
            return iter(()) if logs else None
        if zipfile.is_zipfile(p):
            return _iter_zip(p, name, mapping, profile=profile, budget=budget)
        f = loose_fmt or sniff_file(p)
        return _read_file(p, name, f) if f else None

    return iter_tree(path, mapping, display=shown, loose=loose, profile=profile)


class ZipBudget:
    """What may still be unpacked from a zip and the zips inside it: bytes, members and levels of
    nesting (MAX_ZIP_BYTES, MAX_ZIP_MEMBERS, MAX_ZIP_NESTING), counted while decompressing (the
    sizes an archive claims in its headers are not trusted)."""

    def __init__(self, limits: InputLimits | None = None):
        lim = limits or input_limits()
        self.max_bytes, self.max_members, self.max_nesting = lim.max_zip_bytes, lim.max_zip_members, lim.max_zip_nesting
        self.max_ratio = lim.max_zip_ratio
        self.bytes = 0
        self.members = 0
        self.level = 0


def safe_extract(archive: zipfile.ZipFile, dest: str | os.PathLike, max_bytes: int | None = None,
                 budget: ZipBudget | None = None) -> None:
    # `budget` here is the zip's (bytes, members, nesting); the import's is `_budget_mod.current()`
    """Extract `archive` under `dest`; raises ValueError for absolute paths, ``..``, links, more
    members or bytes than the budget allows (counted while decompressing, not from the headers)."""
    budget = budget or ZipBudget()
    if max_bytes is not None:
        budget.max_bytes = max_bytes
    dest_path = Path(dest).resolve()
    for info in archive.infolist():
        budget.members += 1
        if budget.members > budget.max_members:
            raise ValueError(f"more than {budget.max_members} members (limit MAX_ZIP_MEMBERS, nested zips included)")
        name = info.filename.replace("\\", "/")
        if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
            raise ValueError(f"unsafe absolute path in the archive: {info.filename!r}")
        parts = PurePosixPath(name).parts
        if ".." in parts:
            raise ValueError(f"unsafe path with '..' in the archive: {info.filename!r}")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ValueError(f"symbolic link in the archive: {info.filename!r}")
        target = dest_path.joinpath(*parts) if parts else dest_path
        if dest_path != target and dest_path not in target.parents:
            raise ValueError(f"unsafe path in the archive: {info.filename!r}")
        if info.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        spend = _budget_mod.current()
        with archive.open(info) as src, open(target, "wb") as out:
            copied = 0
            while chunk := src.read(1 << 16):
                copied += len(chunk)
                budget.bytes += len(chunk)
                if budget.bytes > budget.max_bytes:
                    raise ValueError(f"the archive unpacks to more than {budget.max_bytes} bytes at member "
                                     f"{info.filename!r} (limit MAX_ZIP_BYTES, nested zips included)")
                if copied > info.file_size:
                    raise ValueError(f"the archive member {info.filename!r} is larger than it claims")
                if copied > ZIP_RATIO_GRACE and copied > budget.max_ratio * max(1, _compressed_read(src, info)):
                    raise ValueError(f"the archive member {info.filename!r} unpacks to more than {budget.max_ratio} "
                                     "times its compressed size (limit MAX_ZIP_RATIO)")
                if spend is not None:
                    spend.check(info.filename)  # cancelled, or out of CPU time
                out.write(chunk)


#: bytes of a member unpacked before its compression ratio is checked (tiny files compress oddly)
ZIP_RATIO_GRACE = 1 << 20


def _compressed_read(src: Any, info: zipfile.ZipInfo) -> int:
    """Compressed bytes of `info` read so far by `src` (a ZipExtFile); at most `compress_size`."""
    left = getattr(src, "_compress_left", None)  # CPython's zipfile: what is still to be read
    return info.compress_size - left if isinstance(left, int) else info.compress_size


def _iter_zip(path: str | os.PathLike, shown: str, mapping: Mapping, fmt: str | None = None,
              profile: Any = None, budget: ZipBudget | None = None) -> Iterator[ImportItem]:
    budget = budget or ZipBudget()
    if budget.level > budget.max_nesting:
        yield error_item(shown, f"zip archive rejected: zips nested more than {budget.max_nesting} deep "
                                "(limit MAX_ZIP_NESTING)")
        return
    with tempfile.TemporaryDirectory(prefix="a2annotate-zip-", dir=process_dir()) as tmp:
        try:
            with zipfile.ZipFile(path) as archive:
                safe_extract(archive, tmp, budget=budget)
        except (ValueError, zipfile.BadZipFile, OSError, NotImplementedError, EOFError) as exc:
            yield error_item(shown, f"zip archive rejected: {exc}")
            return
        budget.level += 1
        try:
            yield from _iter_dir(tmp, shown, fmt, mapping, profile, budget)
        finally:
            budget.level -= 1


def iter_path(path: str | os.PathLike, format: str | None = None,
              mapping: str | os.PathLike | dict | Mapping | None = None, *,
              summary: ReadSummary | None = None, display: str | None = None,
              profile: Any = None) -> Iterator[ImportItem]:
    """Yield an ImportItem per run (or per rejected run) read from a file, directory or zip.

    `format` forces one of FORMATS ("canonical", "wire", "mad", "whowhen", "otlp", "openinference"
    or "tree"; for a directory it applies to the loose files);
    `mapping` is the tree mapping file (path or dict); `profile` the import profile for trees
    (path, built-in name or Profile; default: inferred per tree); `summary`, when given, is
    filled as the items go by (runs, errors, unused files, warnings). Raises ValueError for an unknown format or a
    malformed mapping; everything else wrong with the input comes back as error items.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    mp = load_mapping(mapping)
    if profile is not None:
        from app.ingest.profile import load_profile

        profile = load_profile(profile)  # a bad profile fails here, before anything is read
    shown = display if display is not None else os.fspath(path)
    spend = _budget_mod.current() or ImportBudget()
    items = _budget_mod.within(_iter_path(Path(path), shown, format, mp, profile), spend)
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except BudgetExceeded as exc:  # the whole import stops here
            where = f"{shown}/{exc.where}" if exc.where and not exc.where.startswith(shown) else (exc.where or shown)
            item = error_item(where, f"import stopped: {exc.message}; nothing after this was read")
            if summary is not None:
                summary.add(item)
            yield item
            return
        if summary is not None:
            summary.add(item)
        yield item


def _iter_path(path: Path, shown: str, fmt: str | None, mp: Mapping, profile: Any = None) -> Iterator[ImportItem]:
    if path.is_dir():
        yield from _iter_dir(path, shown, fmt, mp, profile)
    elif not path.exists():
        yield error_item(shown, "no such file or directory")
    elif zipfile.is_zipfile(path):
        yield from _iter_zip(path, shown, mp, fmt, profile)
    elif fmt == "tree":
        yield error_item(shown, "a tree must be a directory or a zip archive")
    else:
        yield from _read_file(path, shown, fmt)


def iter_bytes(data: bytes, filename: str = "upload", content_type: str = "", *,
               mapping: str | os.PathLike | dict | Mapping | None = None,
               summary: ReadSummary | None = None) -> Iterator[ImportItem]:
    """Yield ImportItems for an uploaded body: JSON array, JSON Lines, one run, a wire log or a zip.

    The body is spooled to a temporary file (named like `filename`, so the upload's name shows
    in error locations); a zip is extracted safely (absolute paths, ``..`` and links rejected).
    """
    name = os.path.basename(filename or "upload") or "upload"
    ctype = (content_type or "").split(";")[0].strip().lower()
    is_zip = data[:4] == b"PK\x03\x04" or ctype in ZIP_TYPES
    suffix = ".zip" if is_zip else (".jsonl" if ctype in ("application/x-ndjson", "application/jsonl",
                                                          "application/jsonlines") else Path(name).suffix)
    with tempfile.TemporaryDirectory(prefix="a2annotate-upload-", dir=process_dir()) as tmp:
        target = Path(tmp) / ("upload" + suffix)
        target.write_bytes(data)
        yield from iter_path(target, mapping=mapping, summary=summary, display=filename or name)
