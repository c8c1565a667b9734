"""Per-run directory trees, as released with the A²-Failures run logs.

No published spec fixes the file names, so this module is our working definition. A directory
is a *run directory* when it directly holds a metadata file (``run.json``, ``metadata.json``,
``run_metadata.json``, ``run.yaml`` or a file the mapping names as ``metadata``); every file
below it belongs to that run (run directories do not nest). Runs usually sit at
``family/task/.../run_id/``; when no scenario is given the path supplies it (scenario id = the
directories above the run, family = the first of them) and the directory name supplies a missing
``run_id``.

Recognised names inside a run directory (case-insensitive; role in brackets):

* ``run.json``, ``metadata.json``, ``run_metadata.json``, ``run.yaml`` [metadata]: canonical
  top-level fields (anything unknown goes to run metadata); several are merged, the first in
  this order wins a clash and the losing values are kept under ``metadata.conflicting_metadata``.
* ``scenario.json`` / ``scenario.yaml`` [scenario]: the scenario object.
  ``scenario.md``, ``task.md``, ``scenario.txt``, ``task.txt`` [scenario_text]: the scenario
  description (used when the scenario object has none; a leading ``# heading`` becomes the title
  when no title is given).
* ``principals.json``, ``agents.json`` [principals, agents]: an array, or ``{"principals": [...]}``.
* ``events.jsonl`` / ``events.json`` [events]: canonical events of any kind.
* ``conversation.json(l)``, ``messages.json(l)`` [conversation]: events defaulting to
  ``kind: message``, ``visibility: shared``.
* ``trajectories/<role>.json(l)``, ``trajectory_<role>.json(l)`` [trajectory]: events defaulting
  to ``actor: <role>`` (an agent id, or the agent whose role it is) and ``visibility: private``.
* ``hops.jsonl`` / ``hops.json`` [hops]: ``{"seq": n, "hop": h}`` sets event n's hop; records
  without a seq are kept in run ``metadata.hops``.
* ``metrics.json``, ``outcome.json``, ``outcomes.json`` [metrics]: ``aggregate_score``,
  ``status`` and ``outcomes`` (``{principal_id: {success, score, metrics}}``) fill the run;
  other keys go to run ``metadata.metrics``.
* ``checks.json(l)`` [checks]: deterministic pass/fail checks (``check_id``, ``passed``, no mode),
  next to the audits; a missing ``source`` defaults to the file stem.
* audits [audits]: ``l0.json(l)`` (level L0), ``l1.json(l)`` (L1), ``l2*.json(l)`` and
  ``judgments*.json(l)`` (L2), ``audit*.json(l)``; at the top of the run directory or in an
  ``audits/``, ``judgments/`` or ``evals/`` subdirectory. An array, JSON Lines, or
  ``{"audits"|"judgments"|"results": [...]}``; a missing ``source`` defaults to the file stem.
* ``artifacts/**`` [artifact]: an event line may say ``"content_file": "artifacts/x.txt"`` to
  take its content from that file; an artifact file no event refers to becomes an ``artifact``
  event by ``system`` (private, appended at the end; text content when it is UTF-8 up to 1 MiB,
  ``data: {path, size, media_type}``).
* ``*.log`` anywhere [log]: harness logs, referenced (not inlined) in run ``metadata.harness_logs``.

Event files accept a few common aliases when the canonical key is absent: ``type`` -> kind (a
value that is not a canonical kind becomes ``log``, the original kept in ``metadata.type``),
``from``/``sender``/``speaker``/``agent``/``role``/``author`` -> actor (a role name resolves to the
agent holding it), ``to``/``recipient`` -> recipients, ``text``/``message`` -> content,
``timestamp``/``time``/``created_at`` -> ts. When no event of the run has a seq, seqs follow
timestamps (stable, files in the order above).

A mapping file (YAML or JSON) names other files: ``{"files": {GLOB: ROLE}}`` or just
``{GLOB: ROLE}``; globs match the path relative to the run directory (a glob without ``/`` also
matches the bare file name) and are tried before the built-in names. Roles: the bracketed names
above, ``trajectory:<agent>``, ``audits:<level>``, and ``ignore`` (deliberately unused).

Every file that nobody read is reported in `ImportItem.unused_files`. Files outside run
directories are handed to a `loose` callback (the dispatcher imports canonical/wire files found
there); those it cannot read are reported as unused too.

Trees are read leniently (`app.ingest.lenient`): a run is rejected only when it has no id or no
events; anything else that does not map is kept (``metadata``, ``original_<key>``, ``log``
events) and listed in `ImportItem.warnings` with its file and line. A root manifest
(``*manifest*``/``*index*`` JSON whose records map run-directory paths to run ids) is read as a
manifest (the run id of a directory whose metadata gives none), never as runs.

Import profiles (`app.ingest.profile`, docs/importing.md) describe other layouts; the names
above are the built-in profile ``a2annotate``. `iter_tree(..., profile=None)` uses the profile
`app.ingest.inspect.infer_profile` infers (this module's names when the tree uses them), and a
profile that is not the built-in one is read by `app.ingest.profiled`.
"""
from __future__ import annotations

