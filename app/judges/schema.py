"""Judge files: YAML, checked against a JSON Schema, normalised, hashed into a version (pure).

A judge file needs only ``judge: 1``, ``name``, ``endpoint: {base_url, model, api_key_env}``,
``taxonomy`` and ``strategy``; everything else has a default (see docs/judges.md for the full
reference). ``parse_judge_text`` reads the text through the project's safe YAML loader (no
aliases, bounded depth), checks it, and returns a :class:`JudgeDef` whose ``definition`` has every
default filled in and the built-in prompts written out, so that the hash of the definition is the
version: a changed prompt, model, sampling parameter, strategy or taxonomy makes a new version.

What does *not* change an answer does not change the version either: ``description``, the
endpoint's ``base_url`` and ``api_key_env`` (the same model served elsewhere), ``limits`` and
``prices``. Those are kept in the stored definition and updated when the same version is
registered again.

Errors are :class:`JudgeFileError` naming the file and the key (``limits.concurrency: ...``).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
import yaml

from app.ingest.safety import safeyaml

FILE_VERSION = 1
STRATEGIES = ("all-at-once", "per-agent", "per-mode", "attribution-all-at-once", "attribution-step-by-step",
              "attribution-binary-search", "attribution-hybrid")
ATTRIBUTION_STRATEGIES = tuple(s for s in STRATEGIES if s.startswith("attribution-"))
OUTPUT_MODES = ("json_schema", "tools", "text")
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"

#: keys of the definition that do not change an answer (left out of the version hash)
OPERATIONAL_KEYS = ("description", "limits", "prices")
OPERATIONAL_ENDPOINT_KEYS = ("base_url", "api_key_env")

DEFAULTS: dict[str, Any] = {
    "description": "",
    "output": "json_schema",
    "modes": None,
    "sampling": {"temperature": 0.0, "top_p": None, "max_tokens": 1024, "seed": None, "samples": 1,
                 "vote_threshold": 0.5},
    "context": {"max_tokens": 32768, "window_overlap": 5},
    "prices": {"input_per_million": 0.0, "output_per_million": 0.0},
    "limits": {"concurrency": 4, "requests_per_minute": 0, "tokens_per_minute": 0, "retries": 4,
               "timeout_seconds": 120.0, "backoff_initial_seconds": 1.0, "backoff_max_seconds": 60.0,
               "cost_cap": None, "processes": None},
}

_NUM = {"type": "number", "minimum": 0}
_POS_INT = {"type": "integer", "minimum": 1}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or [], "additionalProperties": False,
            "patternProperties": {"^x-": {}}}


SCHEMA: dict[str, Any] = _obj({
    "judge": {"const": FILE_VERSION},
    "name": {"type": "string", "pattern": NAME_PATTERN},
    "description": {"type": "string"},
    "endpoint": _obj({
        "base_url": {"type": "string", "pattern": r"^https?://\S+$"},
        "model": {"type": "string", "minLength": 1, "maxLength": 300},
        "api_key_env": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
    }, ["base_url", "model", "api_key_env"]),
    "taxonomy": {"type": "string", "pattern": r"^[a-z0-9-]+(@v?[0-9]+)?$"},
    "strategy": {"enum": list(STRATEGIES)},
    "output": {"enum": list(OUTPUT_MODES)},
    "modes": {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}, "minItems": 1},
    "prompts": _obj({"system": {"type": "string", "minLength": 1}, "user": {"type": "string", "minLength": 1}}),
    "sampling": _obj({
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "max_tokens": {"type": "integer", "minimum": 16, "maximum": 1_000_000},
        "seed": {"type": ["integer", "null"]},
        "samples": {"type": "integer", "minimum": 1, "maximum": 25},
        "vote_threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    }),
    "context": _obj({
        "max_tokens": {"type": "integer", "minimum": 512},
        "window_overlap": {"type": "integer", "minimum": 0, "maximum": 1000},
    }),
    "prices": _obj({"input_per_million": _NUM, "output_per_million": _NUM}),
    "limits": _obj({
        "concurrency": {"type": "integer", "minimum": 1, "maximum": 512},
        "requests_per_minute": {"type": "integer", "minimum": 0},
        "tokens_per_minute": {"type": "integer", "minimum": 0},
        "retries": {"type": "integer", "minimum": 0, "maximum": 20},
        "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
        "backoff_initial_seconds": _NUM,
        "backoff_max_seconds": _NUM,
        "cost_cap": {"type": ["number", "null"], "minimum": 0},
        "processes": {"type": ["integer", "null"], "minimum": 1, "maximum": 64},
    }),
}, ["judge", "name", "endpoint", "taxonomy", "strategy"])


class JudgeFileError(ValueError):
    """A judge file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class JudgeDef:
    """A checked judge file: the normalised definition, its content hash and version."""

    definition: dict[str, Any]
    content_hash: str
    source: str

    @property
    def name(self) -> str:
        return self.definition["name"]

    @property
    def version(self) -> str:
        return self.content_hash[:16]

    @property
    def strategy(self) -> str:
        return self.definition["strategy"]

    @property
    def is_attribution(self) -> bool:
        return self.strategy in ATTRIBUTION_STRATEGIES


