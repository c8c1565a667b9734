"""`a2annotate export`: tables as CSV, Parquet or JSON Lines files, one file per table."""
from __future__ import annotations

import click

from app.cli.common import checked_engine, one_line_errors, study_scope_of


def _split(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(("csv", "parquet", "jsonl", "hf", "mad")), required=True,
              help="File format; hf = a Hugging Face datasets folder (Parquet shards under data/ and a dataset "
                   "card README.md), mad = MAD_full_dataset.json in the shape of MAST's MAD full file.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Folder to write into (created if needed); files are named <table>.<format>.")
@click.option("--annotator", default=None,
              help="mad: whose MAST labels fill mast_annotation (default judge:mast-llm, MAD's LLM judge).")
@click.option("--tables", multiple=True,
              help="Tables to export (repeat or comma-separate); default every table available in the format "
                   "(csv, parquet, jsonl; hf and mad write their fixed sets).")
@click.option("--source", default="auto", show_default=True,
              help="Report tables: which labels count (auto, gold, majority, annotator:NAME).")
@click.option("--taxonomy", default=None, help="Report tables: taxonomy version; default latest a2-failures.")
@click.option("--study", default=None, help="csv, parquet, jsonl: only the runs of this study (name or id) and "
                                            "what hangs off them.")
@one_line_errors
def export(fmt: str, out_dir: str, tables: tuple[str, ...], source: str, taxonomy: str | None,
           annotator: str | None, study: str | None) -> None:
    """Export the database: runs, scenarios, agents, principals, events, audits, checks, annotations,
    gold labels and the reports, one file per table (schema: docs/export-schema.md).

    runs_canonical (JSON Lines only) holds whole canonical runs for `a2annotate import`;
    annotations_canonical (CSV, JSON Lines) holds the submitted annotations in the format
    `a2annotate import-labels` reads. The command line exports every annotation (no blind mode).

    --format hf writes data/<table>/*.parquet (runs, agents, principals, events, annotations,
    gold labels) and a dataset card README.md listing every config and column, the taxonomy
    versions and the label provenance. --format mad writes MAD_full_dataset.json of the runs
    labelled under MAST (--taxonomy, default the latest mast), which `a2annotate import` reads back.
    """
    from sqlmodel import Session

    if study and fmt in ("hf", "mad"):
        raise click.UsageError("--study applies to csv, parquet and jsonl exports")
    if fmt == "mad":
        from app.exports.mad import DEFAULT_ANNOTATOR, export_mad

        path, n = export_mad(checked_engine(), out_dir, annotator=annotator or DEFAULT_ANNOTATOR, taxonomy=taxonomy)
        click.echo(f"mad: {n} runs -> {path}")
        return
    if fmt == "hf":
        from app.core.config import get_settings
        from app.exports.hf import export_hf
        from app.exports.service import ExportOptions

        opts = ExportOptions(threshold=get_settings().success_threshold)
        for table, path, rows in export_hf(checked_engine(), out_dir, opts):
            click.echo(f"{table}: {rows} rows -> {path}")
        click.echo(f"dataset card -> {out_dir}/README.md")
        return

    from app.core.config import get_settings
    from app.exports.service import ExportOptions, check, default_tables, export_to_dir
    from app.reports.service import check_source, resolve_taxonomy

    names = _split(tables) or default_tables(fmt)
    for name in names:
        check(name, fmt)
    engine = checked_engine()
    check_source(source)
    with Session(engine) as session:
        resolve_taxonomy(session, taxonomy)
        _, scope = study_scope_of(session, study)
    opts = ExportOptions(source=source, taxonomy=taxonomy, threshold=get_settings().success_threshold,
                         run_scope=scope)
    for table, path, rows in export_to_dir(engine, out_dir, fmt, names, opts):
        click.echo(f"{table}: {rows} rows -> {path}")
