"""Runs held in files, read as an import profile's ``runs`` block says.

Two layouts: **several runs per file** (``each: record``: a JSON array of runs, a list of runs at a
JMESPath such as ``simulations``, or JSON Lines, one run a line) and **one file per run**
(``each: file``: the file is the run record; a JSON Lines file is the list of its lines). Inside a
run record, ``parts`` says where each role's data lies (``conversation: traj``, ``metrics:
reward_info``...); by default the run metadata is the record without the parts. ``join`` gives each
run file-level data: the item of a shared list whose ``key`` equals the run's ``run_key`` value (a
tau2-bench task joined by ``task_id``), or the whole value (a results file's ``info``), taken from
the same file or from another file of the tree.

Each run is then read exactly as a run directory is (`app.ingest.profiled.ProfiledRun`): every part
plays its role, keys, values, agents, principals, visibility, metrics, blocks and warnings work the
same way. Reached from the tree reader (a directory or zip read with such a profile) and from
`import --profile P FILE` (`app.ingest.detect`). Pure: no database.
"""
from __future__ import annotations

import copy
import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from app.ingest.canonical import Location, RunFormatError
from app.ingest.items import ImportItem, error_item
from app.ingest.profile import Profile, compile_path, dotted_pop, is_plain_path, key_candidates, root_key
from app.ingest.profiled import _LIST_KEYS, ProfiledRun, Unreadable, load_taxonomy, read_records
from app.ingest.readers.tree import link_out_of_tree, load_doc, read_loose, walk_tree


def _search(path: str, doc: Any) -> Any:
    return doc if path.strip() == "@" else compile_path(path).search(doc)


def _ptr(path: str) -> str:
    return path if is_plain_path(path) else f"({path})"


def rest_of(record: Any, parts: dict[str, str], skip: str | None = None) -> dict:
    """The record without what the parts other than metadata take (a plain dotted path takes just
    that key, an expression its top-level key); `skip`: a metadata path taken too."""
    if not isinstance(record, dict):
        return {}
    out = copy.deepcopy(record)
    paths = [p for n, p in parts.items() if n.partition(":")[0] != "metadata"]
    for path in paths + ([skip] if skip else []):
        if path.strip() == "@":
            return {}
        if is_plain_path(path):
            dotted_pop(out, path)
        else:
            out.pop(root_key(path) or "", None)
    return out


