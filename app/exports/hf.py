"""A Hugging Face `datasets`-ready folder: Parquet shards under ``data/`` plus a dataset card.

Layout::

    README.md                                   the dataset card (YAML header: configs, features)
    data/<table>/train-00000-of-00001.parquet   one config per table

Tables: ``runs``, ``agents``, ``principals``, ``events``, ``annotations``, ``gold_labels`` and, when
the database has it, ``checks`` (their columns are those of the table exports, written by
:func:`app.exports.service.export_to_dir`, so types and meanings are in docs/export-schema.md).
The card lists every config with its ``data_files`` and ``features`` (each column and its type,
read back from the Parquet file), the schema with each column's meaning, the taxonomy versions
the labels were made under and the label provenance (annotations by human annotators and by
judges, per origin; gold labels per origin). Nothing is fetched: the folder loads offline with
``datasets.load_dataset("parquet", data_dir="DIR/data/<table>")`` or ``pandas.read_parquet``.
"""
from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from app.exports.schema import TABLES, table_spec
from app.exports.service import ExportOptions, export_to_dir

#: the tables of the folder, in this order; `checks` only where the database has that table
HF_TABLES = ("runs", "agents", "principals", "events", "annotations", "gold_labels", "checks")
SHARD = "train-00000-of-00001.parquet"


def hf_tables() -> list[str]:
    """Returns the tables the folder holds (those of :data:`HF_TABLES` that exist here)."""
    return [t for t in HF_TABLES if t in TABLES and "parquet" in TABLES[t].formats]


