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
    from app.ingest.readers.canonical import canonical_layout
    from app.ingest.readers.tree import METADATA_NAMES

    total = 0
    for p in paths:
        if os.path.isdir(p):
            for _root, _dirs, files in os.walk(p):
                total += any(f.lower() in METADATA_NAMES for f in files)
            continue
        try:
            if detect_format(p) != "canonical":
                return None
        except ValueError:
            return None
        layout = canonical_layout(p)
        if layout == "object":
            total += 1
        elif layout == "jsonl":
            from app.ingest.safety.safejson import bounded_lines

            with open(p, "rb") as f:  # a line longer than MAX_RECORD_BYTES counts without being held
                total += sum(1 for line in bounded_lines(f) if not isinstance(line, bytes) or line.strip())
        else:
            return None
    return total


def write_report(summary, path: str) -> None:
    """JSON Lines: one object per warning, notice, rejection, unknown mode and unused file."""
    import json

    with open(path, "w", encoding="utf-8") as f:
        for w in summary.warnings:
            f.write(json.dumps({"type": "warning", **w}, ensure_ascii=False) + "\n")
        for n in summary.notices:
            f.write(json.dumps({"type": "notice", **n}, ensure_ascii=False) + "\n")
        for e in summary.errors:
            f.write(json.dumps({"type": "rejected", **e}, ensure_ascii=False) + "\n")
        for name, n in sorted(summary.unknown_modes.items()):
            f.write(json.dumps({"type": "unknown_mode", "mode": name, "count": n}, ensure_ascii=False) + "\n")
        for u in summary.unused_files:
            f.write(json.dumps({"type": "unused_file", "path": u}, ensure_ascii=False) + "\n")


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


def _check_format(ctx, param, value):
    if value is None:
        return None
    from app.ingest.registry import UnknownReader, registry

    try:
        registry().get(value)
    except UnknownReader as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--format", "fmt", default=None, metavar="READER", callback=_check_format,
              help="Force the reader (default: the reader the registry picks per path; `a2annotate inspect "
                   "--readers` lists them): canonical, tree, wire, mad (MAST's MAD files), whowhen (Who&When "
                   "records), otlp or openinference (OpenTelemetry trace files), or any installed reader "
                   "plugin's name (entry point group a2annotate.readers).")
@click.option("--mapping", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Mapping file (YAML/JSON) naming files of a per-run directory tree.")
@click.option("--replace", is_flag=True, help="Overwrite runs already stored with different content.")
@click.option("--show-unused", is_flag=True, help="List every file of a directory tree that was not used.")
@click.option("--profile", "profile", default=None, metavar="FILE|NAME",
              help="Import profile (YAML) saying how to read directory trees, or files holding runs (its "
                   "`runs` block: several runs per file, one file per run), or a built-in profile's name "
                   "(default: the profile `a2annotate inspect` infers for each tree).")
@click.option("--strict", is_flag=True,
              help="Reject every run that needed a warning (each problem is listed), instead of keeping it; "
                   "notices (what was kept verbatim in metadata, nothing lost) are no warnings.")
@click.option("--report", "report", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write every warning, rejection, unknown mode and unused file to FILE as JSON Lines.")
@one_line_errors
def import_cmd(paths: tuple[str, ...], fmt: str | None, mapping: str | None, replace: bool, show_unused: bool,
               profile: str | None, strict: bool, report: str | None) -> None:
    """Import runs from PATHS (canonical JSON/JSONL, per-run directory trees, A2A wire logs,
    MAST's MAD files, Who&When records, OTLP trace files).

    Each run is stored atomically; a malformed run is reported with its file and line and
    leaves nothing behind, while the other runs still import. Directory trees are read
    leniently: what does not map is kept (in metadata or as log events) and counted as a
    warning; only a run with no id or no events is rejected (`--strict`: any warning rejects).
    Ends with the summary line `imported N, unchanged M, rejected K, warnings W`; exits 1 when
    any run was rejected.
    """
    from app.ingest.loader import import_paths
    from app.ingest.profile import load_profile

    prof = load_profile(profile) if profile else None  # a bad profile: one line naming the key
    tty = is_tty()
    progress = _Progress(tty, estimate_runs(paths) if tty else None)
    try:
        summary = import_paths(checked_engine(), paths, fmt=fmt, mapping=mapping, replace=replace, progress=progress,
                               profile=prof, strict=strict)
    finally:
        progress.close()
    if report:
        write_report(summary, report)
    for err in summary.errors:
        click.echo(f"rejected: {err['location']}: {err['message']}", err=True)
    if summary.warnings:
        click.echo(f"{len(summary.warnings)} warning(s): what did not map was kept and reported"
                   + (f" (all in {report})" if report else " (write them all with --report FILE)"), err=True)
        for w in summary.warnings[:20]:
            click.echo(f"  warning: {w['location']}: {w['message']}", err=True)
        if len(summary.warnings) > 20:
            click.echo(f"  ... and {len(summary.warnings) - 20} more", err=True)
    if summary.notices:
        click.echo(f"{len(summary.notices)} notice(s): kept verbatim in metadata, nothing lost (not warnings; "
                   + ("listed in the report)" if report else "list them with --report FILE)"), err=True)
    if summary.unknown_modes:
        click.echo("modes matching nothing in the taxonomy (kept, no judge label made from them): "
                   + ", ".join(f"{m!r} ({n})" for m, n in sorted(summary.unknown_modes.items())), err=True)
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