def _path(err: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in err.absolute_path)


def _message(err: jsonschema.ValidationError) -> str:
    where = _path(err)
    if err.validator == "additionalProperties":
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(k for k in err.instance if k not in allowed and not str(k).startswith("x-"))
        key = f"{where}.{extra[0]}" if where else str(extra[0])
        return f"{key}: unknown key (allowed here: {', '.join(sorted(allowed))})"
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        key = f"{where}.{missing}" if where else missing
        return f"{key}: required key is missing"
    if err.validator == "enum":
        return f"{where}: must be one of {', '.join(map(str, err.validator_value))}, got {err.instance!r}"
    if err.validator == "const":
        return f"{where}: must be {err.validator_value!r} (the judge file format version), got {err.instance!r}"
    if err.validator == "pattern" and where == "name":
        return f"name: {err.instance!r} is not a judge name (lowercase letters, digits, '.', '_', '-'; at most 63)"
    return f"{where or '(top level)'}: {err.message}"


def _merge(defaults: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    out = dict(defaults)
    for k, v in (given or {}).items():
        out[k] = v
    return out


def normalise(doc: dict[str, Any]) -> dict[str, Any]:
    """The definition with every default filled in and the built-in prompts written out."""
    from app.judges.prompts import default_prompts

    d: dict[str, Any] = {k: v for k, v in doc.items() if not str(k).startswith("x-")}
    for key in ("description", "output", "modes"):
        d.setdefault(key, DEFAULTS[key])
    for key in ("sampling", "context", "prices", "limits"):
        d[key] = _merge(DEFAULTS[key], {k: v for k, v in (doc.get(key) or {}).items() if not k.startswith("x-")})
    d["endpoint"] = {k: v for k, v in doc["endpoint"].items() if not k.startswith("x-")}
    prompts = default_prompts(d["strategy"])
    prompts.update({k: v for k, v in (doc.get("prompts") or {}).items() if not k.startswith("x-")})
    d["prompts"] = prompts
    return d


def version_of(definition: dict[str, Any], taxonomy_hash: str = "") -> str:
    """sha256 over what can change an answer: all but `OPERATIONAL_KEYS` and the endpoint's
    address and key variable, plus the taxonomy version's own content hash."""
    d = {k: v for k, v in definition.items() if k not in OPERATIONAL_KEYS}
    d["endpoint"] = {k: v for k, v in definition["endpoint"].items() if k not in OPERATIONAL_ENDPOINT_KEYS}
    d["taxonomy_content"] = taxonomy_hash
    text = json.dumps(d, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def check_document(doc: Any, where: str = "judge file") -> dict[str, Any]:
    """Validate a parsed document; raises JudgeFileError naming `where` and the first bad key."""
    if not isinstance(doc, dict):
        raise JudgeFileError(f"{where}: must be a mapping of keys (judge: 1, name, endpoint, taxonomy, strategy)")
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc),
                    key=lambda e: (len(list(e.absolute_path)), _path(e)))
    if errors:
        raise JudgeFileError(f"{where}: {_message(errors[0])}")
    from jinja2 import TemplateSyntaxError

    from app.judges.prompts import environment

    env = environment()
    for key, text in (doc.get("prompts") or {}).items():
        if key.startswith("x-"):
            continue
        try:
            env.parse(text)
        except TemplateSyntaxError as exc:
            raise JudgeFileError(f"{where}: prompts.{key}: template error at line {exc.lineno}: {exc.message}") from None
    lim = doc.get("limits") or {}
    if lim.get("backoff_max_seconds") is not None and lim.get("backoff_initial_seconds") is not None \
            and lim["backoff_max_seconds"] < lim["backoff_initial_seconds"]:
        raise JudgeFileError(f"{where}: limits.backoff_max_seconds: smaller than limits.backoff_initial_seconds")
    return doc


