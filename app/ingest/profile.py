"""Import profiles: declarative YAML files that say how to read a per-run directory tree.

A profile names, for one layout: where run directories are, how the path components map to
scenario/family/task/condition/repetition/run id, which files play which role, per role which
keys hold which canonical field (dotted paths), value vocabularies, where agents, principals,
per-principal outcomes and private state come from, and how audits map. The reference is in
docs/importing.md; the JSON Schema is `PROFILE_SCHEMA` (a bad key is named by its path).

Built-in profiles are data files in ``app/ingest/profiles/*.yaml``; ``a2annotate`` is the
project's own layout (the names `app.ingest.readers.tree` recognises). Pure: no database.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from app.ingest.safety import safeyaml

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
FILE_ROLES = ("metadata", "scenario", "scenario_text", "principals", "agents", "events", "conversation",
              "trajectory", "hops", "metrics", "checks", "judgments", "audits", "private_state", "artifact",
              "artifact_index", "log", "ignore")
RECORD_ROLES = ("metadata", "scenario", "events", "conversation", "trajectory", "hops", "metrics", "checks",
                "judgments", "artifact_index")
#: canonical fields a role's `keys` may name
ROLE_FIELDS = {
    "metadata": ("run_id", "status", "started_at", "ended_at", "aggregate_score", "family", "scenario_id",
                 "title", "description", "alignment"),
    "scenario": ("id", "family", "title", "description", "alignment"),
    "events": ("seq", "ts", "kind", "actor", "recipients", "visibility", "content", "data", "turn",
               "parent_seq", "parent_turn", "hop", "chat_role", "tool_calls", "call_id"),
    "hops": ("seq", "turn", "hop"),
    "checks": ("check_id", "passed", "level", "agent", "evidence", "evidence_turns", "detail", "source",
               "mode"),
    "judgments": ("mode", "verdict", "level", "agent", "evidence", "evidence_turns", "note", "source"),
    "metrics": ("aggregate_score", "status"),
    "artifact_index": ("file", "turn", "actor", "visibility"),
}
ROLE_FIELDS["conversation"] = ROLE_FIELDS["events"]
ROLE_FIELDS["trajectory"] = ROLE_FIELDS["events"]

_KEYSPEC = {"oneOf": [{"type": "string", "minLength": 1},
                      {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}]}
_VOCAB = {"type": "object", "additionalProperties": {"type": ["string", "boolean"]}}
_CONDITION = {
    "type": "object", "additionalProperties": False, "required": ["key"],
    "properties": {"key": {"type": "string"}, "equals": {}, "in": {"type": "array"},
                   "not_in": {"type": "array"}, "empty": {"type": "boolean"},
                   "mentions_none": {"type": "boolean"},
                   "gt": {"type": "number"}, "ge": {"type": "number"}, "lt": {"type": "number"},
                   "le": {"type": "number"}},
}


def _role_keys(role: str) -> dict:
    return {"type": "object", "additionalProperties": False,
            "properties": {f: _KEYSPEC for f in ROLE_FIELDS[role]}}


_AGENTS = {"type": "object", "additionalProperties": False, "required": ["from"], "properties": {
    "from": {"type": "string", "description": "a path in the run metadata, or 'actors': the actors seen in the log"},
    "id": {"type": "string"}, "role": {"type": "string"},
    "model": {"type": "string"}, "principal": {"type": "string"}, "harness": {"type": "string"},
    "principal_name": {"type": "string"}}}
#: when a rule applies to an event: its kind, actor and recipients (`none`, `any` or a name)
_WHEN = {"type": "object", "additionalProperties": False, "properties": {
    "kind": _KEYSPEC, "actor": _KEYSPEC, "recipient": {"type": "string"}, "role": {"type": "string"}}}
_VISIBILITY_RULE = {"type": "object", "additionalProperties": False, "required": ["when"], "properties": {
    "when": _WHEN, "visibility": {"enum": ["shared", "private"]},
    "recipients": {"enum": ["all_others", "none"]}}}


#: where a profile's runs are held inside files (app.ingest.profiled_runs): several runs per file,
#: or one file per run
PART_ROLES = ("metadata", "scenario", "scenario_text", "conversation", "events", "trajectory", "hops", "metrics",
              "checks", "judgments", "audits")
_JOIN = {"type": "object", "additionalProperties": False, "required": ["from"], "properties": {
    "from": {"type": "string", "minLength": 1, "description": "JMESPath in the file (or in `file`) of the shared data"},
    "file": {"type": "string", "minLength": 1, "description": "a file of the tree (relative to its root) holding it"},
    "key": {"type": "string", "minLength": 1, "description": "with `run_key`: the key of each shared item to match"},
    "run_key": {"type": "string", "minLength": 1, "description": "JMESPath in the run record whose value `key` must equal"},
    "as": {"type": "string", "minLength": 1, "description": "nest the joined value under this key of the part"}}}
_RUNS = {"type": "object", "additionalProperties": False, "required": ["each"], "properties": {
    "files": {"oneOf": [{"type": "string", "minLength": 1},
                        {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}],
              "description": "globs (relative to the tree's root) of the files holding runs; a file given to "
                             "`import` is read whatever its name"},
    "each": {"enum": ["record", "file"], "description": "record: many runs per file; file: one run per file"},
    "records": {"type": "string", "minLength": 1,
                "description": "JMESPath to the list of run records in a JSON file (default: the array itself, "
                               "or each line of a JSON Lines file)"},
    "parts": {"type": "object", "additionalProperties": False,
              "x-expected": "a role (" + ", ".join(PART_ROLES) + "), optionally with :param", "description":
              "role -> JMESPath in the run record of that part (a role may carry a parameter: trajectory:agent, "
              "checks:L0); metadata defaults to the record without the other parts",
              "patternProperties": {"^(" + "|".join(PART_ROLES) + ")(:[A-Za-z0-9_.-]+)?$": {
                  "type": "string", "minLength": 1}}},
    "join": {"type": "object", "additionalProperties": False, "description":
             "role -> file-level data given to each run: the item whose `key` equals the run's `on`, or the "
             "whole value when there is no key",
             "x-expected": "metadata, scenario or metrics",
             "patternProperties": {"^(metadata|scenario|metrics)$": _JOIN}},
}}
#: profile keys a block may set (not those that say where runs are)
BLOCK_KEYS = ("description", "scenario_id", "run_id", "family", "files", "records", "keys", "keep", "values",
              "defaults", "agents", "principals", "visibility", "metrics", "private_state", "hidden", "audits")
_MATCH = {"oneOf": [{"type": ["string", "number", "boolean"]},
                    {"type": "array", "items": {"type": ["string", "number", "boolean"]}, "minItems": 1}]}
_BLOCK_WHEN = {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
    "family": _MATCH, "task": _MATCH, "scenario": _MATCH, "run": _MATCH,
    "key": {"type": "string", "minLength": 1, "description": "JMESPath in the run's source metadata (the record)"},
    "equals": {}, "in": {"type": "array"}, "matches": {"type": "string"}}}


PROFILE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "a2annotate import profile",
    "type": "object",
    "additionalProperties": False,
    "required": ["profile", "name"],
    "properties": {
        "profile": {"const": 1, "description": "profile format version"},
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "builtin_names": {"type": "boolean"},
        "run_dirs": {"type": "object", "additionalProperties": False, "properties": {
            "marker": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "depth": {"type": "integer", "minimum": 0}}},
        "path": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
        "scenario_id": {"type": "string"},
        "run_id": {"type": "string"},
        "family": {"type": "string"},
        "manifest": {"type": "object", "additionalProperties": False, "required": ["file"], "properties": {
            "file": {"type": "string"}, "records": {"type": "string"}, "path": {"type": "string"},
            "run_id": {"type": "string"},
            "fields": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "files": {"type": "object", "additionalProperties": {"type": "string", "pattern":
                  "^(" + "|".join(FILE_ROLES) + ")(:[A-Za-z0-9_.-]+)?$"}},
        "records": {"type": "object", "additionalProperties": False,
                    "properties": {r: {"type": "string"} for r in RECORD_ROLES}},
        "keys": {"type": "object", "additionalProperties": False,
                 "properties": {r: _role_keys(r) for r in ROLE_FIELDS}},
        "keep": {"type": "object", "additionalProperties": False, "description":
                 "per record role, source keys kept in metadata on purpose (a notice, not a warning)",
                 "properties": {r: {"type": "array", "items": {"type": "string", "minLength": 1}}
                                for r in RECORD_ROLES}},
        "values": {"type": "object", "additionalProperties": False, "properties": {
            "status": _VOCAB, "visibility": _VOCAB, "kind": _VOCAB, "passed": _VOCAB,
            "chat_role": {"type": "object", "additionalProperties": {"oneOf": [
                {"enum": ["private_state", "skip"]},
                {"type": "object", "additionalProperties": False, "required": ["kind"], "properties": {
                    "kind": {"type": "string"},
                    "actor": {"type": "string", "description":
                              "agent (the file's agent), principal (its principal, or the only one), "
                              "system, or any agent or principal id"},
                    "visibility": {"enum": ["shared", "private"]}}}]}}}},
        "defaults": {"type": "object", "additionalProperties": False,
                     "properties": {r: {"type": "object"} for r in ("events", "conversation", "trajectory",
                                                                   "checks", "judgments")}},
        "agents": {"oneOf": [_AGENTS, {"type": "array", "items": _AGENTS, "minItems": 1}]},
        "principals": {"type": "object", "additionalProperties": False, "required": ["from"], "properties": {
            "from": {"type": "string", "description": "a path in the run metadata, or 'actors'"},
            "id": {"type": "string"}, "name": {"type": "string"},
            "kind": {"type": "string"}, "objective": {"type": "string"}, "constraints": {"type": "string"},
            "match": {"type": "array", "items": {"type": "string", "minLength": 1}, "description":
                      "with from: actors, the actors that are principals (names, or /regex/)"},
            "name_key": {"type": "string", "minLength": 1, "description":
                         "with from: actors, a path in the run's source metadata (the run record) holding the "
                         "principal's display name (its id stays the actor's name)"},
            "objective_key": {"type": "string", "minLength": 1, "description":
                              "with from: actors, a path in the run's source metadata holding its objective"}}},
        "visibility": {"type": "array", "items": _VISIBILITY_RULE,
                       "description": "rules by kind, actor and recipient; the first that applies wins"},
        "metrics": {"type": "object", "additionalProperties": False, "properties": {
            "aggregate_score": _KEYSPEC, "status": _KEYSPEC,
            "principals": {"type": "object", "additionalProperties": {
                "type": "object", "additionalProperties": False, "properties": {
                    "score": {"type": "string"},
                    "success": {"oneOf": [{"type": "string"}, {"type": "array", "items": _CONDITION}]},
                    "metrics": {"type": "array", "items": {"type": "string"}}}}}}},
        "private_state": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["from"], "properties": {
                "from": {"enum": ["system_message", "scenario", "scenario_text", "file"]},
                "key": {"type": "string"}, "glob": {"type": "string"}, "as": {"type": "string"},
                "heading": {"type": "string", "description":
                            "with from: scenario_text, the heading (a template over role, agent, principal) "
                            "of the Markdown section cut out of the scenario text as that agent's private state"}}}},
        "hidden": {"type": "array", "items": {"type": "string", "pattern": r"^[^.\s][^\s]*$"}},
        "audits": {"type": "object", "additionalProperties": False, "properties": {
            "taxonomy": {"type": "string"}, "source": {"type": "string"},
            "no_failure": {"type": "array", "items": {"type": "string"}},
            "modes": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "runs": _RUNS,
    },
}
PROFILE_SCHEMA["properties"]["blocks"] = {
    "type": "array", "description": "per-family / per-task blocks: later blocks win, objects merge",
    "items": {"type": "object", "additionalProperties": False, "required": ["when"], "properties": {
        "when": _BLOCK_WHEN, "name": {"type": "string", "minLength": 1},
        **{k: PROFILE_SCHEMA["properties"][k] for k in BLOCK_KEYS}}}}
_VALIDATOR = Draft202012Validator(PROFILE_SCHEMA)


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file and the bad key."""


