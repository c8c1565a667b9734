"""Read, validate and normalize taxonomy files (YAML or JSON). Pure: no database, no web.

A taxonomy file is checked against :data:`app.taxonomies.schema.TAXONOMY_SCHEMA` and then
semantically (unique codes, declared categories, no empty category, ...). Every problem is reported
as ``FILE: FIELD-PATH: message``, e.g. ``taxonomy/x.yaml: modes[3].category: 'ZZ' is not a declared
category (declared: DD, GR)``; list indexes in field paths count from 0.

The normalized definition fills defaults, trims and re-flows text (runs of whitespace become one
space, blank lines between paragraphs are kept), so re-indenting, re-wrapping or commenting a YAML
file keeps its :attr:`TaxonomyDef.content_hash`, while any change of content gives a new hash.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from app.taxonomies.schema import (
    CODE_PATTERN,
    KEY_PATTERN,
    LIST_LABEL_FIELDS,
    SCHEMA_VERSION,
    TAXONOMY_SCHEMA,
)

#: File name endings read as taxonomy files.
TAXONOMY_SUFFIXES = (".yaml", ".yml", ".json")
#: The folder of built-in taxonomy files (``taxonomy/`` at the repository root).
BUILTIN_TAXONOMY_DIR = Path(__file__).resolve().parents[2] / "taxonomy"

#: Label fields used when a file has no ``label_fields`` (what each label records).
DEFAULT_LABEL_FIELDS: tuple[dict[str, Any], ...] = (
    {"name": "mode", "required": True, "description": "The failure mode's code in this taxonomy."},
    {"name": "agent", "required": True, "description": "The responsible agent."},
    {"name": "principals", "required": False, "description": "The affected principal(s)."},
    {"name": "evidence", "required": True, "min_items": 1, "description": "The event(s) that show it."},
    {"name": "note", "required": False, "description": "Free-text note."},
    {"name": "confidence", "required": False, "description": "Confidence from 0 to 1."},
)

_VALIDATOR = Draft202012Validator(TAXONOMY_SCHEMA)

Problem = tuple[list[Any], str]  # (field path, message)


class TaxonomyError(ValueError):
    """A taxonomy file (or lookup) is invalid. ``problems`` lists every problem, one line each."""

    def __init__(self, problems: Sequence[str]):
        self.problems: list[str] = list(problems)
        super().__init__("\n".join(self.problems))


class UnknownModeError(TaxonomyError, LookupError):
    """A mode code, name or alias is not in the taxonomy."""


@dataclass(frozen=True)
class TaxonomyDef:
    """A validated, normalized taxonomy. ``definition`` is the dict to store; the other fields are
    views of it (``categories`` and ``modes`` are the same lists as in ``definition``)."""

    key: str
    name: str
    description: str
    provenance: dict[str, Any]
    categories: list[dict[str, Any]]
    modes: list[dict[str, Any]]
    label_fields: list[dict[str, Any]]
    definition: dict[str, Any]
    content_hash: str
    source_file: str | None = None
    _by_code: dict[str, dict[str, Any]] = field(init=False, repr=False, compare=False)
    _by_key: dict[str, dict[str, Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_code = {m["code"]: m for m in self.modes}
        by_key: dict[str, dict[str, Any]] = {}
        for m in self.modes:
            for text in (m["code"], m["name"], *m.get("aliases", [])):
                by_key.setdefault(lookup_key(text), m)
        object.__setattr__(self, "_by_code", by_code)
        object.__setattr__(self, "_by_key", by_key)

    @property
    def codes(self) -> list[str]:
        """Returns the mode codes in file order."""
        return [m["code"] for m in self.modes]

    def mode_category(self) -> dict[str, str]:
        """Returns a dict mode code -> category code."""
        return {m["code"]: m["category"] for m in self.modes}

    def mode(self, code_or_alias: str) -> dict[str, Any]:
        """Returns (a copy of) the mode with this code, name or alias.

        Codes match exactly, then ignoring case; names and aliases match ignoring case, spacing,
        ``-`` and ``_``. Raises :class:`UnknownModeError` when nothing matches."""
        if isinstance(code_or_alias, bool) or not isinstance(code_or_alias, (str, int, float)):
            raise UnknownModeError(
                [f"{self.key}: a mode code must be text, got {type(code_or_alias).__name__}"]
            )
        text = str(code_or_alias)
        found = self._by_code.get(text.strip()) or self._by_key.get(lookup_key(text))
        if found is None:
            raise UnknownModeError([f"{self.key}: no mode {text!r} (codes: {', '.join(self.codes)})"])
        return copy.deepcopy(found)

    def category(self, code: str) -> dict[str, Any]:
        """Returns (a copy of) the category with this code; raises :class:`UnknownModeError`."""
        for c in self.categories:
            if c["code"] == code:
                return copy.deepcopy(c)
        declared = ", ".join(c["code"] for c in self.categories)
        raise UnknownModeError([f"{self.key}: no category {code!r} (categories: {declared})"])


# --------------------------------------------------------------------------- public functions


def load_taxonomy_file(path: str | Path) -> TaxonomyDef:
    """Returns the validated :class:`TaxonomyDef` of a YAML/JSON file; raises :class:`TaxonomyError`
    naming the file and the offending field for every problem found."""
    source = str(path)
    data, problems = _read_file(Path(path), source)
    if problems:
        raise TaxonomyError(problems)
    return parse_taxonomy(data, source=source, source_file=source)


def load_taxonomy_text(text: str, source: str = "<text>", fmt: str = "yaml") -> TaxonomyDef:
    """Returns the :class:`TaxonomyDef` of YAML (``fmt="yaml"``) or JSON (``fmt="json"``) text;
    ``source`` names it in error messages. Raises :class:`TaxonomyError`."""
    if fmt not in ("yaml", "json"):
        raise TaxonomyError([f"{source}: unsupported format {fmt!r}: expected 'yaml' or 'json'"])
    data, problems = _parse_text(text, source, fmt)
    if problems:
        raise TaxonomyError(problems)
    return parse_taxonomy(data, source=source)


def parse_taxonomy(data: Any, source: str = "<data>", source_file: str | None = None) -> TaxonomyDef:
    """Returns the :class:`TaxonomyDef` of already-parsed data (e.g. a stored ``definition``);
    raises :class:`TaxonomyError` with every problem, each prefixed by ``source``."""
    problems = _data_problems(data, source)
    if problems:
        raise TaxonomyError(problems)
    definition = _normalize(data)
    return TaxonomyDef(
        key=definition["key"],
        name=definition["name"],
        description=definition["description"],
        provenance=definition["provenance"],
        categories=definition["categories"],
        modes=definition["modes"],
        label_fields=definition["label_fields"],
        definition=definition,
        content_hash=content_hash(definition),
        source_file=source_file,
    )


def validate_file(path: str | Path) -> list[str]:
    """Returns the problems of a taxonomy file, one message each (``FILE: FIELD: message``);
    an empty list when the file is valid."""
    source = str(path)
    data, problems = _read_file(Path(path), source)
    if problems:
        return problems
    return _data_problems(data, source)


def builtin_taxonomy_files(directory: str | Path | None = None) -> list[Path]:
    """Returns the taxonomy files (``.yaml``, ``.yml``, ``.json``; not hidden) in ``directory``
    (default: the built-in ``taxonomy/`` folder), sorted by file name."""
    folder = Path(directory) if directory is not None else BUILTIN_TAXONOMY_DIR
    if not folder.is_dir():
        raise TaxonomyError([f"{folder}: taxonomy folder not found"])
    return sorted(
        (
            p
            for p in folder.iterdir()
            if p.is_file() and p.suffix.lower() in TAXONOMY_SUFFIXES and not p.name.startswith(".")
        ),
        key=lambda p: p.name,
    )


def canonical_json(value: Any) -> str:
    """Returns the canonical JSON text of ``value``: sorted keys, no spaces, UTF-8 characters kept."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def content_hash(definition: dict[str, Any]) -> str:
    """Returns the sha256 hex digest of the canonical JSON of a normalized definition."""
    return hashlib.sha256(canonical_json(definition).encode("utf-8")).hexdigest()