class RecordRun(ProfiledRun):
    """One run record of a file (or one whole file) read as the profile says."""

    def __init__(self, profile: Profile, root: Path, file: Path, shown_root: str, shown_file: str,
                 record: Any, loc: Location, index: int | None, joined: dict[str, Any], taxonomy: Any = None,
                 join_warnings: list[str] | None = None) -> None:
        self.record = record
        self.loc = loc
        self.index = index
        self.joined = joined
        self.file = file
        self.shown_file = shown_file
        self.join_warnings = list(join_warnings or [])
        runs = profile.get("runs") or {}
        self.parts: dict[str, str] = dict(runs.get("parts") or {})
        super().__init__(profile, root, file, shown_root, {}, taxonomy)
        # the file's name as the user knows it (an upload's client file name, not the name it has on
        # disk), so that run ids and `path` fields come out the same from the CLI and over REST
        self.file_name = PurePosixPath(shown_file.replace("\\", "/")).name or file.name
        rel = file.relative_to(root).as_posix() if file != root else file.name
        if self.file_name != file.name and rel.endswith(file.name):
            rel = rel[: -len(file.name)] + self.file_name
        self.file_rel = rel
        self.rel_dir = f"{rel}/{index}" if index is not None else rel
        self.shown_dir = str(loc) if index is not None else shown_file
        for message in self.join_warnings:
            self.warn(self.shown_dir, message)

    def again(self, profile: Profile) -> RecordRun:
        return RecordRun(profile, self.root, self.file, self.shown_root, self.shown_file, self.record, self.loc,
                         self.index, self.joined, self.taxonomy, self.join_warnings)

    # the parts of the record play the roles files play in a run directory
    def list_files(self) -> list[str]:
        names = list(self.parts)
        if "metadata" not in names:
            names.insert(0, "metadata")
        for role in self.joined:
            if role not in names:
                names.append(role)
        return names

    def by_role(self, role: str) -> list[tuple[str, str | None]]:
        out = []
        for name in self.files:
            base, _, param = name.partition(":")
            if base == role:
                out.append((name, param or None))
        return out

    def rest(self, skip: str | None = None) -> dict:
        return rest_of(self.record, self.parts, skip)

    def part(self, name: str) -> Any:
        """The value of a part (a copy: reading takes keys out of it). The run metadata is its part
        (default: the record) with every key of the record that no part takes: nothing is lost."""
        if name == "metadata":
            path = self.parts.get("metadata")
            value: Any = self.rest()
            if path is not None and path.strip() != "@":
                own = copy.deepcopy(_search(path, self.record))
                rest = self.rest(skip=path)
                value = {**rest, **own} if isinstance(own, dict) else {**rest, **({"metadata": own} if own is not None
                                                                                 else {})}
        else:
            value = copy.deepcopy(_search(self.parts[name], self.record)) if name in self.parts else None
        extra = self.joined.get(name.partition(":")[0]) if ":" not in name else None
        if extra is not None:
            if value is None:
                value = {}
            if isinstance(value, dict) and isinstance(extra, dict):
                value = {**copy.deepcopy(extra), **value}  # the run's own keys win over the shared ones
        return value

    def where(self, name: str) -> str:
        path = self.parts.get(name)
        head = str(self.loc) if self.index is not None else self.shown_file
        if path is None or path.strip() == "@":
            return head
        sep = "." if self.loc.pointer else ":"
        return f"{head}{sep}{_ptr(path)}"

    def shown(self, rel: str) -> str:
        return self.where(rel)

    def records(self, rel: str, role: str) -> list[tuple[Any, Location]]:
        self.used.add(rel)
        value = self.part(rel)
        pointer = ""
        if isinstance(value, dict):
            list_key = (self.p.get("records") or {}).get(role)
            if list_key and isinstance(value.get(list_key), list):
                value, pointer = value[list_key], f".{list_key}"
            elif not list_key:
                for k in _LIST_KEYS:
                    if isinstance(value.get(k), list):
                        value, pointer = value[k], f".{k}"
                        break
        base = self.where(rel)
        if isinstance(value, list):
            return [(item, Location(f"{base}{pointer}", pointer=f"[{i}]")) for i, item in enumerate(value)]
        if value is None:
            return []
        return [(value, Location(base))]

    def doc(self, rel: str) -> Any:
        self.used.add(rel)
        value = self.part(rel)
        return {} if value is None else value

    def text(self, rel: str) -> str:
        value = self.part(rel)
        if isinstance(value, list):
            value = "\n".join(str(v) for v in value)
        return "" if value is None else str(value)

    def unused(self) -> list[str]:
        return []

    def path_fields(self) -> dict[str, Any] | None:
        stem = self.file_name.rsplit(".", 1)[0] if "." in self.file_name else self.file_name
        fields: dict[str, Any] = {}
        if self.p.get("path"):
            from app.ingest.profiled import parse_path

            rel = self.file_rel.rsplit(".", 1)[0] if "." in self.file_name else self.file_rel
            fields = parse_path(self.p.get("path"), rel)
            if fields is None:
                return None
        fields = dict(fields)
        fields.setdefault("file", stem)
        if self.index is not None:
            fields.setdefault("index", str(self.index))
        return fields

    def default_run_id(self) -> str | None:
        stem = self.file_name.rsplit(".", 1)[0] if "." in self.file_name else self.file_name
        return f"{stem}/{self.index}" if self.index is not None else stem

    def source_doc(self) -> dict:
        """The run record as the file holds it, with the file-level metadata joined to it."""
        doc = copy.deepcopy(self.record) if isinstance(self.record, dict) else {}
        shared = self.joined.get("metadata")
        return {**copy.deepcopy(shared), **doc} if isinstance(shared, dict) else doc


# --------------------------------------------------------------------------- files holding runs

def _run_records(profile: Profile, path: Path, shown: str) -> list[tuple[Any, Location]]:
    """The run records of one file (each=record) as (record, location)."""
    runs = profile.get("runs") or {}
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        recs = read_records(path, shown, None)
        if runs.get("records"):
            out = []
            for rec, loc in recs:
                if isinstance(rec, Unreadable):
                    out.append((rec, loc))
                    continue
                value = _search(runs["records"], rec)
                if isinstance(value, list):
                    out += [(v, Location(loc.file, loc.line, f"{_ptr(runs['records'])}[{i}]"))
                            for i, v in enumerate(value)]
            return out
        return recs
    doc = load_doc(path, shown)
    if runs.get("records"):
        value = _search(runs["records"], doc)
        if not isinstance(value, list):
            raise RunFormatError(Location(shown), f"runs.records {runs['records']!r} gives "
                                 f"{type(value).__name__ if value is not None else 'nothing'}, not a list of runs")
        ptr = _ptr(runs["records"])
        return [(v, Location(shown, pointer=f"{ptr}[{i}]")) for i, v in enumerate(value)]
    if isinstance(doc, list):
        return [(v, Location(shown, pointer=f"[{i}]")) for i, v in enumerate(doc)]
    return [(doc, Location(shown))]


def _file_doc(path: Path, shown: str) -> Any:
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return [r for r, _ in read_records(path, shown, None) if not isinstance(r, Unreadable)]
    return load_doc(path, shown)