def parse_judge_text(text: str, where: str = "judge file", taxonomy_hash: str = "",
                     taxonomy_ref: str | None = None) -> JudgeDef:
    """Read, check and normalise a judge file's text. `taxonomy_ref` (the resolved `key@version`)
    and `taxonomy_hash` (that version's content hash) pin the taxonomy into the version."""
    try:
        doc = safeyaml.load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc)
        raise JudgeFileError(f"{where}:{line} not valid YAML: {reason}") from None
    check_document(doc, where)
    definition = normalise(doc)
    if taxonomy_ref:
        definition["taxonomy"] = taxonomy_ref
    if doc.get("prompts"):
        try_render(definition, where)
    return JudgeDef(definition=definition, content_hash=version_of(definition, taxonomy_hash), source=text)


_SAMPLE_RUN = {
    "run_id": "sample", "status": "completed",
    "scenario": {"id": "sample/s", "family": "sample", "title": "Sample"},
    "principals": [{"id": "p1", "name": "P1", "objective": "o"}, {"id": "p2", "name": "P2"}],
    "agents": [{"id": "a1", "principal": "p1", "private_state": {"k": 1}}, {"id": "a2", "principal": "p2"}],
    "events": [{"seq": 0, "kind": "message", "actor": "a1", "recipients": ["a2"], "visibility": "shared",
                "content": "hi"},
               {"seq": 1, "kind": "tool_call", "actor": "a2", "recipients": [], "visibility": "private"}],
}
_SAMPLE_TAX = {"name": "T", "categories": [{"code": "C", "name": "C"}],
               "modes": [{"code": "M1", "name": "M", "category": "C", "definition": "d", "boundary": "b"}]}


def try_render(definition: dict[str, Any], where: str) -> None:
    """Render a file's own templates for every kind of call of its strategy on a small sample run, so
    that a misspelt variable or a forbidden attribute is found when the file is checked, not per run."""
    from jinja2 import TemplateError

    from app.judges.prompts import call_variables, render_messages, run_view, split_windows, taxonomy_vars

    view = run_view(_SAMPLE_RUN, taxonomy_vars(_SAMPLE_TAX, "t", 1))
    win = split_windows(view.lines, 10 ** 6, 0)[0]
    kinds = {"all-at-once": [("labels", "labels", {})],
             "per-agent": [("agent", "labels", {"focus_agent": view.agents[0]})],
             "per-mode": [("mode", "present", {"focus_mode": view.modes[0]})],
             "attribution-all-at-once": [("attribution", "attribution", {})],
             "attribution-step-by-step": [("step", "attribution_nullable", {"step": {"seq": 1, "actor": "a2"}})],
             "attribution-binary-search": [("segment", "attribution", {"segment": {"first_seq": 0, "last_seq": 1}})],
             }
    kinds["attribution-hybrid"] = kinds["attribution-all-at-once"] + [
        ("step", "attribution_nullable", {"step": {"seq": 1, "actor": "a2"}, "suspect": "a2"})]
    for kind, answer, extras in kinds[definition["strategy"]]:
        for key in ("system", "user"):
            try:
                render_messages({"system": definition["prompts"]["system"] if key == "system" else "",
                                 "user": definition["prompts"]["user"] if key == "user" else ""},
                                call_variables(view, win, kind=kind, answer=answer, **extras))
            except TemplateError as exc:
                line = getattr(exc, "lineno", None)
                raise JudgeFileError(f"{where}: prompts.{key}:{f' line {line}:' if line else ''} "
                                     f"{type(exc).__name__}: {exc}") from None


def split_ref(ref: str) -> tuple[str, str | None]:
    """``name`` or ``name@version`` -> (name, version or None)."""
    name, _, version = ref.partition("@")
    return name, (version or None)


def looks_like_name(ref: str) -> bool:
    return re.match(NAME_PATTERN, split_ref(ref)[0]) is not None
