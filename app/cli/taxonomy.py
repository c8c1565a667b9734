"""`a2annotate taxonomy validate FILE...` and `a2annotate taxonomy list`."""
from __future__ import annotations

import click

from app.cli.common import checked_engine, one_line_errors


@click.group()
def taxonomy() -> None:
    """Check taxonomy files and list the registered taxonomy versions."""


@taxonomy.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@one_line_errors
def taxonomy_validate(files: tuple[str, ...]) -> None:
    """Check taxonomy FILES (YAML or JSON): prints every problem as `FILE: FIELD: message`, or
    `FILE: ok (KEY, N modes)`; exits 1 when any file has problems. Nothing is stored."""
    from app.taxonomies.loader import load_taxonomy_file, validate_file

    bad = 0
    for f in files:
        problems = validate_file(f)
        if problems:
            bad += 1
            for p in problems:
                click.echo(p, err=True)
        else:
            tdef = load_taxonomy_file(f)
            click.echo(f"{f}: ok ({tdef.key}, {len(tdef.modes)} modes in {len(tdef.categories)} categories)")
    if bad:
        raise click.ClickException(f"{bad} of {len(files)} file(s) invalid")


@taxonomy.command("list")
@one_line_errors
def taxonomy_list() -> None:
    """List the registered taxonomy versions: `key@version  modes  name`."""
    from sqlmodel import Session

    from app.taxonomies.service import all_versions

    with Session(checked_engine()) as session:
        rows = all_versions(session)
        if not rows:
            click.echo("no taxonomy registered: run `a2annotate db upgrade`")
            return
        for t in rows:
            ref = f"{t.key}@{t.version}"
            click.echo(f"{ref:<24} {len(t.definition.get('modes') or []):>3} modes  {t.name}")
