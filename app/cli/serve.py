"""`a2annotate serve`."""
from __future__ import annotations

import ipaddress
import socket

import click

from app.cli.common import checked_engine, one_line_errors
from app.core.config import Settings, get_settings

#: SECRET_KEY values from examples, compose files and habits: anyone could sign a session with them
KNOWN_WEAK_SECRETS = {"change-me", "changeme", "change_me", "changethis", "secret", "secret-key", "secret_key",
                      "dev", "development", "test", "testing", "password", "please-change-me", "your-secret-key",
                      "insecure", "default", "a2annotate", "admin", "key", "12345", "123456"}
#: shortest SECRET_KEY accepted when serving beyond loopback
MIN_SECRET_LENGTH = 16


def is_loopback(host: str) -> bool:
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_secret_key(host: str, settings: Settings) -> None:
    """Refuse (one-line ClickException) to serve beyond loopback without a SECRET_KEY of one's
    own: a missing one (then it changes per process), a known one or a short one would let
    anyone who knows it sign an admin session cookie."""
    if is_loopback(host):
        return
    key = settings.secret_key or ""
    if "secret_key" not in settings.model_fields_set:
        problem = "SECRET_KEY is not set"
    elif key.strip().lower() in KNOWN_WEAK_SECRETS:
        problem = f"SECRET_KEY is a well-known value ({key!r})"
    elif len(key) < MIN_SECRET_LENGTH:
        problem = f"SECRET_KEY is shorter than {MIN_SECRET_LENGTH} characters"
    else:
        return
    raise click.ClickException(
        f"refusing to serve on {host}: {problem}; set it to a long random value, e.g. "
        "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')")


def check_listen(host: str, port: int) -> None:
    """Raise ClickException (one line) when `host:port` cannot be bound, e.g. the port is in use,
    so the command fails with a reason instead of uvicorn's multi-line log."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: unknown host ({exc.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(addr)
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@one_line_errors
def serve(host: str, port: int) -> None:
    """Run the web app (refuses to start on an out-of-date schema, a port already in use, or,
    bound beyond loopback, without a SECRET_KEY of its own)."""
    import uvicorn

    from app.main import create_app

    check_secret_key(host, get_settings())
    app = create_app(checked_engine())
    check_listen(host, port)
    click.echo(f"a2annotate serving on http://{host}:{port}/  (API docs at /docs)")
    uvicorn.run(app, host=host, port=port, log_level="info")
