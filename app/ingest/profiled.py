"""Reading one run directory (and finding run directories) as an import profile says.

Part of the tree reader (`app.ingest.readers.tree.iter_tree` calls it for every profile that is not the
built-in names). Every file plays the role its first matching ``files`` glob gives; records are
mapped key by key (``keys``), values through the vocabularies (``values``); what does not map is
kept (in the record's metadata, run ``metadata``, or as a ``log`` event) and reported as a warning
with its file and line. The assembled record goes through `app.ingest.lenient.normalize_lenient`.
See docs/importing.md for the profile reference.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

from app.ingest.canonical import Location, RunFormatError, epoch_to_iso, ts_key, ts_order
from app.ingest.items import ImportItem
from app.ingest.lenient import normalize_lenient
from app.ingest.profile import (
    Profile,
    compile_path,
    dotted_get,
    dotted_pop,
    fill,
    is_plain_path,
    key_candidates,
    outside_tree_problem,
    root_key,
)
from app.ingest.readers.tree import artifact_event, link_out_of_tree, load_doc
from app.ingest.safety import safejson

_LIST_KEYS = ("events", "messages", "conversation", "turns", "steps", "records", "items", "results", "checks",
              "judgments", "judgements", "audits", "hops", "entries", "data")
_TRUE = {"true", "pass", "passed", "ok", "yes", "success", "succeeded", "1"}
_FALSE = {"false", "fail", "failed", "no", "error", "failure", "0"}


# --------------------------------------------------------------------------- files

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)


def cut_section(text: str, heading: str) -> tuple[str, str | None]:
    """`text` without the Markdown section whose heading reads `heading` (case-insensitive; the
    section runs to the next heading of the same or a higher level), and that section's body;
    (text, None) when there is no such heading."""
    heads = list(_HEADING.finditer(text))
    for i, m in enumerate(heads):
        if m[2].strip().lower() != heading.strip().lower():
            continue
        level = len(m[1])
        end = next((h.start() for h in heads[i + 1:] if len(h[1]) <= level), len(text))
        body = text[m.end():end].strip("\n")
        return (text[:m.start()] + text[end:]).rstrip("\n") + "\n", body
    return text, None


def _names_of(ev: dict) -> list[Any]:
    rec = ev.get("recipients")
    return [ev.get("actor"), *(rec if isinstance(rec, list) else [])]


def carries_text(value: Any) -> bool:
    """Whether `value` holds prose (a string with a space, or longer than 40 characters, anywhere
    in it), as opposed to ids, codes, numbers and flags, which lose nothing kept in metadata."""
    if isinstance(value, str):
        v = value.strip()
        return len(v) > 40 or (" " in v)
    if isinstance(value, dict):
        return any(carries_text(v) for v in value.values())
    if isinstance(value, list):
        return any(carries_text(v) for v in value)
    return False


class Unreadable:
    """A JSON Lines line that is not JSON (a truncated last line, a stray print): its text is kept."""

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason


def role_of(profile: Profile, rel: str) -> tuple[str, str | None] | None:
    """(role, param) of a file by the profile's ``files`` globs (first match wins); a glob without
    ``/`` also matches the bare file name. ``role:param`` gives a parameter (e.g. ``checks:L0``)."""
    name = rel.rsplit("/", 1)[-1]
    for glob, role in (profile.get("files") or {}).items():
        if fnmatch.fnmatch(rel, glob) or ("/" not in glob and fnmatch.fnmatch(name, glob)):
            base, _, param = role.partition(":")
            return base, (param or None)
    return None


def is_marker(profile: Profile, name: str) -> bool:
    markers = (profile.get("run_dirs") or {}).get("marker")
    if markers:
        return any(fnmatch.fnmatch(name, m) for m in markers)
    r = role_of(profile, name)
    return bool(r and r[0] == "metadata")


def read_records(path: Path, shown: str, list_key: str | None) -> list[tuple[Any, Location]]:
    """Records of a JSON Lines file, or of a JSON file (an array, the list at `list_key` (dotted),
    a list under a common key, or the object itself)."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        out = []
        with open(path, "rb") as f:
            for lineno, raw in enumerate(safejson.bounded_lines(f), 1):
                if isinstance(raw, safejson.LineTooLong):
                    out.append((Unreadable("", f"input limit: a line of {raw.size} bytes (limit MAX_RECORD_BYTES)"),
                                Location(shown, lineno)))
                    continue
                raw = raw.strip()
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if not raw:
                    continue
                try:
                    out.append((safejson.loads(raw.decode("utf-8")), Location(shown, lineno)))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    out.append((Unreadable(raw.decode("utf-8", "replace")[:10000], str(exc)),
                                Location(shown, lineno)))
        return out
    doc = load_doc(path, shown)
    pointer = ""
    if isinstance(doc, dict):
        if list_key:
            found, value = dotted_get(doc, list_key)
            if found and isinstance(value, list):
                doc, pointer = value, list_key
        else:
            for k in _LIST_KEYS:
                if isinstance(doc.get(k), list):
                    doc, pointer = doc[k], k
                    break
    if isinstance(doc, list):
        return [(item, Location(shown, pointer=f"{pointer}[{i}]")) for i, item in enumerate(doc)]
    return [(doc, Location(shown))]


def parse_path(template: str | list[str] | None, rel: str) -> dict[str, str] | None:
    """Fields of a run directory's path (relative to the root) by a template such as
    ``{family}/{task}/{scenario}/{run}``; a component may be a literal, or hold several fields
    separated by literal text (``{scenario}__r{repetition}``). None when it does not fit."""
    if not template:
        return {}
    if not isinstance(template, str):  # several templates: the first that fits
        for t in template:
            got = parse_path(t, rel)
            if got is not None:
                return got
        return None
    parts = [p for p in rel.split("/") if p]
    tparts = [p for p in template.split("/") if p]
    if len(parts) != len(tparts):
        return None
    out: dict[str, str] = {}
    for value, t in zip(parts, tparts):
        pattern = "^" + re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m[1]}>.+?)", re.escape(t)) + "$"
        m = re.match(pattern, value)
        if m is None:
            return None
        out.update(m.groupdict())
    return out


def read_manifest(profile: Profile, root: Path, shown_root: str) -> tuple[dict[str, dict], str | None,
                                                                           list[dict]]:
    """``({run_dir_rel_path: {run_id, fields...}}, manifest_rel_path, warnings)``."""
    spec = profile.get("manifest")
    if not spec:
        return {}, None, []
    rel = spec["file"]
    shown = f"{shown_root.rstrip('/')}/{rel}"
    problem = outside_tree_problem(rel)
    path = root / rel
    if problem is None and not _inside(path, root):
        problem = "it leads out of the tree (a symbolic link); not read"
    if problem:  # every path a profile names stays inside the tree (load_profile refuses the rest)
        return {}, None, [{"location": shown, "message": f"manifest not read: {problem}"}]
    if not path.is_file():
        return {}, None, [{"location": shown, "message": "the profile names this manifest, but it is not there"}]
    warnings: list[dict] = []
    out: dict[str, dict] = {}
    try:
        records = read_records(path, shown, spec.get("records"))
    except RunFormatError as exc:
        return {}, rel, [{"location": exc.location, "message": f"manifest not read: {exc.message}"}]
    path_key, id_key = spec.get("path", "path"), spec.get("run_id", "run_id")
    for obj, loc in records:
        if not isinstance(obj, dict):
            warnings.append({"location": str(loc), "message": "a manifest record must be an object; skipped"})
            continue
        found, p = dotted_get(obj, path_key)
        if not found or not isinstance(p, str):
            warnings.append({"location": str(loc), "message": f"manifest record has no {path_key!r}; skipped"})
            continue
        entry: dict[str, Any] = {}
        found, rid = dotted_get(obj, id_key)
        if found and isinstance(rid, (str, int)) and not isinstance(rid, bool):
            entry["run_id"] = str(rid)
        for name, key in (spec.get("fields") or {}).items():
            found, v = dotted_get(obj, key)
            if found:
                entry[name] = v
        entry["record"] = obj
        out[p.strip("/")] = entry
    return out, rel, warnings


