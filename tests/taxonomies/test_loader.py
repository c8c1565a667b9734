"""The loader on small hand-written taxonomy files: hashing, defaults, and every kind of broken file."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from app.taxonomies.loader import (
    BUILTIN_TAXONOMY_DIR,
    TaxonomyError,
    builtin_taxonomy_files,
    format_path,
    load_taxonomy_file,
    load_taxonomy_text,
    parse_taxonomy,
    validate_file,
)


def small() -> dict:
    """A valid two-category taxonomy."""
    return {
        "schema_version": 1,
        "key": "tiny-tax",
        "name": "Tiny",
        "description": "A small taxonomy.",
        "provenance": {"statement": "Written for the tests."},
        "categories": [{"code": "A", "name": "Alpha"}, {"code": "B", "name": "Beta"}],
        "modes": [
            {"code": "A1", "name": "First", "category": "A", "definition": "When the first thing happens."},
            {"code": "A2", "name": "Second", "category": "A", "definition": "When the second happens."},
            {
                "code": "B1",
                "name": "Third",
                "category": "B",
                "definition": "When the third happens.",
                "aliases": ["Old third"],
            },
        ],
    }


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    elif name.endswith(".json"):
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def reference_hash(definition: dict) -> str:
    text = json.dumps(definition, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------ valid files


def test_small_file_loads_with_defaults_filled(tmp_path):
    t = load_taxonomy_file(write(tmp_path, "tiny.yaml", small()))
    assert t.key == "tiny-tax" and t.source_file == str(tmp_path / "tiny.yaml")
    assert t.codes == ["A1", "A2", "B1"]
    assert t.mode_category() == {"A1": "A", "A2": "A", "B1": "B"}
    assert t.mode("A1") == {
        "code": "A1",
        "name": "First",
        "category": "A",
        "definition": "When the first thing happens.",
        "boundary": "",
        "hint": "",
        "aliases": [],
    }
    assert t.mode("old THIRD")["code"] == "B1"
    assert t.categories[1] == {"code": "B", "name": "Beta", "description": ""}
    assert t.provenance == {"statement": "Written for the tests.", "status": "", "citation": "", "url": ""}
    # no label_fields in the file: the standard ones
    assert [f["name"] for f in t.label_fields] == [
        "mode",
        "agent",
        "principals",
        "evidence",
        "note",
        "confidence",
    ]
    assert t.definition["modes"] is t.modes


def test_provenance_may_be_a_plain_statement(tmp_path):
    data = small()
    data["provenance"] = "Written for the tests."
    as_string = load_taxonomy_file(write(tmp_path, "s.yaml", data))
    as_object = load_taxonomy_file(write(tmp_path, "o.yaml", small()))
    assert as_string.provenance == as_object.provenance
    assert as_string.content_hash == as_object.content_hash


def test_content_hash_is_sha256_of_canonical_json(tmp_path):
    t = load_taxonomy_file(write(tmp_path, "tiny.yaml", small()))
    assert t.content_hash == reference_hash(t.definition)
    assert len(t.content_hash) == 64


@pytest.mark.parametrize("builtin", ["a2-failures.yaml", "mast.yaml"])
def test_builtin_hash_survives_reformatting_and_json(tmp_path, builtin):
    original = load_taxonomy_file(BUILTIN_TAXONOMY_DIR / builtin)
    raw = yaml.safe_load((BUILTIN_TAXONOMY_DIR / builtin).read_text(encoding="utf-8"))
    # different indentation, key order, line width, plus comments
    reflowed = "# a comment\n\n" + yaml.safe_dump(raw, sort_keys=True, indent=4, width=30, allow_unicode=True)
    assert load_taxonomy_file(write(tmp_path, "r.yaml", reflowed)).content_hash == original.content_hash
    assert load_taxonomy_file(write(tmp_path, "r.json", raw)).content_hash == original.content_hash
    # the stored definition is itself a valid file with the same hash (normalization is idempotent)
    again = parse_taxonomy(original.definition)
    assert again.definition == original.definition
    assert again.content_hash == original.content_hash


def test_hash_ignores_whitespace_inside_text(tmp_path):
    one = """\
