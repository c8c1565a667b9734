"""`a2annotate export`: tables as CSV, Parquet or JSON Lines files, one file per table."""
from __future__ import annotations

import click

from app.cli.common import checked_engine, one_line_errors


def _split(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(("csv", "parquet", "jsonl")), required=True,
              help="File format.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Folder to write into (created if needed); files are named <table>.<format>.")
@click.option("--tables", multiple=True,
              help="Tables to export (repeat or comma-separate); default every table available in the format.")
@click.option("--source", default="auto", show_default=True,
              help="Report tables: which labels count (auto, gold, majority, annotator:NAME).")
@click.option("--taxonomy", default=None, help="Report tables: taxonomy version; default latest a2-failures.")
@one_line_errors
def export(fmt: str, out_dir: str, tables: tuple[str, ...], source: str, taxonomy: str | None) -> None:
    """Export the database: runs, scenarios, agents, principals, events, audits, checks, annotations,
    gold labels and the reports, one file per table (schema: docs/export-schema.md).

    runs_canonical (JSON Lines only) holds whole canonical runs for `a2annotate import`;
    annotations_canonical (CSV, JSON Lines) holds the submitted annotations in the format
    `a2annotate import-labels` reads. The command line exports every annotation (no blind mode).
    """
    from sqlmodel import Session

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
    opts = ExportOptions(source=source, taxonomy=taxonomy, threshold=get_settings().success_threshold)
    for table, path, rows in export_to_dir(engine, out_dir, fmt, names, opts):
        click.echo(f"{table}: {rows} rows -> {path}")
