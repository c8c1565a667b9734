"""The two built-in taxonomy files: content checked against values copied by hand from the spec."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from app.taxonomies.loader import (
    BUILTIN_TAXONOMY_DIR,
    TaxonomyError,
    UnknownModeError,
    builtin_taxonomy_files,
    load_taxonomy_file,
    validate_file,
)
from app.taxonomies.schema import TAXONOMY_SCHEMA

A2_FILE = BUILTIN_TAXONOMY_DIR / "a2-failures.yaml"
MAST_FILE = BUILTIN_TAXONOMY_DIR / "mast.yaml"

# Copied by hand from shared/spec/taxonomy-a2-failures.md (the tables), not from the data file.
A2_MODES = [
    ("DD1", "Peer not engaged"),
    ("DD2", "Misrouted request"),
    ("DD3", "Under-specified delegation"),
    ("DD4", "Delegation beyond mandate"),
    ("DD5", "Dropped hand-off"),
    ("GR1", "Unsupported claim about own state"),
    ("GR2", "Message-record mismatch"),
    ("GR3", "Divergent final state"),
    ("GR4", "Stale or superseded information"),
    ("GR5", "Entity or reference mix-up"),
    ("VF1", "Peer claim accepted unchecked"),
    ("VF2", "Completion accepted unchecked"),
    ("VF3", "Own action unverified"),
    ("VF4", "Contradicting evidence ignored"),
    ("VF5", "Claimed verification absent"),
    ("CF1", "Private information leaked"),
    ("CF2", "Principal's interest conceded"),
    ("CF3", "Mandate violated"),
    ("CF4", "Misrepresentation to a peer"),
    ("CF5", "Misreport to own principal"),
]
A2_CATEGORIES = [
    ("DD", "Discovery and delegation"),
    ("GR", "Grounding and record consistency"),
    ("VF", "Verification"),
    ("CF", "Conduct and fidelity"),
]
A2_EMPTY_BOUNDARY = {"GR5", "VF2", "VF3", "VF5", "CF3", "CF5"}
A2_SOME_TEXT = {
    # code: (definition, boundary), verbatim from the spec
    "DD1": (
        (
            "The task needed information or authority that only a reachable peer agent held, and the agent "
            "never contacted it (guessed, asked its own principal, or gave up)."
        ),
        "Peer was contacted but answered badly: see GR/VF modes.",
    ),
    "GR2": (
        (
            "What the agent told a peer differs from what it wrote to its own system of record, or the "
            "reverse (price agreed in the conversation is not the price in the order entry)."
        ),
        "The two agents' records differ from each other: GR3.",
    ),
    "VF5": (
        (
            "The agent said it verified or confirmed something, but the trace shows no check, or a check "
            "that could not have tested the claim."
        ),
        "",
    ),
    "CF4": (
        (
            "The agent told a peer something it knew, or could know from its own state, to be false (an "
            "invented competing offer, false claims about fees), beyond what the scenario's norms allow."
        ),
        "An honest mistake about its own state: GR1.",
    ),
}
MAST_MODES = [
    ("1.1", "1", "disobey task specification"),
    ("1.2", "1", "disobey role specification"),
    ("1.3", "1", "step repetition"),
    ("1.4", "1", "loss of conversation history"),
    ("1.5", "1", "unaware of termination conditions"),
    ("2.1", "2", "conversation reset"),
    ("2.2", "2", "fail to ask for clarification"),
    ("2.3", "2", "task derailment"),
    ("2.4", "2", "information withholding"),
    ("2.5", "2", "ignored other agent's input"),
    ("2.6", "2", "reasoning-action mismatch"),
    ("3.1", "3", "premature termination"),
    ("3.2", "3", "no or incomplete verification"),
    ("3.3", "3", "incorrect verification"),
]
MAST_CATEGORIES = [
    ("1", "specification and system design"),
    ("2", "inter-agent misalignment"),
    ("3", "task verification and termination"),
]


@pytest.fixture(scope="module")
def a2():
    return load_taxonomy_file(A2_FILE)


@pytest.fixture(scope="module")
def mast():
    return load_taxonomy_file(MAST_FILE)


def test_builtin_folder_lists_exactly_the_built_in_files():
    # the two taxonomies, MAST's two drafts used by MAD's human annotation rounds, and Who&When's
    # attribution schema (agent, step, reason; no modes)
    assert [p.name for p in builtin_taxonomy_files()] == [
        "a2-failures.yaml", "mast-draft-r1.yaml", "mast-draft-r2.yaml", "mast.yaml", "who-and-when.yaml"]


@pytest.mark.parametrize("path", [A2_FILE, MAST_FILE, BUILTIN_TAXONOMY_DIR / "who-and-when.yaml"],
                         ids=lambda p: p.name)
def test_builtin_files_are_valid(path):
    assert validate_file(path) == []
    # the schema is usable on its own, too
    jsonschema.Draft202012Validator.check_schema(TAXONOMY_SCHEMA)
    jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), TAXONOMY_SCHEMA)


def test_a2_failures_counts_codes_names_and_categories(a2):
    assert a2.key == "a2-failures"
    assert len(a2.modes) == 20 and len(a2.categories) == 4
    assert [(m["code"], m["name"]) for m in a2.modes] == A2_MODES
    assert [(c["code"], c["name"]) for c in a2.categories] == A2_CATEGORIES
    assert a2.mode_category() == {code: code[:2] for code, _ in A2_MODES}
    assert a2.definition["schema_version"] == 1


def test_a2_failures_definitions_and_boundaries_are_verbatim(a2):
    for code, (definition, boundary) in A2_SOME_TEXT.items():
        mode = a2.mode(code)
        assert mode["definition"] == definition
        assert mode["boundary"] == boundary
    assert {m["code"] for m in a2.modes if m["boundary"] == ""} == A2_EMPTY_BOUNDARY
    for m in a2.modes:
        assert m["definition"].strip(), m["code"]
        assert m["hint"] and "\n" not in m["hint"] and len(m["hint"]) <= 160, m["code"]


def test_a2_failures_provenance_and_label_fields(a2):
    statement = a2.provenance["statement"]
    assert "could not be obtained" in statement
    assert "working operationalization" in statement
    assert "four categories" in statement and "20" in statement
    assert "A²-Failures" in a2.provenance["citation"]
    assert "http" not in a2.provenance["citation"] and a2.provenance["url"] == ""
    fields = {f["name"]: f for f in a2.label_fields}
    assert list(fields) == ["mode", "agent", "principals", "evidence", "note", "confidence"]
    assert fields["mode"]["required"] and fields["agent"]["required"]
    assert not fields["principals"]["required"]
    assert fields["evidence"]["required"] and fields["evidence"]["min_items"] == 1
    assert not fields["note"]["required"] and not fields["confidence"]["required"]


def test_mast_counts_codes_names_and_categories(mast):
    assert mast.key == "mast"
    assert len(mast.modes) == 14 and len(mast.categories) == 3
    assert [(m["code"], m["category"], m["name"].casefold()) for m in mast.modes] == MAST_MODES
    assert [(c["code"], c["name"].casefold()) for c in mast.categories] == MAST_CATEGORIES
    assert "2503.13657" in mast.provenance["citation"]
    for m in mast.modes:
        assert m["definition"] and m["hint"], m["code"]


@pytest.mark.parametrize(
    "query, code",
    [
        ("3.2", "3.2"),
        ("No or incorrect verification", "3.2"),  # alias used by MAST releases
        ("  NO OR INCORRECT   verification ", "3.2"),
        ("No or incomplete verification", "3.2"),  # the name
        ("Weak Verification", "3.3"),  # alias used by MAST releases
        ("weak_verification", "3.3"),
        ("incorrect verification", "3.3"),
        ("Reasoning action mismatch", "2.6"),
        (1.1, "1.1"),  # e.g. a CSV column parsed as a number
    ],
)
def test_mast_lookup_by_code_name_and_alias(mast, query, code):
    assert mast.mode(query)["code"] == code


def test_a2_lookup_by_code_is_case_insensitive_and_by_name(a2):
    assert a2.mode("dd3")["code"] == "DD3"
    assert a2.mode("principal's interest conceded")["code"] == "CF2"
    assert a2.mode("Principal’s interest conceded")["code"] == "CF2"  # typographic apostrophe


def test_unknown_mode_raises_a_clear_lookup_error(mast):
    with pytest.raises(UnknownModeError) as info:
        mast.mode("4.1")
    assert isinstance(info.value, TaxonomyError) and isinstance(info.value, LookupError)
    assert not isinstance(info.value, KeyError)
    assert "mast" in str(info.value) and "'4.1'" in str(info.value)
    with pytest.raises(UnknownModeError):
        mast.mode(None)  # type: ignore[arg-type]
    with pytest.raises(UnknownModeError, match="no category 'ZZ'"):
        mast.category("ZZ")


def test_mode_returns_a_copy(a2):
    a2.mode("DD1")["name"] = "changed"
    a2.mode("DD1")["aliases"].append("x")
    assert a2.mode("DD1")["name"] == "Peer not engaged"
    assert a2.mode("DD1")["aliases"] == []


def test_attribution_schema_allows_no_modes_only_with_an_attribution():
    data = yaml.safe_load((BUILTIN_TAXONOMY_DIR / "who-and-when.yaml").read_text(encoding="utf-8"))
    assert data["modes"] == [] and data["attribution"]["k"] == 1
    jsonschema.validate(data, TAXONOMY_SCHEMA)
    without = {k: v for k, v in data.items() if k != "attribution"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(without, TAXONOMY_SCHEMA)
    bad = {**data, "attribution": {"reason": "sometimes"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, TAXONOMY_SCHEMA)
