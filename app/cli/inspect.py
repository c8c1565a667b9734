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
    warnings it would raise, grouped by cause. A file or folder holding runs (a JSON array of runs,
    a list of runs beside shared data such as `simulations[]` beside `tasks[]`, JSON Lines of runs,
    one file per run) is also reported as such: the runs found per file, and a starter profile with
    a `runs` block dry-run on every run. `--write-profile FILE` writes that profile as a starting
    point: unedited, `a2annotate import PATH --profile FILE` reads PATH the way inspect describes.
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
        from app.ingest.inspect_runs import inspect_runs

        click.echo(render_dry_run(dry_run(path)))
        held = inspect_runs(path)  # a file holding runs: the runs found and a starter profile with `runs`
        if held is not None:
            click.echo("")
            click.echo("read with an import profile instead (a `runs` block; write it with --write-profile):")
            _output(held, write_profile, render, profile_text)
        elif write_profile:
            raise click.UsageError(f"{path}: no runs held in this file that inspect can see, so no profile "
                                   "to write (a folder of run directories gets one)")
        return
    _output(inspect_tree(path), write_profile, render, profile_text)


def _output(ins, write_profile, render, profile_text) -> None:
    click.echo(render(ins))
    if write_profile:
        with open(write_profile, "w", encoding="utf-8") as f:
            f.write(profile_text(ins))
        click.echo(f"profile written to {write_profile} (edit it, then: a2annotate import {ins.root} "
                   f"--profile {write_profile})")