import fnmatch
import json
import math
import mimetypes
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from app.ingest.canonical import EVENT_KINDS, Location, RunFormatError, epoch_to_iso, ts_order
from app.ingest.items import ImportItem
from app.ingest.lenient import normalize_lenient
from app.ingest.readers.base import Reader, Sniff
from app.ingest.safety import safejson, safeyaml

METADATA_NAMES = ("run.json", "metadata.json", "run_metadata.json", "run.yaml", "run.yml")
_TOP_NAMES = {
    "scenario.json": "scenario", "scenario.yaml": "scenario", "scenario.yml": "scenario",
    "scenario.md": "scenario_text", "task.md": "scenario_text", "scenario.txt": "scenario_text",
    "task.txt": "scenario_text",
    "principals.json": "principals", "agents.json": "agents",
    "events.jsonl": "events", "events.json": "events",
    "conversation.json": "conversation", "conversation.jsonl": "conversation",
    "messages.json": "conversation", "messages.jsonl": "conversation",
    "hops.jsonl": "hops", "hops.json": "hops",
    "metrics.json": "metrics", "outcome.json": "metrics", "outcomes.json": "metrics",
}
ROLES = ("metadata", "scenario", "scenario_text", "principals", "agents", "events", "conversation", "hops",
         "trajectory", "metrics", "audits", "checks", "artifact", "log", "ignore")
AUDIT_DIRS = ("audits", "audit", "judgments", "evals", "eval")
SIDECAR_SUFFIXES = (".context.json", ".context.jsonl", ".agent-card.json")
MAX_INLINE_ARTIFACT = 1 << 20
_EVENT_ALIASES = (("kind", ("type", "event_type")),
                  ("actor", ("from", "sender", "speaker", "agent", "role", "author")),
                  ("recipients", ("to", "recipient")),
                  ("content", ("text", "message")),
                  ("ts", ("timestamp", "time", "created_at")))
_AUDIT_ALIASES = (("mode", ("failure_mode", "code")), ("source", ("judge", "checker")),
                  ("note", ("rationale", "reason", "explanation")), ("evidence", ("evidence_seqs",)))
_INDEXED_FIELD = re.compile(r"^(events|audits|checks|principals|agents)\[(\d+)\]")


# --------------------------------------------------------------------------- mapping file

class MappingError(ValueError):
    """A mapping file that cannot be used (unreadable, wrong shape, unknown role)."""


@dataclass
class Mapping:
    """Glob -> role rules from a mapping file; `path` is the file itself (never reported)."""

    rules: list[tuple[str, str, str | None]] = field(default_factory=list)
    path: str | None = None

    def role_of(self, rel: str) -> tuple[str, str | None] | None:
        name = rel.rsplit("/", 1)[-1]
        for glob, role, param in self.rules:
            if fnmatch.fnmatch(rel, glob) or ("/" not in glob and fnmatch.fnmatch(name, glob)):
                return role, param
        return None


def load_mapping(mapping: str | os.PathLike | dict | Mapping | None) -> Mapping:
    """Read a mapping (path to a YAML/JSON file, or a dict); raises MappingError when malformed."""
    if mapping is None:
        return Mapping()
    if isinstance(mapping, Mapping):
        return mapping
    path = None
    if isinstance(mapping, dict):
        data: Any = mapping
    else:
        path = os.fspath(mapping)
        try:
            data = safeyaml.load_file(path)  # YAML is a superset of JSON; within the limits
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise MappingError(f"mapping file {path}: cannot read it: {exc}") from exc
    where = f"mapping file {path}" if path else "mapping"
    if isinstance(data, dict) and isinstance(data.get("files"), dict):
        data = data["files"]
    if not isinstance(data, dict):
        raise MappingError(f"{where}: expected an object of glob: role")
    rules = []
    for glob, role in data.items():
        if not isinstance(glob, str) or not isinstance(role, str):
            raise MappingError(f"{where}: glob and role must be strings ({glob!r}: {role!r})")
        base, _, param = role.partition(":")
        if base not in ROLES or (param and base not in ("trajectory", "audits", "checks")):
            raise MappingError(f"{where}: unknown role {role!r} for {glob!r} "
                             f"(expected one of {', '.join(ROLES)}, trajectory:<agent>, audits:<level>)")
        rules.append((glob, base, param or None))
    return Mapping(rules, path)


def builtin_role(rel: str) -> tuple[str, str | None] | None:
    """The role of a file (path relative to its run directory) by its recognised name."""
    parts = rel.split("/")
    low = parts[-1].lower()
    stem, ext = os.path.splitext(low)
    top = parts[0].lower()
    depth = len(parts) - 1
    if depth >= 1 and top == "artifacts":
        return "artifact", None
    if ext == ".log":
        return "log", None
    if depth == 1 and top in ("trajectories", "trajectory") and ext in (".jsonl", ".json"):
        return "trajectory", os.path.splitext(parts[-1])[0]
    if ext in (".json", ".jsonl") and (depth == 0 or (depth == 1 and top in AUDIT_DIRS)):
        if stem in ("l0", "l1"):
            return "audits", stem.upper()
        if stem.startswith(("l2", "judgment")):
            return "audits", "L2"
        if stem.startswith("audit"):
            return "audits", None
        if stem == "checks" or stem.startswith(("checks_", "checks-")):
            return "checks", None
    if depth == 0:
        if low in METADATA_NAMES:
            return "metadata", None
        if low in _TOP_NAMES:
            return _TOP_NAMES[low], None
        if low.startswith("trajectory_") and ext in (".jsonl", ".json"):
            return "trajectory", os.path.splitext(parts[-1])[0][len("trajectory_"):]
    return None


