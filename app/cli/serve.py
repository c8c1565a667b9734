"""`a2annotate serve`."""
from __future__ import annotations

import socket

import click

from app.cli.common import checked_engine, one_line_errors


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
    """Run the web app (refuses to start on an out-of-date schema or a port already in use)."""
    import uvicorn

    from app.main import create_app

    app = create_app(checked_engine())
    check_listen(host, port)
    click.echo(f"a2annotate serving on http://{host}:{port}/  (API docs at /docs)")
    uvicorn.run(app, host=host, port=port, log_level="info")
