"""`a2annotate inspect PATH [--write-profile FILE]`: look at a tree without importing it."""
from __future__ import annotations

import os

import click

from app.cli.common import one_line_errors


@click.command("inspect")
@click.argument("path", type=click.Path(exists=True))
@click.option("--write-profile", "write_profile", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the inferred import profile (YAML) to FILE, to edit and pass to `import --profile`.")
@one_line_errors
def inspect_cmd(path: str, write_profile: str | None) -> None:
    """Look at PATH (a per-run directory tree, a zip of one, or a file) without importing it.

    Prints the run directories and their path pattern, a root manifest, the files by role with
    the keys seen in their records (and how often; `*` marks keys kept in metadata), the values
    seen for status/visibility/kind/result keys, what the inferred profile maps and what it
    leaves unmapped. A single file is dry-run: the readers asked (each with its score and reason),
    the reader the import would use, the runs, agents, principals and events it would store and the
    warnings it would raise, grouped by cause. `--write-profile FILE` writes that profile as a starting point: unedited,
    `a2annotate import PATH --profile FILE` reads the tree the way plain `import PATH` does.
    """
    import tempfile
    import zipfile

    from app.ingest.inspect import inspect_tree, profile_text, render

    if os.path.isfile(path) and zipfile.is_zipfile(path):
        from app.ingest.detect import safe_extract

        with tempfile.TemporaryDirectory(prefix="a2annotate-inspect-") as tmp:
            with zipfile.ZipFile(path) as archive:
                safe_extract(archive, tmp)
            ins = inspect_tree(tmp)
            ins.root = path
            _output(ins, write_profile, render, profile_text)
        return
    if os.path.isfile(path):
        from app.ingest.inspect import dry_run, render_dry_run

        click.echo(render_dry_run(dry_run(path)))
        return
    _output(inspect_tree(path), write_profile, render, profile_text)


def _output(ins, write_profile, render, profile_text) -> None:
    click.echo(render(ins))
    if write_profile:
        with open(write_profile, "w", encoding="utf-8") as f:
            f.write(profile_text(ins))
        click.echo(f"profile written to {write_profile} (edit it, then: a2annotate import {ins.root} "
                   f"--profile {write_profile})")
