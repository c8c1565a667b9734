"""JSON Schema (draft 2020-12) for taxonomy files, schema_version 1.

A taxonomy file (YAML or JSON) has the top-level fields ``schema_version``, ``key``, ``name``,
``description``, ``provenance``, ``label_fields``, ``categories``, ``modes`` and optionally
``attribution`` (an attribution schema: labels name agent, step and reason; then the modes may be
empty); see
``taxonomy/a2-failures.yaml`` for a full example. Fields whose name starts with ``x-`` are allowed
at every level as user extensions and are kept as they are. Checks that a schema cannot express
(unique codes, declared categories, no empty category, ...) live in :mod:`app.taxonomies.loader`.
"""

from __future__ import annotations

from typing import Any

#: The only file format version this code reads.
SCHEMA_VERSION = 1

#: Taxonomy keys: lowercase slug, e.g. ``a2-failures``.
KEY_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
#: Mode and category codes: letters and digits, with ``.``, ``_`` or ``-`` inside (``DD1``, ``1.1``).
CODE_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"
#: The label fields a label can record (columns of a stored label).
LABEL_FIELD_NAMES = ("mode", "agent", "principals", "evidence", "note", "confidence")
#: Label fields that hold a list of values (the only ones where ``min_items`` applies).
LIST_LABEL_FIELDS = ("principals", "evidence")

KEY_MAX_LENGTH = 100
NAME_MAX_LENGTH = 300
CODE_MAX_LENGTH = 40

_EXTENSIONS: dict[str, Any] = {"^x-": {}}
_TEXT: dict[str, Any] = {"type": "string"}
_NON_EMPTY_TEXT: dict[str, Any] = {"type": "string", "pattern": r"\S"}
_CODE: dict[str, Any] = {"type": "string", "pattern": CODE_PATTERN, "maxLength": CODE_MAX_LENGTH}


def _strict_object(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema that rejects unknown fields other than ``x-...`` extensions."""
    return {
        "type": "object",
        "required": required,
        "properties": properties,
        "patternProperties": _EXTENSIONS,
        "additionalProperties": False,
    }


_PROVENANCE: dict[str, Any] = {
    # Either a plain statement or an object; the loader turns a string into {"statement": ...}.
    "type": ["string", "object"],
    "pattern": r"\S",
    "required": ["statement"],
    "properties": {
        "statement": _NON_EMPTY_TEXT,
        "status": _TEXT,
        "citation": _TEXT,
        "url": _TEXT,
    },
    "patternProperties": _EXTENSIONS,
    "additionalProperties": False,
}

_LABEL_FIELD = _strict_object(
    ["name"],
    {
        "name": {"type": "string", "enum": list(LABEL_FIELD_NAMES)},
        "required": {"type": "boolean"},
        "min_items": {"type": "integer", "minimum": 0},
        "description": _TEXT,
    },
)

_CATEGORY = _strict_object(
    ["code", "name"],
    {
        "code": _CODE,
        "name": {**_NON_EMPTY_TEXT, "maxLength": NAME_MAX_LENGTH},
        "description": _TEXT,
    },
)

_MODE = _strict_object(
    ["code", "name", "category", "definition"],
    {
        "code": _CODE,
        "name": {**_NON_EMPTY_TEXT, "maxLength": NAME_MAX_LENGTH},
        "category": _CODE,
        "definition": _NON_EMPTY_TEXT,
        "boundary": _TEXT,
        "hint": _TEXT,
        "aliases": {"type": "array", "items": _NON_EMPTY_TEXT},
        # keys of the detectors (app.detectors) whose candidates are labelled with this mode
        "detectors": {"type": "array", "uniqueItems": True,
                      "items": {"type": "string", "pattern": CODE_PATTERN, "maxLength": KEY_MAX_LENGTH}},
    },
)

#: An attribution schema (Who&When's shape): a label names the responsible agent, the step (one event
#: seq: the decisive mistake) and a reason (the label's note). ``reason``: ``required`` or ``optional``
#: (default); ``k``: the step tolerance the agreement page uses first (steps within +-k agree).
_ATTRIBUTION = _strict_object(
    [],
    {
        "description": _TEXT,
        "reason": {"enum": ["required", "optional"]},
        "k": {"type": "integer", "minimum": 0, "maximum": 1000},
    },
)

#: The JSON Schema of a taxonomy file (a plain dict, usable with any ``jsonschema`` validator).
TAXONOMY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "a2annotate taxonomy file",
    **_strict_object(
        ["schema_version", "key", "name", "provenance", "categories", "modes"],
        {
            "schema_version": {"const": SCHEMA_VERSION},
            "key": {"type": "string", "pattern": KEY_PATTERN, "maxLength": KEY_MAX_LENGTH},
            "name": {**_NON_EMPTY_TEXT, "maxLength": NAME_MAX_LENGTH},
            "description": _TEXT,
            "provenance": _PROVENANCE,
            "label_fields": {"type": "array", "minItems": 1, "items": _LABEL_FIELD},
            "categories": {"type": "array", "items": _CATEGORY},
            "modes": {"type": "array", "items": _MODE},
            "attribution": _ATTRIBUTION,
        },
    ),
    # a taxonomy of failure modes needs at least one; an attribution taxonomy may have none
    "if": {"not": {"required": ["attribution"]}},
    "then": {"properties": {"categories": {"minItems": 1}, "modes": {"minItems": 1}}},
}