class _Joins:
    """The file-level data of ``runs.join`` for the runs of one file."""

    def __init__(self, profile: Profile, root: Path, shown_root: str, doc: Any, shown: str) -> None:
        self.specs = (profile.get("runs") or {}).get("join") or {}
        self.values: dict[str, Any] = {}
        self.index: dict[str, dict[str, Any]] = {}
        self.problems: list[dict] = []
        for role, spec in self.specs.items():
            src, where = doc, shown
            if spec.get("file"):
                p = root / spec["file"]
                where = f"{shown_root.rstrip('/')}/{spec['file']}"
                if not p.is_file() or link_out_of_tree(p, root):
                    self.problems.append({"location": where, "message": f"runs.join.{role}: the profile names "
                                          "this file, but it is not there (or leads out of the tree)"})
                    continue
                try:
                    src = _file_doc(p, where)
                except RunFormatError as exc:
                    self.problems.append({"location": str(exc.location), "message": f"runs.join.{role}: "
                                          f"file not read: {exc.message}"})
                    continue
            value = _search(spec["from"], src)
            if value is None:
                self.problems.append({"location": where, "message": f"runs.join.{role}: {spec['from']!r} "
                                      "finds nothing; the runs get no shared data"})
                continue
            if spec.get("key"):
                items = value if isinstance(value, list) else [value]
                table: dict[str, Any] = {}
                for item in items:
                    k = _search(spec["key"], item) if isinstance(item, dict) else None
                    if k is not None:
                        table.setdefault(str(k), item)
                self.index[role] = table
            else:
                self.values[role] = value

    def for_run(self, record: Any) -> tuple[dict[str, Any], list[str]]:
        out: dict[str, Any] = {}
        problems = []
        for role, spec in self.specs.items():
            if role in self.index:
                key = _search(spec["run_key"], record) if isinstance(record, (dict, list)) else None
                value = self.index[role].get(str(key)) if key is not None else None
                if value is None:
                    problems.append(f"runs.join.{role}: no item of {spec['from']!r} has {spec['key']} = {key!r} "
                                    f"(the run's {spec['run_key']}); the run gets none")
                    continue
            elif role in self.values:
                value = self.values[role]
            else:
                continue
            if spec.get("as"):
                value = {spec["as"]: value}
            elif not isinstance(value, dict):
                value = {root_key(spec["from"]) or role: value}
            out[role] = value
        return out, problems


def iter_runs_file(profile: Profile, path: Path, shown: str, root: Path | None = None,
                   shown_root: str | None = None) -> Iterator[ImportItem]:
    """The runs of one file by the profile's ``runs`` block (an ImportItem per run, or per problem)."""
    root = root if root is not None else path.parent
    shown_root = shown_root if shown_root is not None else (os.path.dirname(shown) or ".")
    runs = profile.get("runs") or {}
    taxonomy = load_taxonomy((profile.get("audits") or {}).get("taxonomy"))
    try:
        doc = _file_doc(path, shown) if runs.get("join") and not all(
            j.get("file") for j in runs["join"].values()) else None
        if runs.get("each") == "file":
            records = [(_file_doc(path, shown), Location(shown))]
            index_of = [None]
        else:
            records = _run_records(profile, path, shown)
            index_of = list(range(len(records)))
    except RunFormatError as exc:
        yield ImportItem(error=exc if exc.where.file else RunFormatError(Location(shown), exc.message),
                         source=shown)
        return
    joins = _Joins(profile, root, shown_root, doc, shown)
    if joins.problems:
        yield ImportItem(source=shown, warnings=joins.problems)
    if not records:
        yield error_item(shown, "no run records in this file (runs.records "
                         f"{runs.get('records') or '(the file itself)'!r} gives an empty list)")
        return
    for (record, loc), index in zip(records, index_of):
        if isinstance(record, Unreadable):
            yield error_item(str(loc), f"not valid JSON ({record.reason}); this run is not read")
            continue
        joined, problems = joins.for_run(record)
        yield RecordRun(profile, root, path, shown_root, shown, record, loc, index, joined, taxonomy,
                        problems).read()


def runs_globs(profile: Profile) -> list[str]:
    return key_candidates((profile.get("runs") or {}).get("files")) or ["*.json", "*.jsonl", "*.ndjson"]


def holds_runs(profile: Profile, rel: str) -> bool:
    """Whether a file of the tree (its path relative to the root) holds runs by ``runs.files``."""
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(rel, g) or ("/" not in g and fnmatch.fnmatch(name, g)) for g in runs_globs(profile))


def iter_runs_tree(root: Path, profile: Profile, shown_root: str,
                   loose: Any = None) -> Iterator[ImportItem]:
    """Every file of the tree that ``runs.files`` names, read for its runs; the files a join names
    are read with them; every other file goes to `loose` (the reader the registry picks) or is
    reported unused."""
    joined_files = {j["file"] for j in ((profile.get("runs") or {}).get("join") or {}).values() if j.get("file")}
    found = 0

    def claim(path: Path, rel: str, shown: str) -> Iterator[ImportItem] | None:
        nonlocal found
        if not holds_runs(profile, rel):
            return None
        found += 1
        return iter_runs_file(profile, path, shown, root, shown_root)

    for here, dirnames, filenames in walk_tree(root):
        yield from read_loose(root, here, dirnames, filenames, shown_root, loose,
                              skip=lambda rel, _fn: rel in joined_files, claim=claim)
    if not found:
        yield error_item(shown_root, f"profile {profile.name!r}: no file of the tree matches runs.files "
                         f"{runs_globs(profile)}")