schema_version: 1
key: tiny-tax
name: Tiny
description: A small taxonomy.
provenance: {statement: Written for the tests.}
categories: [{code: A, name: Alpha}, {code: B, name: Beta}]
modes:
  - {code: A1, name: First, category: A, definition: When the first thing happens.}
  - {code: A2, name: Second, category: A, definition: When the second happens.}
  - {code: B1, name: Third, category: B, definition: When the third happens., aliases: [Old third]}
"""
    two = """\
# same content, other layout
schema_version: 1
key: tiny-tax
name:   "Tiny  "
description: >
  A small
      taxonomy.
provenance:
  statement: |
    Written for
    the tests.
categories:
  - code: A
    name: Alpha
  - {code: B, name: Beta}   # inline
modes:
  - code: A1
    name: First
    category: A
    definition: "When the first\tthing happens.\\n"
  - code: A2
    name: Second
    category: A
    definition: >-
      When the second
      happens.
  - code: B1
    name: Third
    category: B
    definition: When the third happens.
    aliases:
      - Old   third
"""
    h1 = load_taxonomy_file(write(tmp_path, "one.yaml", one)).content_hash
    h2 = load_taxonomy_file(write(tmp_path, "two.yaml", two)).content_hash
    h3 = load_taxonomy_file(write(tmp_path, "three.yaml", small())).content_hash
    assert h1 == h2 == h3


def _edit_hint(d):
    d["modes"][0]["hint"] = "Look here."


def _edit_definition(d):
    d["modes"][0]["definition"] = "When the first thing happens!"


def _edit_category_name(d):
    d["categories"][0]["name"] = "Alpha!"


def _add_paragraph(d):
    d["description"] = "A small\n\ntaxonomy."


def _add_alias(d):
    d["modes"][0]["aliases"] = ["Earlier"]


def _add_extension(d):
    d["x-source"] = "paper"


def _reorder_modes(d):
    d["modes"][0], d["modes"][1] = d["modes"][1], d["modes"][0]


def _edit_label_fields(d):
    d["label_fields"] = [{"name": "mode", "required": True}]


@pytest.mark.parametrize(
    "edit",
    [
        _edit_hint,
        _edit_definition,
        _edit_category_name,
        _add_paragraph,
        _add_alias,
        _add_extension,
        _reorder_modes,
        _edit_label_fields,
    ],
)
def test_any_content_change_changes_the_hash(tmp_path, edit):
    base = load_taxonomy_file(write(tmp_path, "base.yaml", small()))
    changed = small()
    edit(changed)
    other = load_taxonomy_file(write(tmp_path, "changed.yaml", changed))
    assert other.content_hash != base.content_hash
    assert other.content_hash == reference_hash(other.definition)


def test_load_taxonomy_text_reads_yaml_and_json():
    data = small()
    from_yaml = load_taxonomy_text(yaml.safe_dump(data), source="upload.yaml")
    from_json = load_taxonomy_text(json.dumps(data), source="upload.json", fmt="json")
    assert from_yaml.content_hash == from_json.content_hash
    with pytest.raises(TaxonomyError, match="upload: unsupported format 'toml'"):
        load_taxonomy_text("", source="upload", fmt="toml")


def test_builtin_taxonomy_files_lists_only_taxonomy_files_sorted(tmp_path):
    for name in ["b.yml", "a.yaml", "c.json", "notes.md", ".hidden.yaml"]:
        (tmp_path / name).write_text("x", encoding="utf-8")
    (tmp_path / "sub.yaml").mkdir()
    assert [p.name for p in builtin_taxonomy_files(tmp_path)] == ["a.yaml", "b.yml", "c.json"]
    with pytest.raises(TaxonomyError, match="taxonomy folder not found"):
        builtin_taxonomy_files(tmp_path / "missing")


def test_format_path():
    assert format_path(["modes", 3, "category"]) == "modes[3].category"
    assert format_path(["modes", 1, "aliases", 0]) == "modes[1].aliases[0]"
    assert format_path([]) == "top level"


# ----------------------------------------------------------------------------------- broken files


def _mutated(edit):
    data = small()
    edit(data)
    return data


BROKEN = {
    # id: (file name, content, [substrings that one problem line must contain])
    "bad yaml": ("t.yaml", "key: tiny\nname: [unclosed\ncategories: 1\n", ["line 3, column", "invalid YAML"]),
    "bad yaml indentation": ("t.yaml", "key: tiny\n  name: x\n", ["line 2, column", "invalid YAML"]),
    "duplicate yaml key": ("t.yaml", yaml.safe_dump(small()) + "name: Again\n", ["duplicate key 'name'"]),
    "bad json": ("t.json", '{"key": "tiny",}', ["line 1, column", "invalid JSON"]),
    "duplicate json key": ("t.json", '{"key": "a", "key": "b"}', ["duplicate key 'key'"]),
    "empty file": ("t.yaml", "# only a comment\n", ["top level: the file is empty"]),
    "top level not a mapping": ("t.yaml", "- a\n- b\n", ["top level: expected a mapping, got a list"]),
    "missing mode field": (
        "t.yaml",
        _mutated(lambda d: d["modes"][1].pop("definition")),
        ["modes[1].definition: required field is missing"],
    ),
    "missing top-level field": (
        "t.yaml",
        _mutated(lambda d: d.pop("provenance")),
        ["provenance: required field is missing"],
    ),
    "missing provenance statement": (
        "t.yaml",
        _mutated(lambda d: d.update(provenance={"citation": "x"})),
        ["provenance.statement: required field is missing"],
    ),
    "duplicate mode code": (
        "t.yaml",
        _mutated(lambda d: d["modes"][2].update(code="A1", category="A")),
        ["modes[2].code: duplicate mode code 'A1' (first at modes[0])"],
    ),
    "duplicate mode code differing in case": (
        "t.yaml",
        _mutated(lambda d: d["modes"][1].update(code="a1")),
        ["modes[1].code: duplicate mode code 'a1'"],
    ),
    "duplicate category code": (
        "t.yaml",
        _mutated(lambda d: d["categories"].append({"code": "A", "name": "Again"})),
        ["categories[2].code: duplicate category code 'A' (first at categories[0])"],
    ),
    "unknown category": (
        "t.yaml",
        _mutated(lambda d: d["modes"][2].update(category="ZZ")),
        ["modes[2].category: 'ZZ' is not a declared category (declared: A, B)"],
    ),
    "empty category": (
        "t.yaml",
        _mutated(lambda d: d["categories"].append({"code": "C", "name": "Gamma"})),
        ["categories[2]: category 'C' has no modes"],
    ),
    "wrong type text": (
        "t.yaml",
        _mutated(lambda d: d["modes"][0].update(definition=5)),
        ["modes[0].definition: expected text, got a number 5"],
    ),
    "wrong type list": (
        "t.yaml",
        _mutated(lambda d: d.update(modes={"A1": "x"})),
        ["modes: expected a list, got a mapping"],
    ),
    "wrong type mode entry": (
        "t.yaml",
        _mutated(lambda d: d["modes"].append("A3")),
        ["modes[3]: expected a mapping, got text 'A3'"],
    ),
    "wrong type aliases": (
        "t.yaml",
        _mutated(lambda d: d["modes"][0].update(aliases="x")),
        ["modes[0].aliases: expected a list"],
    ),
    "unquoted numeric code": (
        "t.yaml",
        yaml.safe_dump(small()).replace("code: A1", "code: 1.1"),
        ["modes[0].code: expected text, got a number 1.1", "quotes"],
    ),
    "empty name": (
        "t.yaml",
        _mutated(lambda d: d["modes"][0].update(name="  ")),
        ["modes[0].name: must not be empty"],
    ),
    "bad key slug": (
        "t.yaml",
        _mutated(lambda d: d.update(key="Tiny Tax")),
        ["key: 'Tiny Tax' is not a valid key"],
    ),
    "bad code": (
        "t.yaml",
        _mutated(lambda d: d["modes"][0].update(code="A 1")),
        ["modes[0].code: 'A 1' is not a valid code"],
    ),
    "misspelt field": (
        "t.yaml",
        _mutated(lambda d: d["modes"][0].update(defintion="x")),
        ["modes[0].defintion: unknown field"],
    ),
    "unsupported schema version": (
        "t.yaml",
        _mutated(lambda d: d.update(schema_version=2)),
        ["schema_version: unsupported schema_version 2"],
    ),
    "no modes": ("t.yaml", _mutated(lambda d: d.update(modes=[])), ["modes: must list at least 1 item"]),
    "alias clashes with another mode": (
        "t.yaml",
        _mutated(lambda d: d["modes"][0].update(aliases=["third"])),
        ["modes[0].aliases[0]: alias 'third' is the same as the name 'Third' of modes[2]"],
    ),
    "label fields without mode": (
        "t.yaml",
        _mutated(lambda d: d.update(label_fields=[{"name": "agent", "required": True}])),
        ["label_fields: must include a field named 'mode'"],
    ),
    "unknown label field": (
        "t.yaml",
        _mutated(lambda d: d.update(label_fields=[{"name": "mode"}, {"name": "severity"}])),
        ["label_fields[1].name: 'severity' is not one of"],
    ),
    "date value": (
        "t.yaml",
        yaml.safe_dump(small()) + "x-released: 2024-05-01\n",
        ["x-released: date value", "quote it"],
    ),
    "non-text field name": (
        "t.yaml",
        yaml.safe_dump(small()) + "1: one\n",
        ["top level: field name 1 must be text"],
    ),
    "unsupported extension": ("t.txt", "key: x\n", ["unsupported file type '.txt'"]),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_broken_file_names_file_and_field(tmp_path, case):
    name, content, expected = BROKEN[case]
    path = write(tmp_path, name, content)
    problems = validate_file(path)
    assert problems, "a broken file must report a problem"
    assert all(line.startswith(f"{path}: ") for line in problems), problems
    assert any(all(part in line for part in expected) for line in problems), problems
    with pytest.raises(TaxonomyError) as info:
        load_taxonomy_file(path)
    assert not isinstance(info.value, KeyError)
    assert info.value.problems == problems
    assert str(info.value) == "\n".join(problems)


def test_message_format_matches_the_documented_example(tmp_path):
    data = small()
    data["modes"][2]["category"] = "ZZ"
    path = write(tmp_path, "x.yaml", data)
    assert f"{path}: modes[2].category: 'ZZ' is not a declared category" in str(
        pytest.raises(TaxonomyError, load_taxonomy_file, path).value
    )


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    assert validate_file(path) == [f"{path}: file not found"]
    with pytest.raises(TaxonomyError, match="nope.yaml: file not found"):
        load_taxonomy_file(path)


def test_all_problems_are_reported_at_once(tmp_path):
    data = small()
    data["key"] = "Bad Key"
    data["modes"][0]["category"] = "ZZ"
    data["modes"][1]["definition"] = 7
    del data["modes"][2]["name"]
    problems = validate_file(write(tmp_path, "many.yaml", data))
    fields = [line.split(": ")[1] for line in problems]
    assert fields == ["key", "modes[0].category", "modes[1].definition", "modes[2].name"]


def test_parse_taxonomy_rejects_bad_data_with_the_source_name():
    data = copy.deepcopy(small())
    data["modes"][0]["category"] = "ZZ"
    with pytest.raises(TaxonomyError, match=r"^stored: modes\[0\]\.category: 'ZZ'"):
        parse_taxonomy(data, source="stored")
