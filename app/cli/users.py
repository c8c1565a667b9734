"""`a2annotate users create|set-password` and `a2annotate tokens create|list|revoke`."""
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
@click.option("--expires-days", type=click.IntRange(min=0), default=None,
              help="Days until the token stops working (default TOKEN_EXPIRY_DAYS, 90; 0: never).")
@one_line_errors
def tokens_create(name: str, label: str | None, expires_days: int | None) -> None:
    """Print a new API token for user NAME (shown once; only its hash is stored)."""
    from app.auth.service import create_token, get_user

    with session_scope(checked_engine()) as session:
        user = get_user(session, name)
        if user is None:
            raise click.ClickException(f"no user {name!r}: create it with `a2annotate users create {name} --role ...`")
        token = create_token(session, user, label, expires_days=expires_days)
    click.echo(token)


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


@tokens.command("list")
@click.option("--user", "username", default=None, help="Only this user's tokens.")
@one_line_errors
def tokens_list(username: str | None) -> None:
    """List API tokens: prefix, user, label, state (active, revoked, expired), created, last used, expires."""
    from app.auth.service import get_user, list_tokens, token_state

    with session_scope(checked_engine()) as session:
        user = None
        if username is not None:
            user = get_user(session, username)
            if user is None:
                raise click.ClickException(f"no user {username!r}")
        for tok, name in list_tokens(session, user):
            click.echo("\t".join([tok.prefix, name, tok.name or "-", token_state(tok), _when(tok.created_at),
                                  _when(tok.last_used_at), _when(tok.expires_at)]))


@tokens.command("revoke")
@click.argument("token", required=False)
@click.option("--user", "username", default=None, help="Revoke every token of this user.")
@one_line_errors
def tokens_revoke(token: str | None, username: str | None) -> None:
    """Revoke TOKEN (the token itself, or its prefix as `tokens list` shows it), or with --user
    every token of a user. A revoked token is refused (401) from the next request on."""
    from app.auth.service import find_tokens, get_user, list_tokens, revoke_token

    if (token is None) == (username is None):
        raise click.UsageError("give a TOKEN (or its prefix) or --user NAME")
    with session_scope(checked_engine()) as session:
        if username is not None:
            user = get_user(session, username)
            if user is None:
                raise click.ClickException(f"no user {username!r}")
            rows = [t for t, _ in list_tokens(session, user)]
        else:
            rows = find_tokens(session, token)
            if not rows:
                raise click.ClickException(f"no token {token!r} (see `a2annotate tokens list`)")
            if len(rows) > 1:
                raise click.ClickException(f"{len(rows)} tokens start with {token!r}: give the whole token")
        active = [t for t in rows if not t.revoked]
        for t in active:
            revoke_token(session, t)
    click.echo(f"revoked {len(active)} token(s)")
