"""`a2annotate serve`."""
from __future__ import annotations

import click

from app.cli.common import checked_engine, one_line_errors


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
@one_line_errors
def serve(host: str, port: int) -> None:
    """Run the web app (refuses to start on an out-of-date schema)."""
    import uvicorn

    from app.main import create_app

    app = create_app(checked_engine())
    click.echo(f"a2annotate serving on http://{host}:{port}/  (API docs at /docs)")
    uvicorn.run(app, host=host, port=port, log_level="info")
