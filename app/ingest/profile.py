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
                      "with from: actors, the actors that are principals (names, or /regex/)"}}},
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
    },
}
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
            for k in err.instance:
                if k not in allowed:
                    hint = f" (expected one of: {', '.join(allowed)})" if allowed else ""
                    out.append(f"{_where(path + [k])}: unknown key{hint}")
        elif err.validator == "required":
            for name in err.validator_value:
                if isinstance(err.instance, dict) and name not in err.instance:
                    out.append(f"{_where(path + [name])}: required key is missing")
        else:
            out.append(f"{_where(path)}: {err.message}")
    return out


def _path_problems(data: dict) -> list[str]:
    out = []
    for role, keys in (data.get("keys") or {}).items():
        for fieldname, spec in (keys or {}).items():
            for path in key_candidates(spec):
                try:
                    compile_path(path)
                except ProfileError as exc:
                    out.append(f"keys.{role}.{fieldname}: {exc}")
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
        problems = _semantic_problems(data) + _path_problems(data)
    if problems:
        raise ProfileError(f"{where}: " + "; ".join(problems))
    return Profile(spec=data, path=path)


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