def _dtype(t: pa.DataType) -> Any:
    """The `datasets` feature type of an Arrow type (``string``, ``int64``, ``{"list": ...}``)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"list": _dtype(t.value_type)}
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, tz={t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_floating(t):
        return "float64" if t.bit_width == 64 else f"float{t.bit_width}"
    if pa.types.is_integer(t):
        return str(t)
    return str(t)


def _feature(field: pa.Field) -> dict[str, Any]:
    d = _dtype(field.type)
    if isinstance(d, dict):  # a list column: `sequence: <item type>` in the card's features
        inner = d["list"]
        return {"name": field.name, "sequence": inner if not isinstance(inner, dict) else {"sequence": inner["list"]}}
    return {"name": field.name, "dtype": d}


def _provenance(data_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"taxonomies": [], "annotations": {}, "gold_labels": {}}
    ann = data_dir / "annotations" / SHARD
    if ann.exists():
        t = pq.read_table(ann, columns=["annotation_id", "annotator_kind", "origin", "taxonomy", "status"]).to_pylist()
        seen: dict[int, dict] = {r["annotation_id"]: r for r in t}
        out["taxonomies"] = sorted({r["taxonomy"] for r in t})
        out["annotations"] = {
            "by_annotator_kind": dict(sorted(Counter(r["annotator_kind"] for r in seen.values()).items())),
            "by_origin": dict(sorted(Counter(r["origin"] for r in seen.values()).items())),
            "submitted": sum(1 for r in seen.values() if r["status"] == "submitted"),
            "total": len(seen),
        }
    gold = data_dir / "gold_labels" / SHARD
    if gold.exists():
        g = pq.read_table(gold, columns=["taxonomy", "origin", "gold_status", "accepted"]).to_pylist()
        out["taxonomies"] = sorted(set(out["taxonomies"]) | {r["taxonomy"] for r in g})
        # a row with accepted false is a reviewer's "not gold" (rejected or undone): not counted as gold
        out["gold_labels"] = {"by_origin": dict(sorted(Counter(r["origin"] for r in g
                                                               if r["origin"] and r["accepted"]).items())),
                              "adjudicated_rows": sum(1 for r in g if r["gold_status"] == "adjudicated"),
                              "not_gold_rows": sum(1 for r in g if r["accepted"] is False),
                              "total_rows": len(g)}
    return out


def _num_bytes(path: Path) -> int:
    """Uncompressed size of a Parquet file's data (the card's `num_bytes`), from its footer."""
    meta = pq.ParquetFile(path).metadata
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def dataset_card(configs: list[tuple[str, pa.Schema, int]], provenance: dict[str, Any], name: str,
                 sizes: dict[str, int] | None = None) -> str:
    """Returns the text of README.md: YAML header (configs, dataset_info with every feature, for
    every table with rows), then the schema of every table, taxonomy versions and label provenance."""
    listed = [(t, schema, n) for t, schema, n in configs if n]  # `datasets` cannot load an empty split
    empty = [t for t, _, n in configs if not n]
    header = {
        "pretty_name": name,
        "tags": ["multi-agent", "agent-to-agent", "failure-taxonomy", "annotation", "a2annotate"],
        "configs": [{"config_name": t, "data_files": [{"split": "train", "path": f"data/{t}/*.parquet"}],
                     **({"default": True} if t == listed[0][0] else {})} for t, _, _ in listed],
        "dataset_info": [{"config_name": t, "features": [_feature(f) for f in schema],
                          "splits": [{"name": "train", "num_bytes": (sizes or {}).get(t, 0), "num_examples": n}]}
                         for t, schema, n in listed],
    }
    out = ["---", yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
           f"# {name}", "",
           ("Recorded multi-agent runs with the failure labels made on them, exported by a2annotate. One "
            "config per table; each is one Parquet shard under `data/<table>/`. Load one with "
            "`datasets.load_dataset(\"parquet\", data_dir=\"data/<table>\")` or `pandas.read_parquet`. "
            "Free-form objects (metadata, event data, metrics) are JSON text; read them with `json.loads`."),
           ""]
    if empty:
        out += [f"Empty tables ({', '.join(f'`{t}`' for t in empty)}): their shard holds the columns and no rows; "
                "they are not listed as configs, since `datasets` cannot load an empty split (pandas reads them).",
                ""]
    out += ["## Taxonomy versions", ""]
    taxes = provenance.get("taxonomies") or []
    out += [f"- `{t}`" for t in taxes] or ["- (no labels)"]
    out += ["", "Every label records the taxonomy version it was made under (`taxonomy`, `taxonomy_key`, "
                "`taxonomy_version`); a new version never rewrites old labels.", "",
            "## Label provenance", ""]
    ann = provenance.get("annotations") or {}
    gold = provenance.get("gold_labels") or {}
    out.append(f"- annotations: {ann.get('total', 0)} ({ann.get('submitted', 0)} submitted); by annotator kind "
               f"{_counts(ann.get('by_annotator_kind'))} (human: people; judge: `judge:<source>`, automated judges "
               f"such as LLM judges and detectors); by origin {_counts(ann.get('by_origin'))} (human: made in the "
               "app; import: imported label files; audit: shipped with the runs, e.g. dataset labels).")
    out.append(f"- gold labels: {gold.get('total_rows', 0)} rows, {gold.get('adjudicated_rows', 0)} adjudicated, "
               f"{gold.get('not_gold_rows', 0)} rejected by the reviewer (`accepted` false: not gold); accepted by "
               f"origin {_counts(gold.get('by_origin'))} (unanimity / majority of the humans, or a reviewer's "
               "adjudication).")
    out += ["", ("Labels may be trace-level (a mode, no `agent`, no `evidence`: e.g. MAST's) or attribution-only "
                 "(an `agent` and `evidence`, `mode` null: e.g. Who&When's who and when)."), "", "## Schema", ""]
    for t, schema, n in configs:
        spec = table_spec(t)
        doc = {c.name: c for c in spec.columns}
        out += [f"### {t}", "", f"{spec.description} {n} rows.", "", "| column | type | meaning |", "|---|---|---|"]
        for f in schema:
            c = doc.get(f.name)
            out.append(f"| `{f.name}` | `{c.type if c else _dtype(f.type)}` | {c.description if c else ''} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _counts(d: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (d or {}).items()) or "none"


def export_hf(engine, out_dir: str | Path, opts: ExportOptions | None = None,
              name: str = "a2annotate export") -> list[tuple[str, Path, int]]:
    """Writes the folder into ``out_dir`` (created if needed): the shards and README.md; returns
    ``[(table, shard path, rows)]``. Existing shards of these tables are replaced."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data"
    tables = hf_tables()
    written = []
    with tempfile.TemporaryDirectory(prefix="a2annotate-hf-", dir=out) as tmp:
        files = export_to_dir(engine, tmp, "parquet", tables, opts or ExportOptions())
        for table, path, rows in files:
            dest = data / table
            dest.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), dest / SHARD)
            written.append((table, dest / SHARD, rows))
    configs = [(t, pq.read_schema(p), n) for t, p, n in written]
    sizes = {t: _num_bytes(p) for t, p, _ in written}
    (out / "README.md").write_text(dataset_card(configs, _provenance(data), name, sizes), encoding="utf-8")
    return written


def hf_zip(engine, opts: ExportOptions | None = None, work_dir: str | Path | None = None,
           progress: Callable[[int, int | None], None] | None = None) -> Path:
    """Builds the folder in ``work_dir`` (default a new temporary directory) and returns the path of
    a zip of it (the caller deletes the zip's parent directory, ``path.parent``). ``progress(done,
    total)`` is told of its three steps: the shards, the zip, done."""
    work = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="a2annotate-hfzip-"))
    work.mkdir(parents=True, exist_ok=True)
    folder = work / "dataset"
    if progress:
        progress(0, 3)
    export_hf(engine, folder, opts)
    if progress:
        progress(1, 3)
    archive = shutil.make_archive(str(work / "a2annotate-hf"), "zip", root_dir=folder)
    shutil.rmtree(folder)
    if progress:
        progress(2, 3)
    return Path(archive)
