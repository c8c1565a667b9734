"""`a2annotate demo`: the synthetic demo corpus, into the database and/or onto disk."""
from __future__ import annotations

from pathlib import Path

import click

from app.cli.common import checked_engine, is_tty, one_line_errors

SHAPES = ("json", "jsonl", "files", "tree", "wire", "wire-0.3")


@click.command()
@click.option("--runs", "n_runs", default=300, show_default=True, type=click.IntRange(1, 25_000),
              help="How many runs to generate (up to 25,000).")
@click.option("--seed", default=0, show_default=True, help="Random seed: same seed, same corpus.")
@click.option("--write", "write_dir", type=click.Path(file_okay=False), default=None,
              help="Also write the corpus to this folder in the --shape(s) given.")
@click.option("--shape", "shapes", type=click.Choice(SHAPES), multiple=True,
              help="Input shape(s) to write with --write (default: all).")
@click.option("--no-db", is_flag=True, help="Only write files; do not touch the database.")
@click.option("--with-users/--without-users", default=False, show_default=True,
              help="Create demo users, assignments with overlap and simulated human labels.")
@one_line_errors
def demo(n_runs: int, seed: int, write_dir: str | None, shapes: tuple[str, ...], no_db: bool, with_users: bool) -> None:
    """Generate a realistic synthetic A2A corpus (idempotent: re-running changes nothing).

    With --with-users: demo users (existing ones keep their password), assignments and simulated
    labels on the demo's own runs only; runs you imported and any annotation the demo did not
    create are never touched.

    Five families and all three alignments, 2-4 agents per run each acting for its own principal,
    private tool calls and records, shared messages, per-principal outcomes beside the aggregate
    score, machine audits, and seeded failure patterns covering all 20 A²-Failures modes (the seeded
    truth is kept in each run's metadata.demo_truth).
    """
    from app.demo.generator import generate_runs

    if write_dir:
        _write(Path(write_dir), n_runs, seed, shapes or SHAPES)
    if no_db:
        return
    from app.ingest.loader import _after_store_default, load_items

    engine = checked_engine()

    class Item:
        __slots__ = ("run", "error", "source")

        def __init__(self, run):
            self.run, self.error, self.source = run, None, f"demo(seed={seed})"

    def progress(s):
        if is_tty():
            click.echo(f"\r{s.line()}", nl=False, err=True)

    run_ids: list[str] = []

    def items():
        for d in generate_runs(n_runs, seed):
            run_ids.append(d.run["run_id"])
            yield Item(d.run)

    summary = load_items(engine, items(), progress=progress, after_store=_after_store_default)
    if is_tty():
        click.echo("", err=True)
    click.echo(f"demo corpus: {summary.line()}")
    if summary.rejected:
        for e in summary.errors[:5]:
            click.echo(f"rejected: {e['location']}: {e['message']}", err=True)
        raise click.ClickException(f"{summary.rejected} demo run(s) rejected")
    if with_users:
        from sqlmodel import Session

        from app.demo.seeding import DEMO_USERS, seed_annotations
        from app.taxonomies.service import latest

        with Session(engine) as session:
            tax = latest(session, "a2-failures")
            if tax is None:
                raise click.ClickException("taxonomy a2-failures is not registered: run `a2annotate db upgrade`")
            tax_pk = tax.id
        # only the runs this command generated and stored itself: never a run the user imported
        res = seed_annotations(engine, tax_pk, seed=seed, run_ids=run_ids, n_assigned=min(60, n_runs),
                               n_simulated=min(40, n_runs))
        click.echo(f"demo users: {len(DEMO_USERS)} ({len(res.users)} new); assignments added {res.assigned}; "
                   f"simulated annotations {res.simulated}")
        click.echo("log in at the address `a2annotate serve` prints (its /login page) as one of:")
        for name, (role, password, _) in DEMO_USERS.items():
            click.echo(f"  {name:<9} password {password:<14} ({role})")


def _write(folder: Path, n_runs: int, seed: int, shapes) -> None:
    from app.demo.generator import generate_runs
    from app.ingest import writers

    folder.mkdir(parents=True, exist_ok=True)
    for shape in shapes:
        runs = (d.run for d in generate_runs(n_runs, seed))
        if shape == "json":
            writers.write_json_array(runs, folder / "runs.json")
        elif shape == "jsonl":
            writers.write_jsonl(runs, folder / "runs.jsonl")
        elif shape == "files":
            writers.write_files(runs, folder / "files")
        elif shape == "tree":
            writers.write_tree(runs, folder / "tree")
        elif shape == "wire":
            writers.write_wire(runs, folder / "wire-1.0.jsonl", protocol="1.0")
        elif shape == "wire-0.3":
            writers.write_wire(runs, folder / "wire-0.3.jsonl", protocol="0.3")
        click.echo(f"wrote {shape} to {folder}")
