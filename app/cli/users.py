"""`a2annotate users create` and `a2annotate tokens create`."""
from __future__ import annotations

import sys

import click

from app.auth.models import ROLES
from app.cli.common import checked_engine, one_line_errors
from app.core.db import session_scope


@click.group()
def users() -> None:
    """Manage users."""


@users.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="The user's role.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@one_line_errors
def users_create(name: str, role: str, password_stdin: bool) -> None:
    """Create user NAME (without --password-stdin you are prompted for a password)."""
    from app.auth.service import create_user, set_password

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    with session_scope(checked_engine()) as session:
        user = create_user(session, name, role)
        set_password(session, user, password)
    click.echo(f"created {role} {name}")


@users.command("set-password")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@one_line_errors
def users_set_password(name: str, password_stdin: bool) -> None:
    """Reset the password of user NAME."""
    from app.auth.service import get_user, set_password

    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else click.prompt(
        "Password", hide_input=True, confirmation_prompt=True)
    with session_scope(checked_engine()) as session:
        user = get_user(session, name)
        if user is None:
            raise click.ClickException(f"no user {name!r}")
        set_password(session, user, password)
    click.echo(f"password of {name} changed")


@click.group()
def tokens() -> None:
    """Manage API tokens."""


@tokens.command("create")
@click.argument("name")
@click.option("--label", default=None, help="A note to recognise the token by.")
@one_line_errors
def tokens_create(name: str, label: str | None) -> None:
    """Print a new API token for user NAME (shown once; only its hash is stored)."""
    from app.auth.service import create_token, get_user

    with session_scope(checked_engine()) as session:
        user = get_user(session, name)
        if user is None:
            raise click.ClickException(f"no user {name!r}: create it with `a2annotate users create {name} --role ...`")
        token = create_token(session, user, label)
    click.echo(token)
