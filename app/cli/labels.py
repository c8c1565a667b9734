"""`a2annotate import-labels PATH...`: annotations made elsewhere (CSV or JSON Lines)."""
from __future__ import annotations

from pathlib import Path

import click

from app.cli.common import checked_engine, one_line_errors


@click.command("import-labels")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@one_line_errors
def import_labels(paths: tuple[str, ...]) -> None:
    """Import labels from PATHS (CSV or JSON Lines, detected from the file name or content).

    Columns: annotator, run_id, mode, agent, evidence (CSV: seqs separated by `;`, or a JSON
    list), taxonomy (key or key@version; default a2-failures latest), and optional note,
    confidence, principals. Rows become one submitted annotation per (annotator, run, taxonomy
    version); an empty or `none` mode marks "no failure found"; names that are not human users
    become `judge:` annotators. Each annotation is stored whole or rejected with errors naming
    file, line and field. Re-importing replaces the earlier import (idempotent). Ends with
    `imported N annotations, rejected K`; exits 1 when anything was rejected.
    """
    from app.annotations.labels_import import LabelImportSummary
    from app.annotations.labels_import import import_labels as run_import
    from app.core.db import write_session

    total = LabelImportSummary()
    engine = checked_engine()
    for path in paths:
        data = Path(path).read_bytes()
        with write_session(engine) as session:  # SQLite: BEGIN IMMEDIATE (see app.core.db)
            summary = run_import(session, data, path)
            session.commit()
        total.imported += summary.imported
        total.replaced += summary.replaced
        total.rejected += summary.rejected
        total.errors.extend(summary.errors)
    for err in total.errors:
        click.echo(f"rejected: {err['location']}: {err['message']}", err=True)
    click.echo(total.line())
    if total.rejected:
        raise SystemExit(1)