def is_run_dir(filenames: list[str], mapping: Mapping) -> bool:
    """True when one of `filenames` (directly in the directory) is a metadata file."""
    for name in filenames:
        role = mapping.role_of(name) or builtin_role(name)
        if role and role[0] == "metadata":
            return True
    return False


# --------------------------------------------------------------------------- file loading

def artifact_event(run_dir: Path, rel: str) -> dict[str, Any]:
    """The private `artifact` event (no seq) of a filed artifact at `rel` in `run_dir`: its text
    inline when it is UTF-8 and at most MAX_INLINE_ARTIFACT bytes, its path, size and media type."""
    path = run_dir / rel
    size = path.stat().st_size
    content = None
    if size <= MAX_INLINE_ARTIFACT:
        try:
            content = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            content = None
    return {"kind": "artifact", "actor": "system", "visibility": "private", "content": content,
            "data": {"path": rel, "size": size, "media_type": mimetypes.guess_type(rel)[0]}}


def load_doc(path: Path, shown: str) -> Any:
    """Parse a whole JSON (or YAML) file within the input limits; RunFormatError names file and line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RunFormatError(Location(shown), f"not UTF-8 text: {exc.reason}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return safeyaml.load(text)
        except yaml.YAMLError as exc:
            raise RunFormatError(Location(shown), f"not valid YAML: {exc}") from None
    try:
        return safejson.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFormatError(Location(shown, exc.lineno), f"not valid JSON: {exc.msg} (column {exc.colno})") \
            from None


def _records(path: Path, shown: str, list_keys: tuple[str, ...]) -> Iterator[tuple[Any, Location]]:
    """Records of a JSON Lines file (one a line) or a JSON file (an array, an object with one of
    `list_keys` holding the array, or a single record)."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        with open(path, "rb") as f:
            for lineno, raw in enumerate(safejson.bounded_lines(f), 1):
                if isinstance(raw, safejson.LineTooLong):
                    raise RunFormatError(Location(shown, lineno), f"input limit: a line of {raw.size} bytes "
                                                                  "(limit MAX_RECORD_BYTES)")
                raw = raw.strip()
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if not raw:
                    continue
                try:
                    yield safejson.loads(raw.decode("utf-8")), Location(shown, lineno)
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise RunFormatError(Location(shown, lineno), f"not valid JSON: {exc}") from None
        return
    doc = load_doc(path, shown)
    if isinstance(doc, dict):
        for key in list_keys:
            if isinstance(doc.get(key), list):
                doc = doc[key]
                break
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield item, Location(shown, pointer=f"[{i}]")
    else:
        yield doc, Location(shown)


def _ts_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        try:
            return epoch_to_iso(float(value))
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _apply_aliases(entry: dict, aliases: tuple) -> dict:
    out = dict(entry)
    for key, names in aliases:
        if key in out:
            continue
        for name in names:
            if name in out and (isinstance(out[name], str) or (key == "recipients" and isinstance(out[name], list))
                                or (key == "evidence" and isinstance(out[name], list))):
                out[key] = out.pop(name)
                break
    return out


# --------------------------------------------------------------------------- one run directory