@dataclass
class Profile:
    """A validated profile: `spec` is the parsed file, `path` where it came from (None: built-in
    or made in code)."""

    spec: dict[str, Any]
    path: str | None = None
    inferred: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def builtin_names(self) -> bool:
        return bool(self.spec.get("builtin_names"))

    def get(self, key: str, default: Any = None) -> Any:
        return self.spec.get(key, default)


def _where(path: list) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def validation_problems(data: Any) -> list[str]:
    """Every problem of a profile document, each naming the key (``keys.conversation.sender: ...``)."""
    out = []
    for err in sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = list(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = sorted(err.schema.get("properties", {}))
            patterns = [re.compile(p) for p in err.schema.get("patternProperties", {})]
            for k in err.instance:
                if k not in allowed and not any(p.search(k) for p in patterns):
                    hint = f" (expected one of: {', '.join(allowed)})" if allowed else ""
                    if err.schema.get("x-expected"):
                        hint = f" (expected {err.schema['x-expected']})"
                    out.append(f"{_where(path + [k])}: unknown key{hint}")
        elif err.validator == "required":
            for name in err.validator_value:
                if isinstance(err.instance, dict) and name not in err.instance:
                    out.append(f"{_where(path + [name])}: required key is missing")
        else:
            out.append(f"{_where(path)}: {err.message}")
    return out


def _path_problems(data: dict, prefix: str = "") -> list[str]:
    out = []
    for role, keys in (data.get("keys") or {}).items():
        for fieldname, spec in (keys or {}).items():
            for path in key_candidates(spec):
                try:
                    compile_path(path)
                except ProfileError as exc:
                    out.append(f"{prefix}keys.{role}.{fieldname}: {exc}")
    runs = data.get("runs") or {}
    paths = [("runs.records", runs.get("records"))]
    paths += [(f"runs.parts.{r}", p) for r, p in (runs.get("parts") or {}).items()]
    for role, j in (runs.get("join") or {}).items():
        paths += [(f"runs.join.{role}.{k}", j.get(k)) for k in ("from", "key", "run_key")]
    for k in ("name_key", "objective_key"):
        paths.append((f"principals.{k}", (data.get("principals") or {}).get(k)))
    for i, block in enumerate(data.get("blocks") or []):
        paths.append((f"blocks[{i}].when.key", (block.get("when") or {}).get("key")))
        out += _path_problems(block, f"blocks[{i}].")
    for where, path in paths:
        if isinstance(path, str):
            try:
                compile_path(path)
            except ProfileError as exc:
                out.append(f"{where}: {exc}")
    return out


def _runs_problems(data: dict) -> list[str]:
    out = []
    runs = data.get("runs")
    if isinstance(runs, dict):
        if runs.get("each") == "file" and "records" in runs:
            out.append("runs.records: only with each: record (one file per run has no list of runs)")
        if data.get("run_dirs"):
            out.append("runs: a profile reads either run directories (run_dirs) or runs held in files (runs), "
                       "not both")
        for glob in key_candidates(runs.get("files")):
            problem = outside_tree_problem(glob)
            if problem:
                out.append(f"runs.files: {problem}")
        for name in runs.get("parts") or {}:
            if name == "trajectory":
                out.append("runs.parts.trajectory: name the agent whose trajectory it is (trajectory:AGENT), "
                           "or use conversation")
        for role, j in (runs.get("join") or {}).items():
            if ("key" in j) != ("run_key" in j):
                out.append(f"runs.join.{role}: `key` and `run_key` go together (the shared item's key, "
                           "the run's value)")
            if isinstance(j.get("file"), str) and outside_tree_problem(j["file"]):
                out.append(f"runs.join.{role}.file: {outside_tree_problem(j['file'])}")
    for i, block in enumerate(data.get("blocks") or []):
        when = block.get("when") or {}
        tests = [k for k in ("equals", "in", "matches") if k in when]
        if tests and "key" not in when:
            out.append(f"blocks[{i}].when: {'/'.join(tests)} needs a `key` (a JMESPath in the run's metadata)")
        if "key" in when and len(tests) != 1:
            out.append(f"blocks[{i}].when.key: give exactly one of equals, in, matches")
        pats = [when.get("matches")] + [v for k in ("family", "task", "scenario", "run")
                                        for v in key_candidates(when.get(k)) if isinstance(v, str)]
        for pat in pats:
            if not isinstance(pat, str):
                continue
            if pat is when.get("matches") or (len(pat) > 2 and pat.startswith("/") and pat.endswith("/")):
                body = pat if pat is when.get("matches") else pat[1:-1]
                try:
                    re.compile(body)
                except re.error as exc:
                    out.append(f"blocks[{i}].when: {pat!r} is not a regular expression ({exc})")
    return out


def _semantic_problems(data: dict) -> list[str]:
    import re
    import string

    out = []
    checks = [(k, data.get(k)) for k in ("scenario_id", "run_id", "family")]
    path = data.get("path")
    checks += [("path", t) for t in ([path] if isinstance(path, str) else path or [])]
    for key, t in checks:
        if not isinstance(t, str):
            continue
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(t) if f is not None]
        except ValueError as exc:
            out.append(f"{key}: not a valid template ({exc})")
            continue
        bad = [n for n in names if not re.fullmatch(r"\w+", n)]
        if bad:
            out.append(f"{key}: placeholders must be plain names like {{scenario}}, got {bad[0]!r}")
        if key == "path" and len(set(names)) != len(names):
            out.append("path: a field appears twice in the template")
    manifest = data.get("manifest")
    if isinstance(manifest, dict) and isinstance(manifest.get("file"), str):
        problem = outside_tree_problem(manifest["file"])
        if problem:
            out.append(f"manifest.file: {problem}")
    return out


