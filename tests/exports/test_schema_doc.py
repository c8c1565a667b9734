"""docs/export-schema.md is generated from app/exports/schema.py and must be up to date; the
schema definitions cover every column the exporters write."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.exports.schema import TABLES, arrow_schema, render_markdown, table_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "export-schema.md"


def test_the_schema_document_is_up_to_date():
    assert DOC.read_text(encoding="utf-8") == render_markdown(), (
        "docs/export-schema.md is stale: run `python -m app.exports.schema --write docs/export-schema.md`")


def test_every_table_and_column_is_documented():
    text = DOC.read_text(encoding="utf-8")
    for name, spec in TABLES.items():
        assert f"### {name}\n" in text
        for col in spec.columns:
            assert f"| `{col.name}` | `{col.type}` |" in text, (name, col.name)
            assert col.description.strip(), (name, col.name)
    for required in ("runs", "scenarios", "agents", "principals", "events", "audits", "annotations",
                     "gold_labels", "runs_canonical", "blind_spots", "crossplay_model", "outcomes_by_agent"):
        assert required in TABLES


def test_report_columns_map_to_their_patterns():
    spec = table_spec("outcomes_by_model")
    schema = arrow_schema(spec, ["model", "n", "mode:DD1", "cat:VF", "metric:surplus"])
    assert [str(f.type) for f in schema] == ["string", "int64", "double", "double", "double"]
    with pytest.raises(KeyError, match="outcomes_by_model: no column 'bogus'"):
        spec.column("bogus")
    with pytest.raises(KeyError, match="unknown table 'nope'"):
        table_spec("nope")