class _RunDir:
    def __init__(self, root: Path, run_dir: Path, display_root: str, mapping: Mapping) -> None:
        self.root = root
        self.dir = run_dir
        self.mapping = mapping
        rel_dir = run_dir.relative_to(root).as_posix()
        self.shown_dir = display_root if rel_dir == "." else f"{display_root.rstrip('/')}/{rel_dir}"
        self.files: list[str] = []
        self.links_out: list[str] = []  # symbolic links leading out of the tree: never read
        for dirpath, dirnames, filenames in os.walk(run_dir):
            dirnames.sort()
            for fn in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
                rel = (Path(dirpath) / fn).relative_to(run_dir).as_posix()
                if link_out_of_tree(Path(dirpath) / fn, root):
                    self.links_out.append(rel)
                elif fn in filenames:
                    self.files.append(rel)
        self.used: set[str] = set()
        self.agents: list[dict] = []
        self.principal_ids: set[str] = set()
        self.manifest_id: str | None = None
        self.warnings: list[dict] = []

    def warn(self, where: Location | str, message: str) -> None:
        self.warnings.append({"location": str(where), "message": message})

    def shown(self, rel: str) -> str:
        return f"{self.shown_dir}/{rel}"

    def by_role(self, role: str) -> list[tuple[str, str | None]]:
        out = []
        for rel in self.files:
            r = self.mapping.role_of(rel) or builtin_role(rel)
            if r and r[0] == role:
                param = r[1]
                if role == "trajectory" and param is None:
                    stem = os.path.splitext(rel.rsplit("/", 1)[-1])[0]
                    param = stem[len("trajectory_"):] if stem.lower().startswith("trajectory_") else stem
                out.append((rel, param))
        if role == "metadata":
            order = {n: i for i, n in enumerate(METADATA_NAMES)}
            out.sort(key=lambda x: order.get(x[0].lower(), len(order)))
        return out

    def doc(self, rel: str) -> Any:
        self.used.add(rel)
        return load_doc(self.dir / rel, self.shown(rel))

    def records(self, rel: str, list_keys: tuple[str, ...] = ()) -> Iterator[tuple[Any, Location]]:
        self.used.add(rel)
        return _records(self.dir / rel, self.shown(rel), list_keys)

    def resolve_actor(self, name: str) -> str:
        if name in self.principal_ids or any(a.get("id") == name for a in self.agents):
            return name
        holders = [a["id"] for a in self.agents if a.get("role") == name and isinstance(a.get("id"), str)]
        return holders[0] if len(holders) == 1 else name

    def unused(self) -> list[str]:
        return [f"{self.shown(rel)} (symbolic link out of the tree: not followed)" for rel in self.links_out] + \
            self._unused()

    def _unused(self) -> list[str]:
        out = []
        for rel in self.files:
            if rel in self.used:
                continue
            r = self.mapping.role_of(rel)
            if r and r[0] == "ignore":
                continue
            path = self.dir / rel
            if self.mapping.path and os.path.abspath(path) == os.path.abspath(self.mapping.path):
                continue
            out.append(self.shown(rel))
        return out

    # -- assembling the raw run
    def read(self) -> ImportItem:
        origins: dict[str, list[Location]] = {}
        try:
            raw = self.assemble(origins)
            if raw.get("run_id") == self.dir.name and self.manifest_id:
                raw["run_id"] = self.manifest_id
            run, problems = normalize_lenient(raw, Location(self.shown_dir),
                                              require_events=not isinstance(raw.get("events"), list))
        except RunFormatError as exc:
            more = [self.remap(RunFormatError(None, p.message, run_id=exc.run_id, field=p.field), origins)
                    for p in getattr(exc, "problems", [])]
            more += [RunFormatError(w["location"], w["message"], run_id=exc.run_id) for w in self.warnings]
            return ImportItem(error=self.remap(exc, origins), source=self.shown_dir, unused_files=self.unused(),
                              more_errors=more)
        except (TypeError, ValueError, KeyError, AttributeError, OSError) as exc:  # unforeseen shapes: this run only
            err = RunFormatError(Location(self.shown_dir), f"cannot read this run directory: {type(exc).__name__}: "
                                                           f"{exc}"[:300])
            return ImportItem(error=err, source=self.shown_dir, unused_files=self.unused())
        warnings = [dict(w, run_id=run["run_id"]) for w in self.warnings]
        for pr in problems:
            err = self.remap(RunFormatError(None, pr.message, field=pr.field), origins)
            warnings.append({"location": str(err.where), "field": pr.field, "message": pr.message,
                             "run_id": run["run_id"]})
        return ImportItem(run=run, source=self.shown_dir, unused_files=self.unused(), warnings=warnings)

    def remap(self, err: RunFormatError, origins: dict[str, list[Location]]) -> RunFormatError:
        m = _INDEXED_FIELD.match(err.field or "")
        if m and m[1] in origins and int(m[2]) < len(origins[m[1]]):
            return RunFormatError(origins[m[1]][int(m[2])], err.message, run_id=err.run_id, field=err.field)
        if err.where.file is None:
            return RunFormatError(Location(self.shown_dir), err.message, run_id=err.run_id, field=err.field)
        return err

    def assemble(self, origins: dict[str, list[Location]]) -> dict[str, Any]:
        raw: dict[str, Any] = {}
        conflicts: dict[str, dict] = {}
        for rel, _ in self.by_role("metadata"):
            doc = self.doc(rel)
            if not isinstance(doc, dict):
                raise RunFormatError(Location(self.shown(rel)), "a run metadata file must hold a JSON object")
            for k, v in doc.items():
                if k not in raw:
                    raw[k] = v
                elif k == "metadata" and isinstance(raw[k], dict) and isinstance(v, dict):
                    for mk, mv in v.items():
                        if mk not in raw[k]:
                            raw[k][mk] = mv
                        elif raw[k][mk] != mv:
                            conflicts.setdefault(rel, {}).setdefault("metadata", {})[mk] = mv
                elif raw[k] != v:
                    conflicts.setdefault(rel, {})[k] = v
        meta = raw.get("metadata")
        if meta is None:
            meta = raw["metadata"] = {}
        if conflicts and isinstance(meta, dict):
            meta["conflicting_metadata"] = conflicts
        rid = raw.get("run_id")
        if rid is not None and not (isinstance(rid, str) and rid.strip()) and \
                not (isinstance(rid, int) and not isinstance(rid, bool)):
            if isinstance(meta, dict):
                meta["original_run_id"] = rid
            self.warn(Location(self.shown_dir), f"run_id {str(rid)[:60]!r} is not an id; the directory name "
                                                "is used (the value kept in metadata.original_run_id)")
            rid = None
        if rid is None:
            raw["run_id"] = self.dir.name
        self.scenario(raw)
        self.principals_agents(raw, origins)
        self.metrics(raw)
        self.events(raw, origins)
        self.audits(raw, origins)
        self.checks(raw, origins)
        logs = [rel for rel, _ in self.by_role("log")]
        if logs:
            self.used.update(logs)
            if isinstance(meta, dict):
                meta.setdefault("harness_logs", [])
                if isinstance(meta["harness_logs"], list):
                    meta["harness_logs"].extend(logs)
        return raw

    def scenario(self, raw: dict) -> None:
        sc = raw.get("scenario")
        sc = dict(sc) if isinstance(sc, dict) else ({} if sc is None else sc)
        for rel, _ in self.by_role("scenario"):
            doc = self.doc(rel)
            if not isinstance(doc, dict):
                raise RunFormatError(Location(self.shown(rel)), "a scenario file must hold a JSON object")
            if isinstance(sc, dict):
                sc.update(doc)
        for rel, _ in self.by_role("scenario_text"):
            self.used.add(rel)
            try:
                text = (self.dir / rel).read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RunFormatError(Location(self.shown(rel)), f"not UTF-8 text: {exc.reason}") from None
            if isinstance(sc, dict) and sc.get("description") is None:
                sc["description"] = text
                first = text.lstrip().split("\n", 1)[0]
                if "title" not in sc and first.startswith("# "):
                    sc["title"] = first[2:].strip()
        if isinstance(sc, dict):
            parents = PurePosixPath(self.dir.relative_to(self.root).as_posix()).parts[:-1]
            if parents:
                sc.setdefault("id", "/".join(parents))
                sc.setdefault("family", parents[0])
        if sc != {}:
            raw["scenario"] = sc

    def principals_agents(self, raw: dict, origins: dict[str, list[Location]]) -> None:
        for key in ("principals", "agents"):
            files = self.by_role(key)
            if not files:
                continue
            items: list = []
            locs: list[Location] = []
            for rel, _ in files:
                for obj, loc in self.records(rel, (key,)):
                    items.append(obj)
                    locs.append(loc)
            raw[key] = items
            origins[key] = locs
        agents = raw.get("agents")
        self.agents = [a for a in agents if isinstance(a, dict)] if isinstance(agents, list) else []
        principals = raw.get("principals")
        if isinstance(principals, list):
            self.principal_ids = {p["id"] for p in principals if isinstance(p, dict) and isinstance(p.get("id"), str)}

    def metrics(self, raw: dict) -> None:
        for rel, _ in self.by_role("metrics"):
            doc = self.doc(rel)
            if not isinstance(doc, dict):
                raise RunFormatError(Location(self.shown(rel)), "a metrics file must hold a JSON object")
            doc = dict(doc)
            if "aggregate_score" in doc:
                raw["aggregate_score"] = doc.pop("aggregate_score")
            if "status" in doc:
                raw["status"] = doc.pop("status")
            outcomes = doc.pop("outcomes", None)
            if outcomes is None and isinstance(doc.get("principals"), dict):
                outcomes = doc.pop("principals")
            if outcomes is not None:
                self.outcomes(raw, outcomes, rel)
            if doc:
                meta = raw["metadata"]
                if isinstance(meta, dict):
                    target = meta.setdefault("metrics", {})
                    if isinstance(target, dict):
                        target.update(doc)
                    else:
                        meta["metrics_file"] = doc

    def outcomes(self, raw: dict, outcomes: Any, rel: str) -> None:
        if not isinstance(outcomes, dict):
            self.warn(Location(self.shown(rel)), "outcomes must map principal ids to outcomes; kept in "
                                                 "metadata.unmapped_outcomes")
            if isinstance(raw.get("metadata"), dict):
                raw["metadata"]["unmapped_outcomes"] = outcomes
            return
        principals = raw.get("principals")
        if not outcomes:
            return
        if not isinstance(principals, list):
            principals = []
        by_id = {p.get("id"): i for i, p in enumerate(principals) if isinstance(p, dict)}
        for pid, outcome in outcomes.items():
            if pid not in by_id:
                self.warn(Location(self.shown(rel)), f"outcomes.{pid}: {pid!r} is not a principal of this run; "
                                                     f"kept in metadata.unmapped_outcomes")
                meta = raw.get("metadata")
                if isinstance(meta, dict):
                    meta.setdefault("unmapped_outcomes", {})[pid] = outcome
                continue
            p = dict(principals[by_id[pid]])
            p["outcome"] = outcome
            principals[by_id[pid]] = p

    def event_entry(self, obj: Any, loc: Location, defaults: dict[str, Any]) -> dict:
        if not isinstance(obj, dict):
            raise RunFormatError(loc, "an event must be a JSON object")
        entry = _apply_aliases(obj, _EVENT_ALIASES)
        if "kind" in entry and "kind" not in obj and entry["kind"] not in EVENT_KINDS:
            original = entry["kind"]
            entry["kind"] = "log"
            meta = entry.setdefault("metadata", {})
            if isinstance(meta, dict):
                meta.setdefault("type", original)
        for key, value in defaults.items():
            entry.setdefault(key, value)
        if "actor" not in obj and isinstance(entry.get("actor"), str):
            entry["actor"] = self.resolve_actor(entry["actor"])
        if isinstance(entry.get("recipients"), str):
            entry["recipients"] = [entry["recipients"]]
        if "recipients" not in obj and isinstance(entry.get("recipients"), list):
            entry["recipients"] = [self.resolve_actor(r) if isinstance(r, str) else r for r in entry["recipients"]]
        if "content_file" in entry:
            entry["content"] = self.content_file(entry, loc)
        return entry

    def content_file(self, entry: dict, loc: Location) -> str | None:
        ref = entry.pop("content_file")
        if "content" in entry:
            self.warn(loc, "give either content or content_file, not both; content kept, content_file in metadata")
            meta = entry.setdefault("metadata", {})
            if isinstance(meta, dict):
                meta["content_file"] = ref
            return entry["content"]
        parts = PurePosixPath(str(ref)).parts if isinstance(ref, str) else ()
        try:
            is_file = bool(parts) and (self.dir / ref).is_file()
        except (OSError, ValueError):  # a name too long for the file system, a NUL character
            is_file = False
        if not parts or ref.startswith("/") or ".." in parts or not is_file:
            self.warn(loc, f"content_file {str(ref)[:80]!r} is not a file inside the run directory; "
                           "kept in metadata.content_file")
            meta = entry.setdefault("metadata", {})
            if isinstance(meta, dict):
                meta["content_file"] = ref
            return entry.get("content")
        rel = PurePosixPath(*parts).as_posix()
        self.used.add(rel)
        try:
            return (self.dir / rel).read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RunFormatError(Location(self.shown(rel)), f"not UTF-8 text: {exc.reason}") from None

    def events(self, raw: dict, origins: dict[str, list[Location]]) -> None:
        entries: list[dict] = []
        locs: list[Location] = []
        inline = raw.get("events")
        if isinstance(inline, list):
            for i, obj in enumerate(inline):
                entries.append(obj)
                locs.append(Location(self.shown_dir, pointer=f"events[{i}]"))
        sources = [("events", {}), ("conversation", {"kind": "message", "visibility": "shared"}),
                   ("trajectory", {"visibility": "private"})]
        n_files = 0
        for role, defaults in sources:
            for rel, param in self.by_role(role):
                n_files += 1
                d = dict(defaults)
                if role == "trajectory" and param:
                    d["actor"] = param
                for obj, loc in self.records(rel, ("events", "messages", "conversation", "steps")):
                    entries.append(self.event_entry(obj, loc, d))
                    locs.append(loc)
        seqs = [e.get("seq") if isinstance(e, dict) else None for e in entries]
        if entries and all(isinstance(e, dict) for e in entries) and all(s is None for s in seqs):
            order = ts_order([_ts_text(e.get("ts")) for e in entries])
            for seq, i in enumerate(order):
                entries[i]["seq"] = seq
        elif all(isinstance(s, int) and not isinstance(s, bool) for s in seqs):
            order = sorted(range(len(entries)), key=seqs.__getitem__)
        else:
            order = list(range(len(entries)))
        entries = [entries[i] for i in order]
        locs = [locs[i] for i in order]
        self.hops(entries, raw)
        self.artifact_events(entries, locs)
        if entries or inline is not None or n_files:
            raw["events"] = entries
        origins["events"] = locs

    def hops(self, entries: list[dict], raw: dict) -> None:
        by_seq = {e["seq"]: e for e in entries
                  if isinstance(e, dict) and isinstance(e.get("seq"), int) and not isinstance(e["seq"], bool)}
        extra: list = []
        for rel, _ in self.by_role("hops"):
            for obj, loc in self.records(rel, ("hops",)):
                if isinstance(obj, dict) and "seq" in obj and "hop" in obj:
                    if not isinstance(obj["seq"], int) or obj["seq"] not in by_seq:
                        self.warn(loc, f"hop given for seq {obj['seq']!r}, which no event has; kept in metadata.hops")
                        extra.append(obj)
                        continue
                    by_seq[obj["seq"]]["hop"] = obj["hop"]
                else:
                    extra.append(obj)
        if extra and isinstance(raw.get("metadata"), dict):
            raw["metadata"].setdefault("hops", []).extend(extra)

    def artifact_events(self, entries: list[dict], locs: list[Location]) -> None:
        seqs = [e.get("seq") for e in entries if isinstance(e, dict)]
        numeric = all(isinstance(s, int) for s in seqs)
        for rel, _ in self.by_role("artifact"):
            if rel in self.used:
                continue
            self.used.add(rel)
            event = artifact_event(self.dir, rel)
            if numeric:
                event["seq"] = len(entries)
            entries.append(event)
            locs.append(Location(self.shown(rel)))

    def audits(self, raw: dict, origins: dict[str, list[Location]]) -> None:
        items: list = []
        locs: list[Location] = []
        inline = raw.get("audits")
        if isinstance(inline, list):
            items.extend(inline)
            locs.extend(Location(self.shown_dir, pointer=f"audits[{i}]") for i in range(len(inline)))
        for rel, level in self.by_role("audits"):
            stem = os.path.splitext(rel.rsplit("/", 1)[-1])[0]
            for obj, loc in self.records(rel, ("audits", "judgments", "results", "items")):
                if not isinstance(obj, dict):
                    raise RunFormatError(loc, "an audit must be a JSON object")
                entry = _apply_aliases(obj, _AUDIT_ALIASES)
                entry.setdefault("source", stem)
                if level is not None:
                    entry.setdefault("level", level)
                items.append(entry)
                locs.append(loc)
        if items or inline is not None:
            raw["audits"] = items
        origins["audits"] = locs


    def checks(self, raw: dict, origins: dict[str, list[Location]]) -> None:
        items: list = []
        locs: list[Location] = []
        inline = raw.get("checks")
        if isinstance(inline, list):
            items.extend(inline)
            locs.extend(Location(self.shown_dir, pointer=f"checks[{i}]") for i in range(len(inline)))
        for rel, level in self.by_role("checks"):
            stem = os.path.splitext(rel.rsplit("/", 1)[-1])[0]
            for obj, loc in self.records(rel, ("checks", "results", "items")):
                if not isinstance(obj, dict):
                    self.warn(loc, "a check must be a JSON object; kept in metadata.unmapped_checks")
                    if isinstance(raw.get("metadata"), dict):
                        raw["metadata"].setdefault("unmapped_checks", []).append(obj)
                    continue
                entry = dict(obj)
                entry.setdefault("source", stem)
                if level is not None:
                    entry.setdefault("level", level)
                items.append(entry)
                locs.append(loc)
        if items or inline is not None:
            raw["checks"] = items
        origins["checks"] = locs


