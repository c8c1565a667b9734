"""`a2annotate import` and `a2annotate import-labels`."""
from __future__ import annotations

import time

import click

from app.cli.common import checked_engine, is_tty, one_line_errors


def estimate_runs(paths) -> int | None:
    """How many runs `paths` hold, when a cheap count is possible (JSON Lines files count their
    non-blank lines, directories their run directories, single-run files one); else None."""
    import os

    from app.ingest import detect_format
    from app.ingest.jsonio import canonical_layout
    from app.ingest.tree import METADATA_NAMES

    total = 0
    for p in paths:
        if os.path.isdir(p):
            for _root, _dirs, files in os.walk(p):
                total += any(f.lower() in METADATA_NAMES for f in files)
            continue
        if detect_format(p) != "canonical":
            return None
        layout = canonical_layout(p)
        if layout == "object":
            total += 1
        elif layout == "jsonl":
            from app.ingest.safejson import bounded_lines

            with open(p, "rb") as f:  # a line longer than MAX_RECORD_BYTES counts without being held
                total += sum(1 for line in bounded_lines(f) if not isinstance(line, bytes) or line.strip())
        else:
            return None
    return total


class _Progress:
    """A progress bar on a terminal (stderr) when the number of runs can be counted up front,
    else a live counter; silent when stderr is not a terminal."""

    WIDTH = 30

    def __init__(self, enabled: bool, total: int | None = None):
        self.enabled = enabled
        self.total = total
        self.last = 0.0
        self.started = time.monotonic()

    def __call__(self, summary) -> None:
        now = time.monotonic()
        if self.enabled and now - self.last > 0.1:
            self.last = now
            done = summary.imported + summary.unchanged + summary.rejected
            rate = done / max(now - self.started, 1e-9)
            if self.total:
                frac = min(done / self.total, 1.0)
                bar = "#" * int(frac * self.WIDTH)
                head = f"[{bar:<{self.WIDTH}}] {frac:4.0%} {done}/{self.total} runs, {rate:.0f}/s"
            else:
                head = f"[{done:>7} runs, {rate:6.0f}/s]"
            click.echo(f"\r{head}  {summary.line()}", nl=False, err=True)

    def close(self) -> None:
        if self.enabled:
            click.echo("", err=True)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["canonical", "tree", "wire"]), default=None,
              help="Force the input format (default: detected per path).")
@click.option("--mapping", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Mapping file (YAML/JSON) naming files of a per-run directory tree.")
@click.option("--replace", is_flag=True, help="Overwrite runs already stored with different content.")
@click.option("--show-unused", is_flag=True, help="List every file of a directory tree that was not used.")
@one_line_errors
def import_cmd(paths: tuple[str, ...], fmt: str | None, mapping: str | None, replace: bool, show_unused: bool) -> None:
    """Import runs from PATHS (canonical JSON/JSONL, per-run directory trees, A2A wire logs).

    Each run is stored atomically; a malformed run is reported with its file and line and
    leaves nothing behind, while the other runs still import. Ends with the summary line
    `imported N, unchanged M, rejected K`; exits 1 when any run was rejected.
    """
    from app.ingest.loader import import_paths

    tty = is_tty()
    progress = _Progress(tty, estimate_runs(paths) if tty else None)
    try:
        summary = import_paths(checked_engine(), paths, fmt=fmt, mapping=mapping, replace=replace, progress=progress)
    finally:
        progress.close()
    for err in summary.errors:
        click.echo(f"rejected: {err['location']}: {err['message']}", err=True)
    if summary.unused_files:
        click.echo(f"{len(summary.unused_files)} file(s) not used" + (":" if show_unused else
                   " (list them with --show-unused)"), err=True)
        if show_unused:
            for f in summary.unused_files:
                click.echo(f"  unused: {f}", err=True)
    if summary.replaced:
        click.echo(f"{summary.replaced} of the imported runs replaced stored runs whose content changed "
                   "(their annotations kept)", err=True)
    click.echo(summary.line())
    if summary.rejected:
        raise SystemExit(1)