def lookup_key(text: str) -> str:
    """Returns the form in which codes, names and aliases are compared: case-folded, ``-``/``_``
    read as spaces, runs of whitespace collapsed."""
    text = unicodedata.normalize("NFC", text).casefold().replace("\u2019", "'")
    return " ".join(re.sub(r"[-_]", " ", text).split())


# --------------------------------------------------------------------------- reading


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML loader that rejects a key given twice in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable key: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
        return super().construct_mapping(node, deep=deep)


class _DuplicateJsonKey(ValueError):
    pass


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateJsonKey(k)
        out[k] = v
    return out


def _read_file(path: Path, source: str) -> tuple[Any, list[str]]:
    """Returns (parsed data, problems); the problems name the file."""
    suffix = path.suffix.lower()
    if suffix not in TAXONOMY_SUFFIXES:
        return None, [
            f"{source}: unsupported file type {suffix or '(none)'!r}: expected .yaml, .yml or .json"
        ]
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, [f"{source}: file not found"]
    except IsADirectoryError:
        return None, [f"{source}: is a folder, not a file"]
    except OSError as exc:
        return None, [f"{source}: cannot read file: {exc.strerror or exc}"]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [f"{source}: byte {exc.start}: not UTF-8 text"]
    return _parse_text(text, source, "json" if suffix == ".json" else "yaml")