# --------------------------------------------------------------------------- walking a tree

LooseHandler = Callable[[Path, str], "Iterator[ImportItem] | None"]


def link_out_of_tree(path: Path, root: Path) -> bool:
    """True when `path` is a symbolic link whose target lies outside `root` (directory imports
    never follow those: a tree must not read files from elsewhere on the machine)."""
    if not path.is_symlink():
        return False
    try:
        target = path.resolve()
    except (OSError, RuntimeError):
        return True
    top = root.resolve()
    return target != top and top not in target.parents


def walk_tree(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """The directories of a tree as ``(dir, dirnames, filenames)``, names sorted so every reader
    walks in the same order; linked directories are not descended into (`read_loose` reports those
    leading out of the tree). Clearing ``dirnames`` in place prunes the walk below ``dir``."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        filenames.sort()
        yield Path(dirpath), dirnames, filenames


#: reads one file of the tree itself: an iterator of items, or None when it is not its file
ClaimHandler = Callable[[Path, str, str], "Iterator[ImportItem] | None"]


def read_loose(root: Path, here: Path, dirnames: list[str], filenames: list[str], shown_root: str,
               loose: LooseHandler | None, skip: Callable[[str, str], bool] | None = None,
               claim: ClaimHandler | None = None) -> Iterator[ImportItem]:
    """The files of one directory that is no run directory, as every tree walk reads them (the
    one place that does it: built-in, profiled and ``runs:`` trees alike). A symbolic link out of
    the tree (file or directory) is never followed and is reported unused; `skip(rel, name)` says
    which files are deliberately not read (a manifest, a mapping file...); `claim(path, rel,
    shown)` lets the tree read a file itself (a file holding runs); every other file goes to
    `loose(path, shown)`, and what nobody reads is listed in one item's `unused_files`."""
    top = shown_root.rstrip("/")
    unused: list[str] = []
    for d in dirnames:  # os.walk does not descend into linked directories; say so for outside ones
        if link_out_of_tree(here / d, root):
            unused.append(f"{top}/{(here / d).relative_to(root).as_posix()} (symbolic link out of the tree: "
                          "not followed)")
    for fn in filenames:
        path = here / fn
        rel = path.relative_to(root).as_posix()
        shown = f"{top}/{rel}"
        if link_out_of_tree(path, root):
            unused.append(f"{shown} (symbolic link out of the tree: not followed)")
            continue
        if skip is not None and skip(rel, fn):
            continue
        items = claim(path, rel, shown) if claim is not None else None
        if items is None:
            items = loose(path, shown) if loose is not None else None
        if items is None:
            unused.append(shown)
        else:
            yield from items
    if unused:
        yield ImportItem(source=f"{top}/{here.relative_to(root).as_posix()}", unused_files=unused)


def _is_sidecar(name: str, filenames: set[str]) -> bool:
    low = name.lower()
    for suffix in SIDECAR_SUFFIXES:
        if low.endswith(suffix) and name[: -len(suffix)] in filenames:
            return True
    return False


def iter_tree(root: str | os.PathLike, mapping: str | os.PathLike | dict | Mapping | None = None,
              display: str | None = None, loose: LooseHandler | None = None,
              profile: Any = None) -> Iterator[ImportItem]:
    """Yield one ImportItem per run directory under `root` (see the module docstring).

    Files outside run directories go to `loose(path, shown_name)`, which returns an iterator of
    items for a file it can read or None; the rest are reported in an item's `unused_files`.
    `profile` (an `app.ingest.profile.Profile`, a path or a built-in name) says how to read the
    tree; without one (and without a `mapping`) the profile `a2annotate inspect` infers is used.
    A root manifest (a ``*manifest*`` file mapping run directories to run ids) is read as a
    manifest, never as runs. Runs are normalized leniently: what does not map is kept and
    reported in the item's `warnings`.
    """
    from app.ingest.profile import load_profile

    root_path = Path(root)
    mp = load_mapping(mapping)
    shown_root = display if display is not None else os.fspath(root)
    if profile is not None:
        prof = load_profile(profile)
    elif mp.rules:
        prof = load_profile("a2annotate")
    else:
        from app.ingest.inspect import infer_profile

        prof = infer_profile(root_path)
    if prof.get("runs"):  # runs held in files: several per file, or one file per run
        from app.ingest.profiled_runs import iter_runs_tree

        yield from iter_runs_tree(root_path, prof, shown_root, loose)
        return
    if not prof.builtin_names:
        yield from _iter_profiled(root_path, prof, shown_root, loose)
        return
    from app.ingest.inspect import find_manifest
    from app.ingest.profiled import read_manifest

    manifest_spec = find_manifest(root_path) if root_path.is_dir() else None
    manifest: dict[str, dict] = {}
    if manifest_spec:
        from app.ingest.profile import Profile

        manifest, _, mwarn = read_manifest(Profile({"profile": 1, "name": "m", "manifest": manifest_spec}),
                                           root_path, shown_root)
        if mwarn:
            yield ImportItem(source=shown_root, warnings=mwarn)
    mapping_abs = os.path.abspath(mp.path) if mp.path else None

    def skip(rel: str, fn: str) -> bool:
        if mapping_abs and os.path.abspath(root_path / rel) == mapping_abs:
            return True
        if manifest_spec and rel == manifest_spec["file"]:
            return True  # the manifest: read above, never a run
        role = mp.role_of(rel)
        return bool(role and role[0] == "ignore") or _is_sidecar(fn, names)

    for here, dirnames, filenames in walk_tree(root_path):
        if is_run_dir(filenames, mp):
            dirnames[:] = []
            rd = _RunDir(root_path, here, shown_root, mp)
            entry = manifest.get(here.relative_to(root_path).as_posix())
            if entry:
                rd.manifest_id = entry.get("run_id")
            yield rd.read()
            continue
        names = set(filenames)
        yield from read_loose(root_path, here, dirnames, filenames, shown_root, loose, skip)


def _iter_profiled(root: Path, prof: Any, shown_root: str, loose: LooseHandler | None) -> Iterator[ImportItem]:
    from app.ingest.profiled import ProfiledRun, is_marker, load_taxonomy, read_manifest

    manifest, manifest_rel, mwarn = read_manifest(prof, root, shown_root)
    taxonomy = load_taxonomy((prof.get("audits") or {}).get("taxonomy"))
    depth = (prof.get("run_dirs") or {}).get("depth")
    seen: set[str] = set()
    head_warnings = list(mwarn)
    for here, dirnames, filenames in walk_tree(root):
        rel_dir = here.relative_to(root).as_posix()
        level = 0 if rel_dir == "." else len(rel_dir.split("/"))
        is_run = (level == depth) if depth is not None else \
            (here != root and any(is_marker(prof, fn) for fn in filenames))
        if is_run:
            dirnames[:] = []
            seen.add(rel_dir)
            yield ProfiledRun(prof, root, here, shown_root, manifest, taxonomy).read()
            continue
        yield from read_loose(root, here, dirnames, filenames, shown_root, loose,
                              skip=lambda rel, _fn: rel == manifest_rel)
    for rel in sorted(set(manifest) - seen):
        head_warnings.append({"location": f"{shown_root.rstrip('/')}/{manifest_rel}",
                              "message": f"the manifest lists {rel!r}, which is no run directory of this tree"})
    if head_warnings:
        yield ImportItem(source=shown_root, warnings=head_warnings)


class TreeReader(Reader):
    """Directory trees (and zip archives holding one): run directories read through an import profile
    (given, or the one `a2annotate inspect` infers), every other file by the reader that takes it."""

    name = "tree"
    description = ("per-run directory trees (a folder or a .zip): run directories through an import profile, "
                   "loose files each by the reader the registry picks")
    reads_dirs = True

    def __init__(self, mapping: Any = None, profile: Any = None):
        self.mapping = mapping
        self.profile = profile

    def sniff(self, path: Path) -> Sniff:
        import zipfile

        if path.is_dir():
            return Sniff(0.5, "a directory: run directories by an import profile, other files one by one")
        if path.is_file() and zipfile.is_zipfile(path):
            return Sniff(0.5, "a zip archive, read as the directory it holds")
        return Sniff(0.0, "neither a directory nor a zip archive")

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        from app.ingest.detect import read_tree

        return read_tree(path, shown, mapping=self.mapping, profile=self.profile)

    def read_runs_file(self, path: Path, shown: str) -> Iterator[ImportItem]:
        """A file holding runs, read by the profile's ``runs`` block (`app.ingest.profiled_runs`)."""
        from app.ingest.profile import load_profile
        from app.ingest.profiled_runs import iter_runs_file

        return iter_runs_file(load_profile(self.profile), Path(path), shown)