def _inside(path: Path, root: Path) -> bool:
    """True when `path`, links resolved, lies inside `root`."""
    try:
        target, top = path.resolve(), root.resolve()
    except (OSError, RuntimeError):
        return False
    return target == top or top in target.parents


# --------------------------------------------------------------------------- one run directory

def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float)) and not isinstance(v, bool)


class ProfiledRun:
    """One run directory read as `profile` says; `read()` returns the ImportItem."""

    def __init__(self, profile: Profile, root: Path, run_dir: Path, shown_root: str,
                 manifest: dict[str, dict], taxonomy: Any = None) -> None:
        self.p = profile
        self.root = root
        self.dir = run_dir
        self.rel_dir = run_dir.relative_to(root).as_posix()
        self.shown_dir = shown_root if self.rel_dir == "." else f"{shown_root.rstrip('/')}/{self.rel_dir}"
        self.manifest = manifest.get(self.rel_dir)
        self.taxonomy = taxonomy
        self.shown_root = shown_root
        self.files: list[str] = self.list_files()
        self.used: set[str] = set()
        self.warnings: list[dict] = []
        self.unknown_modes: Counter = Counter()
        self.agent_by_name: dict[str, str] = {}
        self.agents: list[dict] = []
        self.principals: list[dict] = []
        self.leftover: Counter = Counter()
        self.leftover_text: Counter = Counter()
        self.notices: list[dict] = []
        #: top-level keys of the current record read by a JMESPath expression (kept whole in metadata)
        self.consumed: set[str] = set()
        #: names of the profile's `blocks` that apply to this run (metadata.profile_blocks)
        self.applied_blocks: list[str] = []

    def list_files(self) -> list[str]:
        files = []
        for dirpath, dirnames, filenames in os.walk(self.dir):
            dirnames.sort()
            for fn in sorted(filenames):
                if link_out_of_tree(Path(dirpath) / fn, self.root):
                    continue  # a symbolic link out of the tree is never read
                files.append((Path(dirpath) / fn).relative_to(self.dir).as_posix())
        return files

    def again(self, profile: Profile) -> ProfiledRun:
        """The same run read by another profile (the profile with the blocks that apply merged in)."""
        return ProfiledRun(profile, self.root, self.dir, self.shown_root, {self.rel_dir: self.manifest}
                           if self.manifest else {}, self.taxonomy)

    def path_fields(self) -> dict[str, Any] | None:
        """The fields of the run's path by the profile's `path` template (None: it does not fit)."""
        return parse_path(self.p.get("path"), self.rel_dir)

    def default_run_id(self) -> str | None:
        return self.dir.name if self.rel_dir != "." else None

    def source_doc(self) -> dict:
        """The run's metadata as its files hold it (what a block's `when.key` is read in)."""
        meta: dict[str, Any] = {}
        for rel, _ in self.by_role("metadata"):
            try:
                doc = self.doc(rel)
            except RunFormatError:
                continue
            if isinstance(doc, dict):
                for k, v in doc.items():
                    meta.setdefault(k, v)
        return meta

    def text(self, rel: str) -> str:
        """A text file of the run (scenario_text); raises UnicodeDecodeError."""
        return (self.dir / rel).read_bytes().decode("utf-8")

    # -- helpers
    def shown(self, rel: str) -> str:
        return f"{self.shown_dir}/{rel}"

    def warn(self, location: Any, message: str) -> None:
        self.warnings.append({"location": str(location), "message": message})

    def notice(self, location: Any, message: str) -> None:
        """An informational notice (nothing lost: kept verbatim in metadata), not a warning."""
        self.notices.append({"location": str(location), "message": message})

    def report_unmapped(self, location: Any, role: str, where: str, counts: Counter, texts: Counter) -> None:
        """Keys no profile key maps, kept in metadata: a warning for those that carry text (they
        would otherwise sit only in metadata), a notice for the rest and for the keys the profile
        keeps on purpose (``keep.<role>``)."""
        keep = set(((self.p.get("keep") or {}).get(role)) or ())
        warned = {k: n for k, n in counts.items() if texts.get(k) and k not in keep}
        noted = {k: n for k, n in counts.items() if k not in warned}
        if warned:
            self.warn(location, f"keys not mapped whose values carry text, kept in {where}: "
                      + ", ".join(f"{k} ({n})" for k, n in sorted(warned.items())))
        if noted:
            self.notice(location, f"kept in {where} (no text lost): "
                        + ", ".join(f"{k} ({n})" for k, n in sorted(noted.items())))

    def by_role(self, role: str) -> list[tuple[str, str | None]]:
        if not hasattr(self, "_roles"):
            self._roles = {rel: role_of(self.p, rel) for rel in self.files}
        return [(rel, r[1]) for rel, r in self._roles.items() if r and r[0] == role]

    def records(self, rel: str, role: str) -> list[tuple[Any, Location]]:
        self.used.add(rel)
        return read_records(self.dir / rel, self.shown(rel), (self.p.get("records") or {}).get(role))

    def doc(self, rel: str) -> Any:
        self.used.add(rel)
        return load_doc(self.dir / rel, self.shown(rel))

    def take(self, obj: dict, role: str, name: str) -> tuple[bool, Any]:
        """Pop the value of canonical field `name` from `obj` by the profile's keys for `role`
        (dotted; several candidates: the first present wins); falls back to the canonical name."""
        spec = ((self.p.get("keys") or {}).get(role) or {}).get(name)
        for key in key_candidates(spec) or [name]:
            if is_plain_path(key):
                found, value = dotted_pop(obj, key)
            else:  # a JMESPath expression: read; the record keeps the value (metadata), counted as mapped
                value = compile_path(key).search(obj)
                found = value is not None
                if found:
                    top = root_key(key)
                    if top:
                        self.consumed.add(top)
            if found:
                return True, value
        return False, None

    def vocab(self, kind: str, value: Any) -> Any:
        table = (self.p.get("values") or {}).get(kind) or {}
        if isinstance(value, str):
            if value in table:
                return table[value]
            low = value.lower()
            for k, v in table.items():
                if k.lower() == low:
                    return v
        return value

    def resolve(self, name: Any) -> Any:
        if isinstance(name, str):
            return self.agent_by_name.get(name, self.agent_by_name.get(name.lower(), name))
        return name

    # -- the run
    def read(self) -> ImportItem:
        if self.p.get("blocks"):
            return self.read_with_blocks()
        origins: dict[str, list[Location]] = {}
        try:
            raw = self.assemble(origins)
            run, problems = normalize_lenient(raw, Location(self.shown_dir))
        except (RunFormatError, ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
            if not isinstance(exc, RunFormatError):  # a layout this reader did not foresee: this run only
                exc = RunFormatError(None, f"cannot read this run directory with profile {self.p.name!r}: "
                                           f"{type(exc).__name__}: {exc}")
            err = exc if exc.where.file else RunFormatError(Location(self.shown_dir), exc.message,
                                                            run_id=exc.run_id, field=exc.field)
            more = [RunFormatError(self.origin(p.field, origins), p.message, run_id=exc.run_id, field=p.field)
                    for p in getattr(exc, "problems", [])]
            more += [RunFormatError(w["location"], w["message"], run_id=exc.run_id) for w in self.warnings]
            return ImportItem(error=err, source=self.shown_dir, unused_files=self.unused(), more_errors=more)
        for pr in problems:
            loc = self.origin(pr.field, origins)
            self.warnings.append({"location": loc, "message": pr.message, "field": pr.field})
        notices = [{**n, "run_id": run["run_id"]} for n in self.notices]
        return ImportItem(run=run, source=self.shown_dir, unused_files=self.unused(),
                          warnings=self.warnings_with_run(run["run_id"]), unknown_modes=dict(self.unknown_modes),
                          notices=notices)

    def read_with_blocks(self) -> ImportItem:
        """Per-family / per-task blocks: the run's family, task, scenario and run id are read with the
        profile without its blocks; the blocks whose `when` holds are merged in (later ones win,
        objects merge) and the run is read with that profile; their names go to
        ``metadata.profile_blocks``."""
        from app.ingest.profile import apply_blocks, without_blocks

        base = without_blocks(self.p)
        first = self.again(base)
        facts: dict[str, Any] = {"doc": first.source_doc()}
        try:
            raw = first.assemble({})
        except (RunFormatError, ValueError, TypeError, KeyError, AttributeError, OSError):
            raw = {}
        sc = raw.get("scenario") or {}
        path = (raw.get("metadata") or {}).get("path") or {}
        task = path.get("task")
        if task is None:
            task = next((facts["doc"][k] for k in ("task_id", "task") if _scalar(facts["doc"].get(k))), None)
        facts.update(family=sc.get("family"), scenario=sc.get("id"), run=raw.get("run_id"),
                     task=None if task is None else str(task))
        merged, names = apply_blocks(self.p, facts)
        run = self.again(merged)
        run.applied_blocks = names
        return run.read()

    def warnings_with_run(self, run_id: str | None) -> list[dict]:
        out = []
        for w in self.warnings:
            w = dict(w)
            if run_id is not None:
                w["run_id"] = run_id
            out.append(w)
        return out

    def origin(self, field: str | None, origins: dict[str, list[Location]]) -> str:
        m = re.match(r"^(events|checks|audits)\[(\d+)\]", field or "")
        if m and m[1] in origins and int(m[2]) < len(origins[m[1]]):
            return str(origins[m[1]][int(m[2])])
        return self.shown_dir

    def unused(self) -> list[str]:
        out = []
        for rel in self.files:
            if rel in self.used:
                continue
            r = role_of(self.p, rel)
            if r and r[0] == "ignore":
                continue
            out.append(self.shown(rel))
        return out

    def assemble(self, origins: dict[str, list[Location]]) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        meta_locs: list[str] = []
        for rel, _ in self.by_role("metadata"):
            doc = self.doc(rel)
            if not isinstance(doc, dict):
                self.warn(self.shown(rel), "a run metadata file must hold a JSON object; kept in "
                                           "metadata.unreadable_metadata")
                meta.setdefault("unreadable_metadata", []).append(doc)
                continue
            for k, v in doc.items():
                meta.setdefault(k, v)
            meta_locs.append(self.shown(rel))
        fields = self.path_fields()
        if fields is None:
            self.warn(self.shown_dir, f"the path does not fit the profile's template {self.p.get('path')!r}; "
                                      "scenario and run id come from the directories instead")
            fields = {}
        fields = dict(fields)
        raw: dict[str, Any] = {"metadata": {}}
        run_meta = raw["metadata"]
        if self.p.get("hidden"):  # fields annotators must not see (app.annotations.blind)
            run_meta["hidden_keys"] = list(self.p.get("hidden"))
        if self.applied_blocks:
            run_meta["profile_blocks"] = list(self.applied_blocks)
        found, value = self.take(meta, "metadata", "run_id")
        meta_run_id = str(value) if found and _scalar(value) else None
        if self.manifest:
            for k, v in self.manifest.items():
                if k not in ("run_id", "record"):
                    fields.setdefault(k, v)
            run_meta["manifest"] = self.manifest.get("record")
        if self.manifest and self.manifest.get("run_id"):
            raw["run_id"] = self.manifest["run_id"]
            if meta_run_id and meta_run_id != raw["run_id"]:
                run_meta["metadata_run_id"] = meta_run_id
        elif meta_run_id:
            raw["run_id"] = meta_run_id
        elif self.p.get("run_id") and fill(self.p.get("run_id"), fields):
            raw["run_id"] = fill(self.p.get("run_id"), fields)
        else:
            raw["run_id"] = self.default_run_id()
        if fields:
            run_meta["path"] = {k: v for k, v in fields.items() if _scalar(v)}
        found, status = self.take(meta, "metadata", "status")
        if found:
            raw["status"] = self.vocab("status", status)
        for name in ("started_at", "ended_at", "aggregate_score"):
            found, value = self.take(meta, "metadata", name)
            if found:
                raw[name] = value
        sc: dict[str, Any] = {}
        for name, target in (("family", "family"), ("scenario_id", "id"), ("title", "title"),
                             ("description", "description"), ("alignment", "alignment")):
            found, value = self.take(meta, "metadata", name)
            if found and name == "scenario_id" and isinstance(value, dict):
                for k, v in value.items():  # a whole scenario object in the run metadata
                    sc.setdefault(k, v)
                continue
            if found:
                sc[target] = value
                if name in ("family", "scenario_id") and _scalar(value):
                    fields.setdefault("family" if name == "family" else "scenario", str(value))
        self.agents_principals(meta)
        scenario_doc = self.scenario(sc, fields)
        self.private_state(scenario_doc, sc)
        if scenario_doc:
            sc.setdefault("metadata", {}).update(scenario_doc)
        raw["scenario"] = sc
        raw["principals"] = self.principals
        raw["agents"] = self.agents
        events, locs, turn_seq = self.events(raw)
        raw["events"] = events
        self.private_sections(sc)
        origins["events"] = locs
        self.metrics(raw)
        checks, audits, clocs, alocs = self.audits(raw, turn_seq)
        if checks:
            raw["checks"] = checks
        if audits:
            raw["audits"] = audits
        origins["checks"], origins["audits"] = clocs, alocs
        logs = [rel for rel, _ in self.by_role("log")]
        if logs:
            self.used.update(logs)
            run_meta["harness_logs"] = logs
        if meta:
            self.report_unmapped(", ".join(meta_locs) or self.shown_dir, "metadata", "run metadata",
                                 Counter(dict.fromkeys(meta, 1)),
                                 Counter({k: 1 for k, v in meta.items() if carries_text(v)}))
        for k, v in meta.items():  # whatever the metadata files hold that was not mapped
            if k in run_meta:
                run_meta.setdefault("run_metadata", {})[k] = v
            else:
                run_meta[k] = v
        return raw

    def scenario(self, sc: dict, fields: dict) -> dict:
        doc: dict = {}
        for rel, _ in self.by_role("scenario"):
            d = self.doc(rel)
            if isinstance(d, dict):
                for k, v in d.items():
                    doc.setdefault(k, v)
            else:
                self.warn(self.shown(rel), "a scenario file must hold a JSON object; kept as scenario.metadata.text")
                doc.setdefault("text", d)
        for name in ("id", "family", "title", "description", "alignment"):
            found, value = self.take(doc, "scenario", name)
            if found:
                sc.setdefault(name, value)
        for rel, _ in self.by_role("scenario_text"):
            self.used.add(rel)
            try:
                text = self.text(rel)
            except UnicodeDecodeError as exc:
                self.warn(self.shown(rel), f"not UTF-8 text ({exc.reason}); not used")
                continue
            if sc.get("description") is None:
                sc["description"] = text
                first = text.lstrip().split("\n", 1)[0]
                if "title" not in sc and first.startswith("# "):
                    sc["title"] = first[2:].strip()
        parents = list(PurePosixPath(self.rel_dir).parts[:-1])
        if "id" not in sc:
            sid = fill(self.p.get("scenario_id"), fields) if self.p.get("scenario_id") else None
            if sid is None and fields.get("scenario") and fields.get("family"):
                sid = f"{fields['family']}/{fields['scenario']}"
            sc["id"] = sid or ("/".join(parents) if parents else None)
        if "family" not in sc:
            fam = fields.get("family") or (fill(self.p.get("family"), fields) if self.p.get("family") else None)
            sc["family"] = fam or (parents[0] if parents else None)
        return doc

    # -- agents and principals
    def agents_principals(self, meta: dict) -> None:
        spec = self.p.get("agents")
        pspec = self.p.get("principals")
        principals: dict[str, dict] = {}
        if pspec and pspec.get("from") != "actors":
            found, value = dotted_pop(meta, pspec["from"])
            entries = self.entries(value) if found else []
            if not found:
                self.warn(self.shown_dir, f"no principals at {pspec['from']!r} in the run metadata")
            for key, entry in entries:
                pid = fill(pspec.get("id", "{key}"), {"key": key, **{k: v for k, v in entry.items() if _scalar(v)}})
                if not pid:
                    continue
                p: dict[str, Any] = {"id": pid}
                for name in ("name", "kind", "objective", "constraints"):
                    if pspec.get(name):
                        f, v = dotted_pop(entry, pspec[name])
                        if f:
                            p[name] = v
                if entry:
                    p["metadata"] = entry
                principals[pid] = p
        agents: list[dict] = []
        if isinstance(spec, list):  # several layouts: the first whose `from` this run has
            spec = next((sp for sp in spec if dotted_get(meta, sp["from"])[0]), spec[0])
        if spec and spec.get("from") == "actors":
            spec = None  # the actors seen in the log (`derive_actors`, once the events are read)
        if spec:
            found, value = dotted_pop(meta, spec["from"])
            if not found:
                self.warn(self.shown_dir, f"no agents at {spec['from']!r} in the run metadata")
            for key, entry in self.entries(value) if found else []:
                role = key
                if spec.get("role"):
                    f, v = dotted_pop(entry, spec["role"])
                    if f and _scalar(v):
                        role = str(v)
                values = {"key": key, "role": role, **{k: v for k, v in entry.items() if _scalar(v)}}
                aid = fill(spec.get("id", "{role}"), values) or role
                m = re.fullmatch(r"\{(\w+)\}", spec.get("id", "{role}"))
                if m and m[1] in entry:
                    entry.pop(m[1])
                a: dict[str, Any] = {"id": aid, "role": role}
                for name in ("model", "harness"):
                    if spec.get(name):
                        f, v = dotted_pop(entry, spec[name])
                        if f:
                            a[name] = v
                if spec.get("principal"):
                    f, v = dotted_pop(entry, spec["principal"])
                    if f and _scalar(v):
                        pid = str(v)
                        a["principal"] = pid
                        if pid not in principals:
                            principals[pid] = {"id": pid}
                            if spec.get("principal_name"):
                                f2, name = dotted_pop(entry, spec["principal_name"])
                                if f2:
                                    principals[pid]["name"] = name
                if entry:
                    a["metadata"] = entry
                agents.append(a)
                self.agent_by_name[aid] = aid
                self.agent_by_name.setdefault(role, aid)
                self.agent_by_name.setdefault(str(role).lower(), aid)
        self.agents = agents
        self.principals = list(principals.values())
        for p in self.principals:
            self.agent_by_name.setdefault(p["id"], p["id"])

    def entries(self, value: Any) -> list[tuple[str, dict]]:
        if isinstance(value, dict):
            return [(str(k), dict(v) if isinstance(v, dict) else {"value": v}) for k, v in value.items()]
        if isinstance(value, list):
            return [(str(i), dict(v)) for i, v in enumerate(value) if isinstance(v, dict)]
        return []

    def agent_for_file(self, param: str | None, rel: str) -> str:
        name = param or os.path.splitext(rel.rsplit("/", 1)[-1])[0]
        if name.endswith(".jsonl") or name.endswith(".json"):
            name = os.path.splitext(name)[0]
        resolved = self.resolve(name)
        if resolved == name and name not in self.agent_by_name:
            # the file names an agent the metadata does not list: add it rather than lose its events
            self.agents.append({"id": name})
            self.agent_by_name[name] = name
            self.warn(self.shown(rel), f"agent {name!r} (from the file name) is not in the run metadata; added")
        return resolved

    # -- private state
    def private_state(self, scenario_doc: dict, sc: dict | None = None) -> None:
        self.system_prompts = False
        for src in self.p.get("private_state") or []:
            kind = src["from"]
            if kind == "system_message":
                self.system_prompts = True
                continue
            for a in self.agents:
                values = {"role": a.get("role") or a["id"], "agent": a["id"], "principal": a.get("principal") or ""}
                if kind == "scenario":
                    key = fill(src.get("key", "private.{role}"), values)
                    if key is None:
                        continue
                    found, value = dotted_pop(scenario_doc, key)
                    if found:
                        self.put_state(a, src.get("as"), value)
                elif kind == "file":
                    glob = fill(src.get("glob", "private/{role}.json"), values)
                    for rel in self.files:
                        if glob and fnmatch.fnmatch(rel, glob):
                            try:
                                value = self.doc(rel)
                            except RunFormatError as exc:
                                self.warn(exc.location, f"private state not read: {exc.message}")
                                continue
                            self.put_state(a, src.get("as"), value)

    def private_sections(self, sc: dict) -> None:
        """``{from: scenario_text, heading: "Private ({role})"}``: each agent's section of the scenario
        text, cut out of what annotators see as the scenario and kept as the agent's private state
        (run after the events, so agents derived from the actors seen get theirs too)."""
        for src in self.p.get("private_state") or []:
            if src["from"] != "scenario_text":
                continue
            for a in self.agents:
                values = {"role": a.get("role") or a["id"], "agent": a["id"], "principal": a.get("principal") or ""}
                heading = fill(src.get("heading", "Private ({role})"), values)
                text = sc.get("description")
                if heading and isinstance(text, str):
                    rest, section = cut_section(text, heading)
                    if section is not None:
                        sc["description"] = rest
                        self.put_state(a, src.get("as") or "private_brief", section)

    def put_state(self, agent: dict, as_key: str | None, value: Any) -> None:
        state = agent.setdefault("private_state", {})
        if as_key:
            state[as_key] = value
        elif isinstance(value, dict):
            for k, v in value.items():
                state.setdefault(k, v)
        else:
            state.setdefault("private", value)

    # -- events
    def events(self, raw: dict) -> tuple[list[dict], list[Location], dict[int, int]]:
        entries: list[tuple[dict, Location, int]] = []  # (event, location, role rank)
        defaults_all = self.p.get("defaults") or {}
        chat = (self.p.get("values") or {}).get("chat_role") or {}
        for rank, role in enumerate(("conversation", "events", "trajectory")):
            base = {"conversation": {"kind": "message", "visibility": "shared"},
                    "events": {"actor": "system", "visibility": "private"},
                    "trajectory": {"visibility": "private"}}[role]
            base = {**base, **(defaults_all.get(role) or {})}
            for rel, param in self.by_role(role):
                owner = self.agent_for_file(param, rel) if role == "trajectory" else None
                try:
                    recs = self.records(rel, role)
                except RunFormatError as exc:
                    self.warn(exc.location, f"file not read: {exc.message}")
                    continue
                leftovers: Counter = Counter()
                leftover_text: Counter = Counter()
                for obj, loc in recs:
                    if isinstance(obj, Unreadable):
                        self.warn(loc, f"not valid JSON ({obj.reason}); the line is kept as a log event")
                        ev = {"kind": "log", "actor": "system", "visibility": "private", "content": obj.text,
                              "metadata": {"unreadable_line": True}}
                        entries.append((ev, loc, rank))
                        continue
                    if not isinstance(obj, dict):
                        obj = {"content": obj if isinstance(obj, str) else json.dumps(obj)}
                        self.warn(loc, "a record that is not an object; kept as a log event")
                        obj["kind"] = "log"
                    ev = self.event(dict(obj), role, base, owner, chat, loc)
                    if ev is None:
                        continue
                    left = ev.pop("_leftover", [])
                    leftovers.update(k for k, _ in left)
                    leftover_text.update(k for k, t in left if t)
                    for one in self.split_tool_calls(ev, loc):
                        entries.append((one, loc, rank))
                if leftovers:
                    self.report_unmapped(self.shown(rel), role, "each event's metadata", leftovers, leftover_text)
        # order: by time when every event has one, else by turn, else file order
        idx = list(range(len(entries)))
        tss = [ts_key(e[0].get("ts")) if isinstance(e[0].get("ts"), str) else None for e in entries]
        turns = [e[0].get("_turn") for e in entries]
        if entries and all(t is not None for t in tss):
            idx.sort(key=lambda i: (tss[i], entries[i][2]))
        elif entries and all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in turns):
            idx.sort(key=lambda i: (turns[i], entries[i][2]))
        elif any(t is not None for t in tss):  # some without a time: each follows its predecessor
            idx = ts_order([e[0].get("ts") if isinstance(e[0].get("ts"), str) else None for e in entries])
        ordered = [entries[i] for i in idx]
        ordered = self.indexed_artifacts(ordered)
        turn_seq: dict[int, int] = {}
        best_rank: dict[int, int] = {}
        events, locs = [], []
        for seq, (ev, loc, rank) in enumerate(ordered):
            ev["seq"] = seq
            t = ev.pop("_turn", None)
            if isinstance(t, (int, float)) and not isinstance(t, bool):
                t = int(t)
                if t not in turn_seq or rank < best_rank[t]:
                    turn_seq[t], best_rank[t] = seq, rank
                ev.setdefault("metadata", {})["turn"] = t
            events.append(ev)
            locs.append(loc)
        for ev, loc in zip(events, locs):
            pt = _as_turn(ev.pop("_parent_turn", None))
            if pt is not None:
                if isinstance(pt, int) and pt in turn_seq and turn_seq[pt] != ev["seq"]:
                    ev["parent_seq"] = turn_seq[pt]
                else:
                    ev.setdefault("metadata", {})["parent_turn"] = pt
                    self.warn(loc, f"parent turn {pt!r} is no turn of this run; kept in metadata.parent_turn")
        self.link_tool_results(events, locs)
        self.derive_actors(events)
        self.apply_visibility(events)
        self.hops(events, turn_seq, raw)
        self.artifacts(events, locs)
        return events, locs, turn_seq

    # -- one record, several events; tool results linked to their calls
    def split_tool_calls(self, ev: dict, loc: Location) -> list[dict]:
        """The event, then one ``tool_call`` event per item of its ``tool_calls`` (OpenAI-style
        ``{id, function: {name, arguments}}`` or ``{id, name, args|arguments|input}``); an
        assistant turn that is only tool calls (no text) becomes the calls alone."""
        calls = ev.pop("_tool_calls", None)
        if not calls:
            return [ev]
        out = [ev] if ev.get("content") not in (None, "") else []
        for c in calls:
            if not isinstance(c, dict):
                c = {"arguments": c}
            fn = c.get("function") if isinstance(c.get("function"), dict) else {}
            name = fn.get("name", c.get("name"))
            args = fn.get("arguments", c.get("arguments", c.get("args", c.get("input"))))
            cid = c.get("id", c.get("call_id", c.get("tool_call_id")))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            call = {"kind": "tool_call", "actor": ev.get("actor"), "visibility": "private", "recipients": [],
                    "content": f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})" if name else None,
                    "data": {"name": name, "arguments": args, "call_id": None if cid is None else str(cid)}}
            for k in ("ts", "_turn"):
                if k in ev:
                    call[k] = ev[k]
            if cid is not None:
                call["_call"] = str(cid)
            extra = {k: v for k, v in c.items() if k not in ("id", "call_id", "tool_call_id", "function", "name",
                                                              "arguments", "args", "input", "type")}
            if extra:
                call["metadata"] = {"tool_call": extra}
            out.append(call)
        if not out:
            out = [ev]
        return out

    def link_tool_results(self, events: list[dict], locs: list[Location]) -> None:
        calls: dict[str, int] = {}  # the latest call with each id so far (logs reuse ids across turns)
        for ev, loc in zip(events, locs):
            made = ev.pop("_call", None)
            if made is not None:
                calls[made] = ev["seq"]
            cid = ev.pop("_call_id", None)
            if cid is None:
                continue
            if "data" not in ev:
                ev["data"] = {}
            if isinstance(ev.get("data"), dict):
                ev["data"].setdefault("call_id", cid)
            if cid in calls and calls[cid] < ev["seq"]:
                ev["kind"] = "tool_result" if ev.get("kind") in (None, "message", "log") else ev["kind"]
                ev.setdefault("parent_seq", calls[cid])
            else:
                self.warn(loc, f"result of tool call {cid!r}, which no earlier event makes; kept in data.call_id")

    # -- agents and principals from the actors seen
    def rule_actor(self, who: str, owner: str | None) -> str:
        """A chat role's actor: ``agent`` (the file's agent), ``principal`` (that agent's principal,
        else the only principal), ``system``, or any agent or principal id."""
        if who == "agent":
            return owner or "system"
        if who == "system":
            return "system"
        if who == "principal":
            a = next((a for a in self.agents if a["id"] == owner), None)
            if a is not None and a.get("principal"):
                return a["principal"]
            pids = [p["id"] for p in self.principals]
            return pids[0] if len(pids) == 1 else (self.actor_principal_default() or "system")
        return self.resolve(who)

    def actor_principal_default(self) -> str | None:
        spec = self.p.get("agents")
        if isinstance(spec, dict) and spec.get("from") == "actors" and spec.get("principal"):
            return spec["principal"]
        return None

    def is_principal_actor(self, name: str) -> bool:
        pspec = self.p.get("principals") or {}
        if pspec.get("from") != "actors":
            return False
        for m in pspec.get("match") or []:
            if len(m) > 2 and m.startswith("/") and m.endswith("/"):
                if re.fullmatch(m[1:-1], name, re.I):
                    return True
            elif m.lower() == name.lower():
                return True
        return False

    def derive_actors(self, events: list[dict]) -> None:
        """``agents: {from: actors}``: every actor or recipient of the log that is not yet an agent,
        a principal or ``system`` becomes an agent (of ``agents.principal``, else of the only
        principal); with ``principals: {from: actors, match: [...]}`` the matching ones become
        principals instead (a simulated user, a customer)."""
        spec = self.p.get("agents")
        pspec = self.p.get("principals") or {}
        from_actors = isinstance(spec, dict) and spec.get("from") == "actors"
        known = {a["id"] for a in self.agents} | {p["id"] for p in self.principals} | {"system"}
        if not from_actors and pspec.get("from") != "actors":
            if not spec or self.p.builtin_names:
                return
            # agents from the run metadata: an actor the log names that the metadata does not list
            # is added as an agent (its events keep their actor), and said so
            added = []
            for ev in events:
                for name in _names_of(ev):
                    if isinstance(name, str) and name and name not in known and name not in added:
                        added.append(name)
            for name in added:
                self.agents.append({"id": name, "role": name})
                self.agent_by_name.setdefault(name, name)
            if added:
                self.notice(self.shown_dir, "actors the log names but the run metadata does not list, added as "
                            "agents: " + ", ".join(added))
            return
        seen: list[str] = []
        for ev in events:
            for name in _names_of(ev):
                if isinstance(name, str) and name and name not in known and name not in seen:
                    seen.append(name)
        for name in seen:
            if self.is_principal_actor(name):
                p = {"id": name}
                if pspec.get("name"):
                    p["name"] = pspec["name"]
                if pspec.get("kind"):
                    p["kind"] = pspec["kind"]
                self.principal_from_data(p, pspec)
                self.principals.append(p)
                self.agent_by_name.setdefault(name, name)
        if not from_actors:
            return
        default = spec.get("principal")
        if default and default not in {p["id"] for p in self.principals}:
            p = {"id": default}
            if spec.get("principal_name"):
                p["name"] = spec["principal_name"]
            self.principals.append(p)
        if not default and len(self.principals) == 1:
            default = self.principals[0]["id"]
        pids = {p["id"] for p in self.principals}
        for name in seen:
            if name in pids:
                continue
            a: dict[str, Any] = {"id": name, "role": name}
            if default:
                a["principal"] = default
            self.agents.append(a)
            self.agent_by_name.setdefault(name, name)

    def principal_from_data(self, p: dict, pspec: dict) -> None:
        """``name_key`` / ``objective_key``: the principal's display name and objective read from
        the run's source metadata (its id stays the actor's name: distinct keys for the two)."""
        from app.ingest.profile import path_get

        if not (pspec.get("name_key") or pspec.get("objective_key")):
            return
        doc = self.source_doc()
        for key, target in (("name_key", "name"), ("objective_key", "objective")):
            if not pspec.get(key):
                continue
            found, value = path_get(doc, pspec[key])
            if found and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                p[target] = str(value)
            elif found:
                p.setdefault("metadata", {})[target] = value
                self.warn(self.shown_dir, f"principals.{key} {pspec[key]!r} is no text; kept in the "
                                          f"principal's metadata.{target}")
            else:
                self.warn(self.shown_dir, f"principals.{key} {pspec[key]!r} is not in the run's metadata")

    # -- visibility rules
    def apply_visibility(self, events: list[dict]) -> None:
        """``visibility: [{when: {kind, actor, recipient, role}, visibility, recipients}]``, the
        first rule whose every condition holds wins: ``recipient`` is ``none``, ``any`` or a name;
        ``recipients: all_others`` addresses the event to every other agent and principal (a group
        chat), ``none`` to nobody."""
        rules = self.p.get("visibility") or []
        if not rules:
            return
        members = [a["id"] for a in self.agents] + [p["id"] for p in self.principals]
        roles = {a["id"]: a.get("role") for a in self.agents}

        def holds(cond: Any, value: Any) -> bool:
            wanted = [cond] if isinstance(cond, str) else list(cond)
            return value in wanted

        for ev in events:
            for rule in rules:
                w = rule["when"]
                if "kind" in w and not holds(w["kind"], ev.get("kind")):
                    continue
                if "actor" in w and not holds(w["actor"], ev.get("actor")):
                    continue
                if "role" in w and roles.get(ev.get("actor")) != w["role"]:
                    continue
                rec = ev.get("recipients") or []
                r = w.get("recipient")
                if r == "none" and rec or r == "any" and not rec or r not in (None, "none", "any") and r not in rec:
                    continue
                if rule.get("recipients") == "all_others":
                    ev["recipients"] = [m for m in members if m != ev.get("actor")]
                elif rule.get("recipients") == "none":
                    ev["recipients"] = []
                if rule.get("visibility"):
                    ev["visibility"] = rule["visibility"]
                break

    def event(self, obj: dict, role: str, base: dict, owner: str | None, chat: dict, loc: Location) -> dict | None:
        self.consumed = set()
        ev: dict[str, Any] = {}
        found, chat_role = self.take(obj, role, "chat_role")
        found_c, content = self.take(obj, role, "content")
        if found_c:
            if isinstance(content, list):  # chat content parts: [{type: text, text: ...}]
                texts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
                if texts and len(texts) == len(content):
                    content = "\n".join(texts)
            if isinstance(content, str) or content is None:
                ev["content"] = content
            else:
                ev["data"] = {"content": content}
        if found and isinstance(chat_role, str):
            rule = chat.get(chat_role, chat.get(chat_role.lower()))
            ev.setdefault("metadata", {})["chat_role"] = chat_role
            if rule == "skip":
                return None
            if rule == "private_state":
                if owner is not None and getattr(self, "system_prompts", False):
                    a = next((a for a in self.agents if a["id"] == owner), None)
                    if a is not None:
                        a.setdefault("private_state", {}).setdefault("system_prompt", content)
                        return None
                rule = {"kind": "state_update", "actor": "agent"}
            if isinstance(rule, dict):
                ev["kind"] = rule["kind"]
                who = rule.get("actor", "agent")
                if who in ("agent", "principal"):
                    ev["_who"] = who  # the record's own actor when it names one (below), else this
                else:
                    ev["actor"] = self.rule_actor(who, owner)
                if rule.get("visibility"):
                    ev["visibility"] = rule["visibility"]
            else:
                self.warn(loc, f"chat role {chat_role!r} is not in the profile's values.chat_role; "
                               "stored as a log event")
                ev["kind"] = "log"
                ev["actor"] = owner or "system"
        for name in ("seq", "ts", "kind", "actor", "recipients", "visibility", "data", "hop", "parent_seq"):
            f, v = self.take(obj, role, name)
            if f and name not in ev:
                ev[name] = v
            elif f:
                ev.setdefault("metadata", {})[f"original_{name}"] = v
        who = ev.pop("_who", None)
        if who is not None and "actor" not in ev:
            ev["actor"] = self.rule_actor(who, owner)
        f, calls = self.take(obj, role, "tool_calls")
        if f and calls:
            ev["_tool_calls"] = calls if isinstance(calls, list) else [calls]
        f, call_id = self.take(obj, role, "call_id")
        if f and _scalar(call_id) and call_id is not None:
            ev["_call_id"] = str(call_id)
        f, turn = self.take(obj, role, "turn")
        if f:
            ev["_turn"] = _as_turn(turn)
        f, pt = self.take(obj, role, "parent_turn")
        if f:
            ev["_parent_turn"] = pt
        if "seq" in ev:  # seqs are assigned from the order below (the original is kept)
            ev.setdefault("metadata", {})["original_seq"] = ev.pop("seq")
        if isinstance(ev.get("ts"), (int, float)) and not isinstance(ev["ts"], bool):
            try:
                ev["ts"] = epoch_to_iso(float(ev["ts"]))
            except (OverflowError, OSError, ValueError):
                pass  # left to the normalizer, which reports it and keeps the value
        if "kind" in ev:
            mapped = self.vocab("kind", ev["kind"])
            if mapped == "log" and mapped != ev["kind"]:
                ev.setdefault("metadata", {})["original_kind"] = ev["kind"]
            ev["kind"] = mapped
        if "visibility" in ev:
            ev["visibility"] = self.vocab("visibility", ev["visibility"])
        if "actor" in ev:
            ev["actor"] = self.resolve(ev["actor"])
        elif owner is not None:
            ev["actor"] = owner
        rec = ev.get("recipients")
        if isinstance(rec, str):
            rec = [rec]
        if isinstance(rec, list):
            ev["recipients"] = [self.resolve(r) for r in rec]
        for k, v in base.items():
            ev.setdefault(k, v)
        meta = ev.setdefault("metadata", {})
        for k, v in obj.items():  # what no key mapped stays with the event
            meta[f"unmapped_{k}" if k in meta else k] = v
        if not meta:
            del ev["metadata"]
        ev["_leftover"] = [(k, carries_text(v) and k not in self.consumed) for k, v in obj.items()]
        return ev

    def hops(self, events: list[dict], turn_seq: dict[int, int], raw: dict) -> None:
        extra = []
        for rel, _ in self.by_role("hops"):
            try:
                recs = self.records(rel, "hops")
            except RunFormatError as exc:
                self.warn(exc.location, f"file not read: {exc.message}")
                continue
            for obj, loc in recs:
                if isinstance(obj, Unreadable):
                    self.warn(loc, f"not valid JSON ({obj.reason}); kept in metadata.hops")
                    obj = {"unreadable_line": obj.text}
                if not isinstance(obj, dict):
                    extra.append(obj)
                    continue
                obj = dict(obj)
                fh, hop = self.take(obj, "hops", "hop")
                ft, turn = self.take(obj, "hops", "turn")
                fs, seq = self.take(obj, "hops", "seq")
                turn = _as_turn(turn)
                if ft and not fs:
                    seq = turn_seq.get(turn) if isinstance(turn, int) else None
                    if seq is None:
                        self.warn(loc, f"hop refers to turn {turn!r}, which no event has; kept in metadata.hops")
                if fh and isinstance(seq, int) and 0 <= seq < len(events) and isinstance(hop, int):
                    events[seq]["hop"] = hop
                    if obj:
                        events[seq].setdefault("metadata", {})["hop_record"] = obj
                else:
                    extra.append({**obj, **({"hop": hop} if fh else {}), **({"turn": turn} if ft else {})})
        if extra:
            raw["metadata"].setdefault("hops", []).extend(extra)

    def artifact_event(self, rel: str) -> dict:
        self.used.add(rel)
        return artifact_event(self.dir, rel)

    def indexed_artifacts(self, ordered: list[tuple[dict, Location, int]]) -> list[tuple[dict, Location, int]]:
        """Artifacts listed in an ``artifact_index`` file (file, turn, actor): each becomes an
        artifact event placed right after the event of its turn."""
        for rel, _ in self.by_role("artifact_index"):
            try:
                recs = self.records(rel, "artifact_index")
            except RunFormatError as exc:
                self.warn(exc.location, f"file not read: {exc.message}")
                continue
            base = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
            for obj, loc in recs:
                if not isinstance(obj, dict):
                    self.warn(loc, "an artifact index record must be an object; not used")
                    continue
                obj = dict(obj)
                f, name = self.take(obj, "artifact_index", "file")
                target = next((c for c in (f"{base}{name}", str(name)) if f and c in self.files), None)
                if target is None:
                    self.warn(loc, f"artifact {name!r} is not a file of this run directory; not used")
                    continue
                ev = self.artifact_event(target)
                fa, actor = self.take(obj, "artifact_index", "actor")
                if fa and actor is not None:
                    ev["actor"] = self.resolve(actor)
                fv, vis = self.take(obj, "artifact_index", "visibility")
                if fv:
                    ev["visibility"] = self.vocab("visibility", vis)
                ft, turn = self.take(obj, "artifact_index", "turn")
                turn = _as_turn(turn)
                if obj:
                    ev["metadata"] = dict(obj)
                pos = len(ordered)
                if ft:
                    ev.setdefault("metadata", {})["turn"] = turn
                    hits = [i for i, (e, _, _) in enumerate(ordered) if e.get("_turn") == turn]
                    if hits:
                        pos = hits[-1] + 1
                    else:
                        self.warn(loc, f"artifact refers to turn {turn!r}, which no event has; placed last")
                ordered.insert(pos, (ev, loc, 9))
        return ordered

    def artifacts(self, events: list[dict], locs: list[Location]) -> None:
        for rel, _ in self.by_role("artifact"):
            if rel in self.used:
                continue
            events.append({"seq": len(events), **self.artifact_event(rel)})
            locs.append(Location(self.shown(rel)))

    # -- metrics and per-principal outcomes
    def metrics(self, raw: dict) -> None:
        spec = self.p.get("metrics") or {}
        doc: dict = {}
        for rel, _ in self.by_role("metrics"):
            try:
                d = self.doc(rel)
            except RunFormatError as exc:
                self.warn(exc.location, f"file not read: {exc.message}")
                continue
            if isinstance(d, dict):
                for k, v in d.items():
                    doc.setdefault(k, v)
            else:
                self.warn(self.shown(rel), "a metrics file must hold a JSON object; kept in metadata.metrics")
                raw["metadata"]["metrics"] = d
                return
        if not doc:
            return
        raw["metadata"]["metrics"] = doc  # kept whole, verbatim
        if spec.get("aggregate_score"):
            found, v = _get_any(doc, spec["aggregate_score"])
            if found:
                raw["aggregate_score"] = v
            else:
                self.warn(self.shown_dir, f"metric {spec['aggregate_score']!r} (aggregate score) not found")
        if spec.get("status"):
            found, v = _get_any(doc, spec["status"])
            if found:
                raw["status"] = self.vocab("status", v)
        by_id = {p["id"]: p for p in raw["principals"]}
        for a in raw["agents"]:
            if a.get("principal") in by_id and a.get("role"):
                by_id.setdefault(a["role"], by_id[a["principal"]])
        for name, rule in (spec.get("principals") or {}).items():
            p = by_id.get(name)
            if p is None:
                self.warn(self.shown_dir, f"metrics name principal {name!r}, which this run does not have")
                continue
            outcome = p.setdefault("outcome", {})
            metrics = outcome.setdefault("metrics", {})
            for key in rule.get("metrics") or []:
                found, v = dotted_get(doc, key)
                if found:
                    metrics[key] = v
            if rule.get("score"):
                found, v = dotted_get(doc, rule["score"])
                if found:
                    outcome["score"] = v
                    metrics.setdefault(rule["score"], v)
            success = rule.get("success")
            if isinstance(success, str):
                found, v = dotted_get(doc, success)
                if found:
                    outcome["success"] = self.truth(v)
            elif isinstance(success, list) and success:
                results = [self.condition(doc, c, p, raw) for c in success]
                if all(r is not None for r in results):
                    outcome["success"] = all(results)
                for c in success:
                    found, v = dotted_get(doc, c["key"])
                    if found:
                        metrics.setdefault(c["key"], v)

    def truth(self, v: Any) -> Any:
        v = self.vocab("passed", v)
        if isinstance(v, str):
            low = v.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
        return v

    def condition(self, doc: dict, c: dict, principal: dict, raw: dict) -> bool | None:
        found, v = dotted_get(doc, c["key"])
        if not found:
            self.warn(self.shown_dir, f"metric {c['key']!r} (success of {principal['id']!r}) not found")
            return None
        if "equals" in c:
            return v == c["equals"]
        if "in" in c:
            return v in c["in"]
        if "not_in" in c:
            return v not in c["not_in"]
        if "empty" in c:
            return (not v) == c["empty"]
        if c.get("mentions_none"):
            names = {principal["id"]} | {a["id"] for a in raw["agents"] if a.get("principal") == principal["id"]} \
                | {a["role"] for a in raw["agents"] if a.get("principal") == principal["id"] and a.get("role")}
            items = v if isinstance(v, list) else [v]
            return not any(_mentions(item, names) for item in items if item)
        for op, fn in (("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b), ("lt", lambda a, b: a < b),
                       ("le", lambda a, b: a <= b)):
            if op in c:
                return fn(v, c[op]) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        return bool(v)

    # -- audits
    def audits(self, raw: dict, turn_seq: dict[int, int]) -> tuple[list, list, list, list]:
        spec = self.p.get("audits") or {}
        no_failure = {s.strip().lower() for s in spec.get("no_failure") or []}
        checks, audits, clocs, alocs = [], [], [], []
        audited_by: list[str] = []
        unmapped_audits: list[dict] = []
        for role in ("checks", "judgments", "audits"):
            for rel, level in self.by_role(role):
                stem = os.path.splitext(rel.rsplit("/", 1)[-1])[0]
                try:
                    recs = self.records(rel, "checks" if role == "checks" else "judgments")
                except RunFormatError as exc:
                    self.warn(exc.location, f"file not read: {exc.message}")
                    continue
                self.leftover = Counter()
                self.leftover_text = Counter()
                for obj, loc in recs:
                    if isinstance(obj, Unreadable):
                        self.warn(loc, f"not valid JSON ({obj.reason}); kept in metadata.unmapped_audits")
                        unmapped_audits.append({"unreadable_line": obj.text, "file": rel})
                        continue
                    if not isinstance(obj, dict):
                        self.warn(loc, "an audit record must be an object; kept in metadata.unmapped_audits")
                        unmapped_audits.append({"record": obj, "file": rel})
                        continue
                    obj = dict(obj)
                    kr = "checks" if role == "checks" else "judgments"
                    if role == "audits":  # mixed file: a record naming a check id and no mode is a check
                        has_check = self.take(dict(obj), "checks", "check_id")[0]
                        has_mode = self.take(dict(obj), "judgments", "mode")[0] or \
                            self.take(dict(obj), "judgments", "verdict")[0]
                        kr = "checks" if has_check and not has_mode else "judgments"
                    defaults = (self.p.get("defaults") or {}).get(kr) or {}
                    if kr == "checks":
                        item = self.check(obj, stem, level, defaults, turn_seq, loc)
                        if item is not None:
                            checks.append(item)
                            clocs.append(loc)
                    else:
                        for item in self.judgment(obj, stem, level, defaults, turn_seq, loc, no_failure,
                                                  audited_by, unmapped_audits, spec):
                            audits.append(item)
                            alocs.append(loc)
                if self.leftover:
                    self.report_unmapped(self.shown(rel), "checks" if role == "checks" else "judgments",
                                         "each record's metadata", self.leftover, self.leftover_text)
        if audited_by:
            raw["metadata"]["audited_by"] = sorted(set(audited_by))
        if unmapped_audits:
            raw["metadata"]["unmapped_audits"] = unmapped_audits
        return checks, audits, clocs, alocs

    def evidence(self, obj: dict, role: str, turn_seq: dict[int, int], loc: Location, meta: dict) -> list:
        out: list = []
        f, seqs = self.take(obj, role, "evidence")
        if f:
            out.extend(seqs if isinstance(seqs, list) else [seqs])
        f, turns = self.take(obj, role, "evidence_turns")
        if f:
            bad = []
            for t in turns if isinstance(turns, list) else [turns]:
                t = _as_turn(t)
                if isinstance(t, int) and not isinstance(t, bool) and t in turn_seq:
                    out.append(turn_seq[t])
                else:
                    bad.append(t)
            if bad:
                meta["unresolved_turns"] = bad
                self.warn(loc, f"turn(s) {bad} are no turn of this run; kept in metadata.unresolved_turns")
        return out

    def check(self, obj: dict, stem: str, level: str | None, defaults: dict, turn_seq: dict, loc: Location) -> dict:
        item: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        f, cid = self.take(obj, "checks", "check_id")
        item["check_id"] = str(cid) if f and _scalar(cid) else cid
        f, passed = self.take(obj, "checks", "passed")
        if f:
            t = self.truth(passed)
            if isinstance(t, bool) or t is None:
                item["passed"] = t
            else:
                meta["original_passed"] = passed
                self.warn(loc, f"check result {passed!r} is neither pass nor fail (add it to values.passed); "
                               "kept in metadata.original_passed")
        for name in ("level", "source", "detail"):
            f, v = self.take(obj, "checks", name)
            if f:
                item[name] = v if isinstance(v, str) or v is None else json.dumps(v)
        f, agent = self.take(obj, "checks", "agent")
        if f:
            item["agent"] = self.resolve(agent)
        item["evidence"] = self.evidence(obj, "checks", turn_seq, loc, meta)
        for k, v in defaults.items():
            item.setdefault(k, v)
        if item.get("level") is None and level is None and isinstance(item.get("check_id"), str):
            m = re.match(r"^(L[0-2])\b", item["check_id"], re.I)  # check ids such as "L1.no_pii"
            level = m[1].upper() if m else None
        item.setdefault("level", level)
        item.setdefault("source", stem)
        self.leftover.update(obj)
        self.leftover_text.update(k for k, v in obj.items() if carries_text(v) and k not in self.consumed)
        meta.update(obj)
        item["metadata"] = meta
        return item

    def judgment(self, obj: dict, stem: str, level: str | None, defaults: dict, turn_seq: dict, loc: Location,
                 no_failure: set[str], audited_by: list, unmapped: list, spec: dict) -> list[dict]:
        base: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        f, source = self.take(obj, "judgments", "source")
        base["source"] = source if f and isinstance(source, str) else (defaults.get("source") or spec.get("source")
                                                                        or stem)
        f, lv = self.take(obj, "judgments", "level")
        base["level"] = lv if f else (defaults.get("level") or level or "L2")
        f, agent = self.take(obj, "judgments", "agent")
        if f:
            base["agent"] = self.resolve(agent)
        f, note = self.take(obj, "judgments", "note")
        if f:
            base["note"] = note if isinstance(note, str) or note is None else json.dumps(note)
        base["evidence"] = self.evidence(obj, "judgments", turn_seq, loc, meta)
        fm, modes = self.take(obj, "judgments", "mode")
        fv, verdict = self.take(obj, "judgments", "verdict")
        self.leftover.update(obj)
        self.leftover_text.update(k for k, v in obj.items() if carries_text(v) and k not in self.consumed)
        meta.update(obj)
        if fv:
            meta["verdict"] = verdict
        mode_list = [m for m in (modes if isinstance(modes, list) else [modes]) if m not in (None, "")] if fm else []
        is_clean = (isinstance(verdict, str) and verdict.strip().lower() in no_failure) or \
            (fm and not mode_list and fv) or \
            any(isinstance(m, str) and m.strip().lower() in no_failure for m in mode_list)
        if is_clean and all(not isinstance(m, str) or m.strip().lower() in no_failure for m in mode_list):
            audited_by.append(base["source"])  # an explicit "no failure found" by this judge
            return []
        out = []
        for m in mode_list:
            code = self.mode_code(m, spec)
            if code is None:
                self.unknown_modes[str(m)] += 1
                self.warn(loc, f"mode {m!r} matches nothing in the taxonomy (add it to audits.modes); "
                               "the judgment is kept in metadata.unmapped_audits")
                unmapped.append({**base, "mode": m, "metadata": meta})
                continue
            out.append({**base, "mode": code, "metadata": dict(meta, **({"original_mode": m} if m != code else {}))})
        if not mode_list and not is_clean:
            self.warn(loc, "a judgment with neither a mode nor a verdict; kept in metadata.unmapped_audits")
            unmapped.append({**base, "metadata": meta})
        return out

    def mode_code(self, name: Any, spec: dict) -> str | None:
        if not isinstance(name, str):
            return None
        table = spec.get("modes") or {}
        name2 = table.get(name, table.get(name.strip().lower(), name))
        if self.taxonomy is None:
            return name2
        try:
            return self.taxonomy.mode(name2)["code"]
        except LookupError:
            return None


def _get_any(doc: Any, spec: Any) -> tuple[bool, Any]:
    for key in key_candidates(spec):
        found, v = dotted_get(doc, key)
        if found:
            return True, v
    return False, None


def _as_turn(value: Any) -> Any:
    """A turn number given as text (``"3"``) is the number 3; anything else is left as it is."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _mentions(item: Any, names: set[str]) -> bool:
    if isinstance(item, str):
        low = item.lower()
        return any(n and n.lower() in low for n in names)
    if isinstance(item, dict):
        return any(_mentions(v, names) for v in item.values())
    if isinstance(item, list):
        return any(_mentions(v, names) for v in item)
    return False


def load_taxonomy(key: str | None):
    """The built-in taxonomy `key` (default a2-failures) as a TaxonomyDef, or None."""
    from app.taxonomies.loader import builtin_taxonomy_files, load_taxonomy_file

    key = key or "a2-failures"
    for path in builtin_taxonomy_files():
        try:
            t = load_taxonomy_file(path)
        except Exception:  # noqa: BLE001 - a broken file is reported by the taxonomy commands
            continue
        if t.key == key:
            return t
    return None