def _parse_text(text: str, source: str, fmt: str) -> tuple[Any, list[str]]:
    if fmt == "json":
        try:
            return json.loads(text, object_pairs_hook=_json_pairs), []
        except _DuplicateJsonKey as exc:
            return None, [f"{source}: duplicate key {exc.args[0]!r}"]
        except json.JSONDecodeError as exc:
            return None, [f"{source}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"]
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        detail = exc.problem or exc.context or "parse error"
        if exc.context and exc.problem:
            detail = f"{exc.problem} ({exc.context})"
        return None, [f"{source}: {where}: invalid YAML: {detail}"]
    except yaml.YAMLError as exc:
        return None, [f"{source}: invalid YAML: {exc}"]
    if data is None:
        return None, [f"{source}: top level: the file is empty; expected a taxonomy mapping"]
    return data, []


# --------------------------------------------------------------------------- checks


def _data_problems(data: Any, source: str) -> list[str]:
    """Returns every problem of parsed data as ``SOURCE: PATH: message`` lines."""
    plain = _plain_data_problems(data, [])
    if any(_is_key_problem(msg) for _path, msg in plain):
        found = plain  # non-text field names: the schema validator cannot run on such data
    else:
        found = _schema_problems(data) + _semantic_problems(data)
        reported = {tuple(map(str, path)) for path, _ in found}
        found += [(path, msg) for path, msg in plain if tuple(map(str, path)) not in reported]
    lines: list[str] = []
    for path, message in sorted(found, key=lambda p: (_sort_key(p[0]), p[1])):
        line = f"{source}: {format_path(path)}: {message}"
        if line not in lines:
            lines.append(line)
    return lines


