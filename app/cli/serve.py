"""`a2annotate serve`."""
from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

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


def bind_listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` (port 0: a free port), or ClickException (one line) when it
    cannot be bound, e.g. the port is in use, instead of uvicorn's multi-line log."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: unknown host ({exc.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def check_listen(host: str, port: int) -> None:
    """Raise ClickException (one line) when `host:port` cannot be bound."""
    bind_listen(host, port).close()


def stop_imports_on_exit_signals() -> None:
    """Make SIGTERM and SIGINT stop the imports in progress (each stops at its next check and
    answers "import stopped: the server is shutting down"), then shut down as uvicorn does: the
    graceful shutdown no longer waits for a long import (it waited 36 s). Chains the handlers
    uvicorn installed; call it inside uvicorn's run, in the main thread."""
    import signal

    from app.ingest.budget import cancel_all

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if getattr(previous, "_stops_imports", False) or not callable(previous):
            continue

        def handler(signum, frame, previous=previous):
            cancel_all("the server is shutting down")
            previous(signum, frame)

        handler._stops_imports = True  # type: ignore[attr-defined]
        signal.signal(sig, handler)


def worker_app():
    """The app of one `serve --workers N` worker process (its own engine from the settings)."""
    from app.main import create_app

    stop_imports_on_exit_signals()  # called by uvicorn's config.load(), after it set its signal handlers
    return create_app()


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server; an exit signal also stops the imports in progress."""

        def handle_exit(self, sig, frame) -> None:
            from app.ingest.budget import cancel_all

            cancel_all("the server is shutting down")
            super().handle_exit(sig, frame)

    return Server


def base_url(host: str, port: int) -> str:
    """The address a browser on this machine uses for a server bound to `host:port`."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port; the address used is printed).")
@click.option("--limit-concurrency", default=100, show_default=True, type=click.IntRange(1),
              envvar="SERVER_LIMIT_CONCURRENCY",
              help="Most connections and tasks at once; beyond it new requests get 503 at once "
                   "(env SERVER_LIMIT_CONCURRENCY).")
@click.option("--timeout-keep-alive", default=5, show_default=True, type=click.IntRange(1),
              envvar="SERVER_TIMEOUT_KEEP_ALIVE",
              help="Seconds an idle keep-alive connection stays open (env SERVER_TIMEOUT_KEEP_ALIVE).")
@click.option("--timeout-headers", default=10.0, show_default=True, type=click.FloatRange(0.1),
              envvar="SERVER_TIMEOUT_HEADERS",
              help="Seconds a request's line and headers may take to arrive (from the connection's start "
                   "or the previous response); past it 408 and the connection is closed: slowloris "
                   "(env SERVER_TIMEOUT_HEADERS).")
@click.option("--timeout-body", default=60.0, show_default=True, type=click.FloatRange(0.1),
              envvar="SERVER_TIMEOUT_BODY",
              help="Seconds a request body may pause before the connection is closed "
                   "(env SERVER_TIMEOUT_BODY; uploads answer 408 after UPLOAD_IDLE_TIMEOUT first).")
@click.option("--limit-per-address", default=30, show_default=True, type=click.IntRange(0),
              envvar="SERVER_LIMIT_PER_ADDRESS",
              help="Most open connections from one client address (per worker); a further one is answered "
                   "503 and closed at once. 0: no limit. The proxies in FORWARDED_ALLOW_IPS are not limited "
                   "(env SERVER_LIMIT_PER_ADDRESS).")
@click.option("--timeout-graceful-shutdown", default=30, show_default=True, type=click.IntRange(1),
              envvar="SERVER_TIMEOUT_GRACEFUL_SHUTDOWN",
              help="Seconds to finish running requests on shutdown (env SERVER_TIMEOUT_GRACEFUL_SHUTDOWN).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1), envvar="SERVER_WORKERS",
              help="Worker processes, each with its own database connections and its own Python "
                   "interpreter (env SERVER_WORKERS). On PostgreSQL use 2 or more (about one per core): "
                   "one worker runs Python on one core at a time, so a long agreement or report "
                   "computation slows every request of its worker. On SQLite the writers of every "
                   "worker still take turns on the one database file.")
@one_line_errors
def serve(host: str, port: int, limit_concurrency: int = 100, timeout_keep_alive: int = 5,
          timeout_headers: float = 10.0, timeout_body: float = 60.0, limit_per_address: int = 30,
          timeout_graceful_shutdown: int = 30, workers: int = 1) -> None:
    """Run the web app (refuses to start on an out-of-date schema, a port already in use, or,
    bound beyond loopback, without a SECRET_KEY of its own).

    Prints the address it listens on and its login page, with the port actually bound.
    Slow clients: idle keep-alive connections close after --timeout-keep-alive seconds, an
    upload body that stalls for UPLOAD_IDLE_TIMEOUT seconds (or takes UPLOAD_TOTAL_TIMEOUT in all)
    is refused with 408, request headers must arrive within --timeout-headers seconds and a body
    may not pause longer than --timeout-body, one address holds at most --limit-per-address
    connections, and at most --limit-concurrency connections are served at once (503 beyond).
    X-Forwarded-For is believed only from the proxies in FORWARDED_ALLOW_IPS (none by default).
    --workers N starts N processes on the one port (--limit-concurrency counts per worker)."""
    import uvicorn

    from app.core import guarded_http
    from app.main import create_app

    settings = get_settings()
    check_secret_key(host, settings)
    # read by app.core.guarded_http in this process and in every worker process
    os.environ.update(SERVER_TIMEOUT_HEADERS=str(timeout_headers), SERVER_TIMEOUT_BODY=str(timeout_body),
                      SERVER_LIMIT_PER_ADDRESS=str(limit_per_address),
                      FORWARDED_ALLOW_IPS=settings.forwarded_allow_ips)
    guarded_http.guards.cache_clear()
    if workers > 1:
        checked_engine().dispose()  # the schema check, once, before any worker starts
        if "secret_key" not in settings.model_fields_set:
            # one key for every worker, or a session cookie signed by one is refused by the others
            os.environ["SECRET_KEY"] = settings.secret_key
        app = "app.cli.serve:worker_app"  # each worker builds its own app (and engine) from the settings
    else:
        app = create_app(checked_engine())
    sock = bind_listen(host, port)
    url = base_url(host, sock.getsockname()[1])
    click.echo(f"a2annotate serving on {url}/  (API docs at {url}/docs)")
    click.echo(f"log in at {url}/login", nl=True)
    sys.stdout.flush()
    config = uvicorn.Config(app, host=host, port=sock.getsockname()[1], log_level="info",
                            limit_concurrency=limit_concurrency, timeout_keep_alive=timeout_keep_alive,
                            timeout_graceful_shutdown=timeout_graceful_shutdown,
                            h11_max_incomplete_event_size=64 * 1024, workers=workers, factory=workers > 1,
                            http=guarded_http.GuardedH11Protocol,
                            # the app trusts X-Forwarded-For itself, from FORWARDED_ALLOW_IPS only (app.main);
                            # uvicorn's default would believe any loopback peer
                            proxy_headers=False)
    with embedded_worker(settings):
        if workers > 1:
            from uvicorn.supervisors import Multiprocess

            Multiprocess(config, sockets=[sock]).run()
        else:
            _server_class()(config).run(sockets=[sock])


@contextlib.contextmanager
def embedded_worker(settings: Settings) -> Iterator[None]:
    """One `a2annotate worker` process beside the server (JOBS_EMBEDDED_WORKER, on by default),
    so that `serve` alone runs everything; stopped with the server."""
    from app.jobs.queue import broker_url

    if not settings.jobs_embedded_worker or broker_url(settings) == "immediate":
        yield
        return
    env = dict(os.environ, SECRET_KEY=settings.secret_key)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "worker", "--concurrency", "1"], env=env)
    click.echo(f"a background worker runs beside the server (pid {proc.pid}; JOBS_EMBEDDED_WORKER=false to run your own)")
    try:
        yield
    finally:
        proc.terminate()  # huey stops at once; a job it was running is started again later (idempotent)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
