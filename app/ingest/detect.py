"""Format detection and the entry points `iter_path` and `iter_bytes`, through the reader registry.

Which reader takes a path is asked of the registry (app.ingest.registry): every registered reader
(built-ins and plugins alike, entry point group ``a2annotate.readers``) sniffs it and the highest
score wins. `detect_format(path)` returns that reader's name; a path no reader takes is refused
with every reader's reason and a pointer to `a2annotate inspect`. ``--format NAME`` (`iter_path(...,
format=NAME)`) names any registered reader (or an alias: ``openinference`` is the ``otlp`` reader).

Directories (and .zip archives, read as the directory they hold): unless an import profile is
given, a reader with `reads_dirs` that scores above the tree reader takes the whole directory;
otherwise run directories (or, with a profile's `runs` block, the files holding runs) go to the
tree reader (with the import profile given, or the one inferred for the tree) and every other
file is read by the reader the registry picks for it (the forced format, if one was given), so
a directory written by `write_files` reads back; files no reader takes are reported as unused.
A single file given with a profile that has a `runs` block is read by that block
(`app.ingest.profiled_runs`).
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
from app.ingest.budget import BudgetExceeded, ImportBudget
from app.ingest.canonical import RunFormatError
from app.ingest.items import ImportItem, ReadSummary, error_item
from app.ingest.readers.tree import Mapping, iter_tree, load_mapping
from app.ingest.registry import Pick, UnknownReader, declined_message, registry
from app.ingest.safety.limits import InputLimits, input_limits

TREE = "tree"
MAX_ZIP_BYTES = 2 << 30  # the default of the setting MAX_ZIP_BYTES (app.ingest.safety.limits)
ZIP_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-zip")


def format_names() -> list[str]:
    """Every name `--format` takes (registered readers and their aliases)."""
    return registry().names()


def pick_reader(path: str | os.PathLike) -> Pick:
    """The registry's choice for `path` (None when no reader takes it) and every reader's answer."""
    return registry().pick(path)


def sniff_file(path: str | os.PathLike) -> str | None:
    """The name of the reader the registry picks for one file, or None when none takes it."""
    return registry().pick(path, dirs=False).name


def detect_format(path: str | os.PathLike) -> str:
    """The name of the reader that takes `path` ("canonical", "tree", "wire", "mad", "whowhen",
    "otlp" or a plugin's); raises RunFormatError naming every reader tried when none does."""
    pick = pick_reader(path)
    if pick.reader is None:
        raise RunFormatError(os.fspath(path), declined_message(os.fspath(path), pick.tried))
    return pick.name


def _read_file(path: Path, shown: str, fmt: str | None) -> Iterator[ImportItem]:
    if fmt is not None:
        reader = registry().get(fmt)
    else:
        pick = registry().pick(path, dirs=False)
        if pick.reader is None:
            return iter([error_item(shown, declined_message(shown, pick.tried))])
        reader = pick.reader
    return iter(reader.read(path, shown))


def _iter_dir(path: str | os.PathLike, shown: str, fmt: str | None, mapping: Mapping,
              profile: Any = None, budget: ZipBudget | None = None) -> Iterator[ImportItem]:
    loose_fmt = fmt if fmt is not None and fmt != TREE else None

    def loose(p: Path, name: str) -> Iterator[ImportItem] | None:
        if p.name == "agent-card.json" and p.parent.name == ".well-known":
            # read by the wire logs next to the .well-known directory, if there are any
            logs = [s for s in p.parent.parent.iterdir() if s.is_file() and sniff_file(s) == "wire"]
            return iter(()) if logs else None
        if zipfile.is_zipfile(p):
            return _iter_zip(p, name, mapping, profile=profile, budget=budget)
        if loose_fmt:
            return _read_file(p, name, loose_fmt)
        pick = registry().pick(p, dirs=False)
        return iter(pick.reader.read(p, name)) if pick.reader is not None else None

    return iter_tree(path, mapping, display=shown, loose=loose, profile=profile)


def read_tree(path: str | os.PathLike, shown: str, mapping: Any = None, profile: Any = None,
              fmt: str | None = None) -> Iterator[ImportItem]:
    """The tree reader's work: a directory or a zip archive holding one (see the module docstring)."""
    p = Path(path)
    mp = load_mapping(mapping)
    if profile is not None:
        from app.ingest.profile import load_profile

        profile = load_profile(profile)
    if p.is_dir():
        return _iter_dir(p, shown, fmt, mp, profile)
    return _iter_zip(p, shown, mp, fmt, profile)


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

    `format` forces a registered reader by name (`format_names()`: "canonical", "wire", "mad",
    "whowhen", "otlp"/"openinference", "tree", or a plugin's; for a directory it applies to the
    loose files unless the reader reads whole directories); `mapping` is the tree mapping file
    (path or dict); `profile` the import profile for trees (path, built-in name or Profile;
    default: inferred per tree); `summary`, when given, is filled as the items go by (runs,
    errors, unused files, warnings). Raises ValueError for an unknown format or a malformed
    mapping; everything else wrong with the input comes back as error items.
    """
    if format is not None:
        try:
            registry().get(format)
        except UnknownReader as exc:
            raise ValueError(str(exc)) from None
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
    reg = registry()
    forced = reg.get(fmt) if fmt is not None else None
    if path.is_dir():
        if forced is not None and getattr(forced, "reads_dirs", False) and forced.name != TREE:
            yield from forced.read(path, shown)
            return
        if forced is None and profile is None:  # a profile given says how to read the folder
            pick = reg.pick(path, dirs=True)
            if pick.reader is not None and pick.name != TREE:
                yield from pick.reader.read(path, shown)
                return
        yield from _iter_dir(path, shown, fmt, mp, profile)
    elif not path.exists():
        yield error_item(shown, "no such file or directory")
    elif forced is not None and forced.name != TREE and not zipfile.is_zipfile(path):
        yield from forced.read(path, shown)
    elif profile is not None and profile.get("runs") and not zipfile.is_zipfile(path):
        # a file holding runs, read by the profile's `runs` block through the tree reader
        from app.ingest.readers.tree import TreeReader

        yield from TreeReader(mapping=mp, profile=profile).read_runs_file(path, shown)
    elif forced is not None and forced.name == TREE and not zipfile.is_zipfile(path):
        yield error_item(shown, "a tree must be a directory or a zip archive")
    elif zipfile.is_zipfile(path) and (forced is not None or reg.pick(path, dirs=False).name in (TREE, None)):
        yield from _iter_zip(path, shown, mp, fmt, profile)
    else:
        yield from _read_file(path, shown, None)


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