def format_path(path: Iterable[Any]) -> str:
    """Returns a field path as text, e.g. ``modes[3].category``; ``top level`` for the root."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "top level"


def _sort_key(path: list[Any]) -> tuple[tuple[int, Any], ...]:
    return tuple((0, p) if isinstance(p, int) else (1, str(p)) for p in path)


_KEY_PROBLEM = "must be text (quote it)"


def _is_key_problem(message: str) -> bool:
    return message.endswith(_KEY_PROBLEM)


def _plain_data_problems(value: Any, path: list[Any]) -> list[Problem]:
    """YAML can produce dates, sets, binary, NaN and non-text keys; a taxonomy must be JSON data."""
    if isinstance(value, dict):
        out: list[Problem] = []
        for k, v in value.items():
            if not isinstance(k, str):
                out.append((path, f"field name {k!r} {_KEY_PROBLEM}"))
            else:
                out.extend(_plain_data_problems(v, path + [k]))
        return out
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _plain_data_problems(v, path + [i])]
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, f"{value!r} is not a finite number")]
    if value is None or isinstance(value, (str, int, float, bool)):
        return []
    return [(path, f"{type(value).__name__} value {value!r} is not plain data (quote it)")]


_TYPE_WORDS = {
    "string": "text",
    "object": "a mapping",
    "array": "a list",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "nothing",
}


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (an empty value)"
    kind = {dict: "a mapping", list: "a list", str: "text", bool: "a boolean"}.get(type(value))
    if kind is None:
        kind = "a number" if isinstance(value, (int, float)) else type(value).__name__
    shown = repr(value)
    return f"{kind} {shown[:60] + '...' if len(shown) > 60 else shown}"


def _schema_problems(data: Any) -> list[Problem]:
    out: list[Problem] = []
    for err in _VALIDATOR.iter_errors(data):
        path = list(err.absolute_path)
        kind, inst, expected = err.validator, err.instance, err.validator_value
        if kind == "required":
            out.extend(
                (path + [name], "required field is missing")
                for name in expected
                if isinstance(inst, dict) and name not in inst
            )
        elif kind == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            for k in inst:
                if k not in allowed and not str(k).startswith("x-"):
                    out.append(
                        (
                            path + [k],
                            (f"unknown field (allowed: {', '.join(allowed)}; or an x-... extension field)"),
                        )
                    )
        elif kind == "type":
            wanted = [expected] if isinstance(expected, str) else list(expected)
            message = f"expected {' or '.join(_TYPE_WORDS.get(w, w) for w in wanted)}, got {_describe(inst)}"
            if "string" in wanted and isinstance(inst, (int, float, bool)):
                message += " (put it in quotes: YAML reads unquoted 1.1 as a number, yes/no as booleans)"
            out.append((path, message))
        elif kind == "pattern":
            if expected == KEY_PATTERN:
                message = (
                    f"{inst!r} is not a valid key: use lowercase letters, digits and single "
                    "hyphens, e.g. 'a2-failures'"
                )
            elif expected == CODE_PATTERN:
                message = (
                    f"{inst!r} is not a valid code: use letters and digits, with '.', '_' or "
                    "'-' inside, e.g. 'DD1' or '1.1'"
                )
            else:
                message = "must not be empty"
            out.append((path, message))
        elif kind == "const" and path == ["schema_version"]:
            out.append(
                (
                    path,
                    (
                        f"unsupported schema_version {inst!r}: this version of a2annotate reads "
                        f"schema_version {SCHEMA_VERSION}"
                    ),
                )
            )
        elif kind == "enum":
            out.append((path, f"{inst!r} is not one of: {', '.join(map(str, expected))}"))
        elif kind == "minItems":
            out.append((path, f"must list at least {expected} item(s)"))
        elif kind == "maxLength":
            out.append((path, f"is longer than {expected} characters"))
        elif kind == "minimum":
            out.append((path, f"must be at least {expected}, got {inst!r}"))
        else:
            out.append((path, err.message))
    return out


def _semantic_problems(data: Any) -> list[Problem]:
    """Checks a schema cannot express. Tolerant of wrongly typed parts (the schema reports those)."""
    if not isinstance(data, dict):
        return []
    out: list[Problem] = []
    categories = data.get("categories") if isinstance(data.get("categories"), list) else []
    modes = data.get("modes") if isinstance(data.get("modes"), list) else []

    declared: dict[str, int] = {}
    for i, cat in enumerate(categories):
        code = cat.get("code") if isinstance(cat, dict) else None
        if not isinstance(code, str):
            continue
        if code in declared:
            out.append(
                (
                    ["categories", i, "code"],
                    f"duplicate category code {code!r} (first at categories[{declared[code]}])",
                )
            )
        else:
            declared[code] = i

    used: set[str] = set()
    # Codes are claimed first, then names, then aliases, so a clash blames the weaker one.
    entries: list[tuple[int, int, list[Any], str, Any]] = []
    for i, mode in enumerate(modes):
        if not isinstance(mode, dict):
            continue
        cat = mode.get("category")
        if isinstance(cat, str):
            used.add(cat)
            if declared and cat not in declared:
                out.append(
                    (
                        ["modes", i, "category"],
                        f"{cat!r} is not a declared category (declared: {', '.join(declared)})",
                    )
                )
        entries.append((0, i, ["modes", i, "code"], "code", mode.get("code")))
        entries.append((1, i, ["modes", i, "name"], "name", mode.get("name")))
        aliases = mode.get("aliases")
        if isinstance(aliases, list):
            entries += [(2, i, ["modes", i, "aliases", j], "alias", a) for j, a in enumerate(aliases)]
    claimed: dict[str, tuple[int, str, str]] = {}  # lookup key -> (mode index, what, text)
    for _rank, i, path, what, text in sorted(entries, key=lambda e: (e[0], e[1])):
        if not isinstance(text, str) or not text.strip():
            continue
        key = lookup_key(text)
        if key not in claimed:
            claimed[key] = (i, what, text)
            continue
        j, other_what, other_text = claimed[key]
        if j == i:
            continue  # e.g. an alias equal to the mode's own name: harmless
        if what == other_what == "code":
            msg = f"duplicate mode code {text!r} (first at modes[{j}])"
        else:
            msg = (
                f"{what} {text!r} is the same as the {other_what} {other_text!r} of modes[{j}]; "
                "codes, names and aliases must each identify one mode"
            )
        out.append((path, msg))

    mapped: dict[str, int] = {}  # detector key -> the mode index it labels
    for i, mode in enumerate(modes):
        keys = mode.get("detectors") if isinstance(mode, dict) else None
        for j, k in enumerate(keys if isinstance(keys, list) else []):
            if isinstance(k, str) and k in mapped and mapped[k] != i:
                out.append((["modes", i, "detectors", j],
                            f"detector {k!r} is already mapped to modes[{mapped[k]}]; a detector labels one mode"))
            elif isinstance(k, str):
                mapped.setdefault(k, i)

    if modes:
        for code, i in declared.items():
            if code not in used:
                out.append((["categories", i], f"category {code!r} has no modes"))

    out.extend(_label_field_problems(data.get("label_fields")))
    return out


def _label_field_problems(fields: Any) -> list[Problem]:
    if not isinstance(fields, list):
        return []
    out: list[Problem] = []
    seen: dict[str, int] = {}
    for i, f in enumerate(fields):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            continue
        name = f["name"]
        if name in seen:
            out.append(
                (
                    ["label_fields", i, "name"],
                    (f"duplicate label field {name!r} (first at label_fields[{seen[name]}])"),
                )
            )
        seen.setdefault(name, i)
        if name == "mode" and f.get("required") is False:
            out.append((["label_fields", i, "required"], "the mode of a label is always required"))
        if "min_items" in f and name not in LIST_LABEL_FIELDS:
            out.append(
                (
                    ["label_fields", i, "min_items"],
                    f"only list fields ({', '.join(LIST_LABEL_FIELDS)}) take min_items",
                )
            )
    if fields and "mode" not in seen:
        out.append((["label_fields"], "must include a field named 'mode'"))
    return out


# --------------------------------------------------------------------------- normalization


def _text(value: Any) -> str:
    """Trimmed text: NFC, runs of whitespace -> one space, paragraphs (blank-line separated) kept."""
    text = unicodedata.normalize("NFC", str(value or "")).replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n[ \t]*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def _extensions(d: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in d.items() if k.startswith("x-")}


def _normalize_label_field(f: dict[str, Any]) -> dict[str, Any]:
    name = f["name"]
    required = True if name == "mode" else bool(f.get("required", False))
    out: dict[str, Any] = {"name": name, "required": required, "description": _text(f.get("description"))}
    if name in LIST_LABEL_FIELDS:
        out["min_items"] = int(f.get("min_items", 1 if required else 0))
    return {**out, **_extensions(f)}


def _normalize_mode(m: dict[str, Any]) -> dict[str, Any]:
    code, name = m["code"].strip(), _text(m["name"])
    aliases: list[str] = []
    taken = {lookup_key(code), lookup_key(name)}
    for alias in m.get("aliases", []):
        alias = _text(alias)
        if lookup_key(alias) not in taken:
            taken.add(lookup_key(alias))
            aliases.append(alias)
    return {
        "code": code,
        "name": name,
        "category": m["category"].strip(),
        "definition": _text(m["definition"]),
        "boundary": _text(m.get("boundary")),
        "hint": _text(m.get("hint")),
        "aliases": aliases,
        # only when given, so files without detectors keep their content hash
        **({"detectors": [str(k).strip() for k in m["detectors"]]} if m.get("detectors") else {}),
        **_extensions(m),
    }


def _normalize(data: dict[str, Any]) -> dict[str, Any]:
    """Returns the normalized definition of valid data (defaults filled, text trimmed)."""
    prov = data["provenance"]
    if isinstance(prov, str):
        prov = {"statement": prov}
    provenance = {
        "statement": _text(prov["statement"]),
        "status": _text(prov.get("status")),
        "citation": _text(prov.get("citation")),
        "url": _text(prov.get("url")),
        **_extensions(prov),
    }
    fields = data.get("label_fields") or [dict(f) for f in DEFAULT_LABEL_FIELDS]
    return {
        "schema_version": data["schema_version"],
        "key": data["key"],
        "name": _text(data["name"]),
        "description": _text(data.get("description")),
        "provenance": provenance,
        "label_fields": [_normalize_label_field(f) for f in fields],
        "categories": [
            {
                "code": c["code"].strip(),
                "name": _text(c["name"]),
                "description": _text(c.get("description")),
                **_extensions(c),
            }
            for c in data["categories"]
        ],
        "modes": [_normalize_mode(m) for m in data["modes"]],
        # only when given, so files without one keep their content hash
        **({"attribution": {"description": _text(data["attribution"].get("description")),
                            "reason": data["attribution"].get("reason") or "optional",
                            "k": int(data["attribution"].get("k", 1))}}
           if isinstance(data.get("attribution"), dict) else {}),
        **_extensions(data),
    }