def outside_tree_problem(rel: str) -> str | None:
    """Why `rel`, a path a profile names, could lead out of the tree it is read in (absolute,
    a drive, ``..``), or None for a plain relative path."""
    import re
    from pathlib import PurePosixPath

    norm = rel.replace("\\", "/")
    if not norm.strip() or norm.startswith("/") or re.match(r"^[A-Za-z]:", norm) or "\x00" in norm:
        return f"must be a path inside the tree, relative to its root; got {rel!r}"
    if ".." in PurePosixPath(norm).parts:
        return f"must be a path inside the tree ('..' is not accepted); got {rel!r}"
    return None


def builtin_profile_names() -> list[str]:
    """Names of the profiles shipped in app/ingest/profiles/."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(source: str | os.PathLike | dict | Profile) -> Profile:
    """A profile from a file path, a built-in name, or a dict; raises ProfileError naming the bad key."""
    if isinstance(source, Profile):
        return source
    path = None
    if isinstance(source, dict):
        data: Any = source
        where = "profile"
    else:
        text = os.fspath(source)
        candidate = Path(text)
        if not candidate.is_file() and (PROFILE_DIR / f"{text}.yaml").is_file():
            candidate = PROFILE_DIR / f"{text}.yaml"
        path = os.fspath(candidate)
        where = f"profile {path}"
        try:  # within the limits (aliases, nesting, size, number of values): safeyaml
            data = safeyaml.load_file(candidate)
        except FileNotFoundError:
            raise ProfileError(f"{where}: no such file (built-in profiles: "
                               f"{', '.join(builtin_profile_names())})") from None
        except UnicodeDecodeError as exc:
            raise ProfileError(f"{where}: cannot read it: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except (OSError, yaml.YAMLError) as exc:
            raise ProfileError(f"{where}: cannot read it: {exc}") from None
    problems = validation_problems(data)
    if not problems:
        problems = _semantic_problems(data) + _path_problems(data) + _runs_problems(data)
    if problems:
        raise ProfileError(f"{where}: " + "; ".join(problems))
    return Profile(spec=data, path=path)


def upload_profile(name: str | None = None, text: str | bytes | None = None) -> str | dict | None:
    """The profile an upload names: a built-in profile's `name` (never a file path: an upload
    must not read the server's files) or the `text` of a profile YAML sent with it. Validated as
    `load_profile` validates (ProfileError names every bad key); returns what an import job takes
    as its ``profile`` (the name, or the validated document), None when neither is given."""
    if name and text:
        raise ProfileError("profile: give a built-in profile's name or a profile document, not both")
    if name:
        if name not in builtin_profile_names():
            raise ProfileError(f"profile {name!r}: no built-in profile of that name (built-in profiles: "
                               f"{', '.join(builtin_profile_names())}; send your own as the multipart field "
                               "'profile')")
        load_profile(name)
        return name
    if text is None:
        return None
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProfileError(f"profile: cannot read it: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:  # within the limits (aliases, nesting, size, number of values), as a profile file is read
        data = safeyaml.load(text, max_nodes=safeyaml.MAX_CONFIG_NODES)
    except yaml.YAMLError as exc:  # a syntax error or an input limit
        raise ProfileError(f"profile: cannot read it: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"profile: a profile is a YAML mapping (profile: 1, name: ...), not "
                           f"{type(data).__name__}")
    load_profile(data)  # every bad key named
    return data


def dump_profile(profile: Profile | dict, header: str = "") -> str:
    """YAML text of a profile (with `header` as leading comment lines)."""
    spec = profile.spec if isinstance(profile, Profile) else profile
    body = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
    return "\n".join(lines + [body])


# --------------------------------------------------------------------------- shared helpers

#: a plain dotted path (``a.b.c``: no JMESPath operator in it, so every profile written before
#: JMESPath paths reads as it did, keys with dashes or spaces included): read and removed from the
#: record; any other path is a JMESPath expression
_PLAIN = re.compile(r"^[^\[\]|@*?(){}`&!<>=,'\"$]+$")


def is_plain_path(path: str) -> bool:
    return bool(_PLAIN.match(path))


@lru_cache(maxsize=1024)
def compile_path(path: str):
    """The compiled JMESPath expression of a profile path; raises ProfileError naming it."""
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.compile(path)
    except JMESPathError as exc:
        raise ProfileError(f"path {path!r}: not a JMESPath expression ({exc})") from None


def root_key(path: str) -> str | None:
    """The top-level key a path starts from (``content[0].text`` -> ``content``), or None."""
    node = compile_path(path).parsed
    while node:
        if node.get("type") == "field":
            return node.get("value")
        kids = node.get("children") or []
        node = kids[0] if kids else None
    return None


def path_get(obj: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)``: a plain dotted path as `dotted_get`; any other path is a JMESPath
    expression (lists indexed, projected and filtered), found when it gives a value other than null."""
    if is_plain_path(path):
        return dotted_get(obj, path)
    value = compile_path(path).search(obj)
    return (value is not None), value


