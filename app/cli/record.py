"""`a2annotate record`: the A2A recording proxy (app.capture.proxy), one or several at once."""
from __future__ import annotations

from typing import Any

import click

from app.cli.common import one_line_errors

PROXY_KEYS = ("listen", "upstream", "name", "public_url", "client_name")


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.ClickException(f"--listen {value!r}: expected HOST:PORT, e.g. 127.0.0.1:9001")
    return host.strip("[]"), int(port)


def load_config(path: str) -> dict[str, Any]:
    """Read a record config (YAML/JSON): ``proxies: [{listen, upstream, name?, public_url?, client_name?}]``
    plus optional ``sidecar``, ``log``, ``spool``, ``stream``. Raises ClickException naming the bad key."""
    import yaml

    from app.ingest.safety import safeyaml

    try:
        doc = safeyaml.load_file(path)  # aliases, nesting, size and values bounded
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise click.ClickException(f"{path}: cannot read the config: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("proxies"), list) or not doc["proxies"]:
        raise click.ClickException(f"{path}: expected a mapping with a non-empty 'proxies' list")
    bad = set(doc) - {"proxies", "sidecar", "log", "spool", "stream"}
    if bad:
        raise click.ClickException(f"{path}: unknown key {sorted(bad)[0]!r}")
    for i, p in enumerate(doc["proxies"]):
        if not isinstance(p, dict):
            raise click.ClickException(f"{path}: proxies[{i}]: must be a mapping")
        extra = set(p) - set(PROXY_KEYS)
        if extra:
            raise click.ClickException(f"{path}: proxies[{i}].{sorted(extra)[0]}: unknown key "
                                       f"(expected {', '.join(PROXY_KEYS)})")
        for key in ("listen", "upstream"):
            if not isinstance(p.get(key), str):
                raise click.ClickException(f"{path}: proxies[{i}].{key}: required string")
        parse_listen(p["listen"])
    return doc


@click.command("record")
@click.option("--listen", help="HOST:PORT the proxy listens on.")
@click.option("--upstream", help="Base URL of the A2A agent behind the proxy.")
@click.option("--name", default=None, help="The agent's name in the runs (default: its card's name).")
@click.option("--client-name", default="user", show_default=True,
              help="Name of the calling side when the request has no X-A2annotate-From header.")
@click.option("--public-url", default=None, help="URL clients use to reach the proxy (default: from the request).")
@click.option("--sidecar", type=click.Path(exists=True, dir_okay=False), default=None,
              help="YAML/JSON per agent: principal, objective, constraints, model, harness, private_state.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Run several proxies: YAML with proxies: [{listen, upstream, name}], sidecar, log, spool, stream.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="Also append every envelope to this wire log (importable with `a2annotate import`).")
@click.option("--spool", default=".a2annotate-spool", show_default=True,
              help="Folder for captures the database could not take yet (replayed automatically).")
@click.option("--stream", default="a2a-proxy", show_default=True,
              help="Capture stream name: runs are grouped by contextId within a stream.")
@click.option("--replay", is_flag=True, help="Only replay the spool into the database, then exit.")
@one_line_errors
def record(listen, upstream, name, client_name, public_url, sidecar, config_path, log_path, spool, stream,
           replay) -> None:
    """Transparent A2A recording proxy: `--listen HOST:PORT --upstream URL [--name AGENT]`.

    Clients talk to the proxy as to the agent (its card is served with the proxy's URL); JSON-RPC,
    HTTP+JSON and SSE pass through unchanged, and every request and response is recorded into the
    database (DATABASE_URL) as growing runs, grouped by contextId. If the database is down, traffic
    still flows and the capture is spooled to --spool and replayed. The gRPC binding is not proxied.
    """
    import asyncio

    import uvicorn

    from app.capture.proxy import Recorder, create_proxy_app, uvicorn_config
    from app.core.config import get_settings
    from app.ingest.sidecar import load_sidecar

    cfg: dict[str, Any] = load_config(config_path) if config_path else {}
    proxies = cfg.get("proxies") or []
    if listen or upstream:
        if not (listen and upstream):
            raise click.UsageError("--listen and --upstream go together")
        parse_listen(listen)
        proxies = [*proxies, {"listen": listen, "upstream": upstream, "name": name, "public_url": public_url,
                              "client_name": client_name}]
    side = load_sidecar(sidecar or cfg.get("sidecar"))
    rec = Recorder(get_settings().database_url, stream=cfg.get("stream") or stream, sidecar=side,
                   spool_dir=cfg.get("spool") or spool, log_path=log_path or cfg.get("log"))
    if replay:
        left = rec.replay()
        click.echo("spool replayed" if left else f"database still unavailable ({rec.last_error}); spool kept")
        if not left:
            raise SystemExit(1)
        return
    if not proxies:
        raise click.UsageError("give --listen HOST:PORT --upstream URL, or --config FILE")
    from app.cli.serve import check_listen

    servers = []
    for p in proxies:
        host, port = parse_listen(p["listen"])
        check_listen(host, port)
        app = create_proxy_app(p["upstream"], rec, name=p.get("name"), public_url=p.get("public_url"),
                               client_name=p.get("client_name") or client_name)
        servers.append(uvicorn.Server(uvicorn_config(app, host, port, log_level="info")))
        click.echo(f"recording {p['upstream']} on http://{host}:{port}/" + (f" as {p['name']}" if p.get("name") else ""))

    async def main() -> None:
        await asyncio.gather(*(s.serve() for s in servers))

    asyncio.run(main())