def dotted_get(obj: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted path (``a.b.c``) in nested objects."""
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return False, None
    return True, cur


def dotted_pop(obj: Any, path: str) -> tuple[bool, Any]:
    """Like `dotted_get`, and removes the leaf (and parents left empty)."""
    parts = path.split(".")
    chain = []
    cur = obj
    for part in parts[:-1]:
        if not isinstance(cur, dict) or not isinstance(cur.get(part), dict):
            return False, None
        chain.append((cur, part))
        cur = cur[part]
    if not isinstance(cur, dict) or parts[-1] not in cur:
        return False, None
    value = cur.pop(parts[-1])
    for parent, part in reversed(chain):
        if parent[part] == {}:
            del parent[part]
        else:
            break
    return True, value


def key_candidates(spec: Any) -> list[str]:
    if spec is None:
        return []
    return [spec] if isinstance(spec, str) else list(spec)


def fill(template: str, fields: dict[str, Any]) -> str | None:
    """``{name}`` placeholders filled from `fields`; None when one is missing."""
    try:
        return template.format_map(_Strict(fields))
    except (KeyError, ValueError, IndexError, AttributeError):
        return None


class _Strict(dict):
    def __missing__(self, key: str) -> Any:
        raise KeyError(key)


# --------------------------------------------------------------------------- per-family / per-task blocks

def without_blocks(profile: Profile) -> Profile:
    """`profile` without its `blocks` (what a run's family, task and scenario are first read with)."""
    spec = {k: v for k, v in profile.spec.items() if k != "blocks"}
    return Profile(spec=spec, path=profile.path, inferred=profile.inferred, notes=list(profile.notes))


def merge_specs(base: Any, over: Any) -> Any:
    """`over` laid on `base`: objects merge key by key (recursively), anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge_specs(base[k], v) if k in base else v
        return out
    return over


def _matches(cond: Any, value: Any) -> bool:
    """A block condition on a name: a value (equal, as text), a list (any of them) or ``/regex/``."""
    if value is None:
        return False
    for c in key_candidates(cond) if isinstance(cond, (str, list)) else [cond]:
        if isinstance(c, str) and len(c) > 2 and c.startswith("/") and c.endswith("/"):
            if re.fullmatch(c[1:-1], str(value)):
                return True
        elif str(c) == str(value):
            return True
    return False


def block_holds(when: dict, facts: dict[str, Any]) -> bool:
    """Whether every condition of a block's `when` holds for a run's `facts` (family, task,
    scenario, run, and `doc`: the run's source metadata, where `key` is read)."""
    for name in ("family", "task", "scenario", "run"):
        if name in when and not _matches(when[name], facts.get(name)):
            return False
    if "key" in when:
        found, value = path_get(facts.get("doc") or {}, when["key"])
        if "equals" in when:
            if not found or not (value == when["equals"] or str(value) == str(when["equals"])):
                return False
        elif "in" in when:
            if not found or not any(value == v or str(value) == str(v) for v in when["in"]):
                return False
        elif "matches" in when:
            if not found or not isinstance(value, (str, int, float)) or not re.search(when["matches"], str(value)):
                return False
    return True


def apply_blocks(profile: Profile, facts: dict[str, Any]) -> tuple[Profile, list[str]]:
    """The profile for one run: its base (no blocks) with every block whose `when` holds merged in,
    in order (later blocks win; objects merge), and the names of those blocks (``name``, else
    ``blocks[i]``)."""
    spec = {k: v for k, v in profile.spec.items() if k != "blocks"}
    names = []
    for i, block in enumerate(profile.spec.get("blocks") or []):
        if not block_holds(block["when"], facts):
            continue
        names.append(block.get("name") or f"blocks[{i}]")
        spec = merge_specs(spec, {k: v for k, v in block.items() if k not in ("when", "name")})
    return Profile(spec=spec, path=profile.path, inferred=profile.inferred, notes=list(profile.notes)), names
