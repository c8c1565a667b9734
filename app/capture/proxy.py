"""The A2A recording proxy: a transparent reverse proxy in front of one A2A agent (Starlette + httpx).

What passes through is not changed, with one exception: the agent card (``/.well-known/agent-card.json``,
the 0.3 ``/.well-known/agent.json``, and the REST ``/extendedAgentCard`` / 0.3 ``/v1/card``) is served
with the proxy's own URL in place of the upstream's (1.0 ``supportedInterfaces[].url``, 0.3 ``url`` and
``additionalInterfaces[].url``), so clients that read the card keep talking through the proxy.
Requests are forwarded with their headers (``A2A-Version``, ``A2A-Extensions``, ``Authorization``, ...)
minus the hop-by-hop ones; response bytes are relayed as they arrive (``aiter_raw``: SSE events reach
the client when the agent sends them, nothing is buffered or re-encoded).

Every request and response (each SSE event on its own) becomes a wire-log envelope
``{id, ts, direction, from_agent, to_agent, exchange, context, http: {method, path, status, headers}, body}``
(``context``: the exchange's contextId once any of its envelopes names it, so a batch rebuilds only
the runs it touches) handed to a `Recorder`, which writes off the request path (an asyncio queue drained by a background
task) through app.capture.service.ingest_envelopes, i.e. the same wire importer as files and the same
loader. When the database cannot be written, the batch is appended to a spool file and replayed (ids
make replays idempotent) before the next batch; each process spools to its own file
(``<spool>/<stream>.<pid>.jsonl``) and also replays files left by processes that are gone. `--log FILE` also appends every envelope to a wire
log that `a2annotate import` reads to the same runs.

Who is who: ``to_agent`` is the proxy's ``--name`` (else the upstream card's ``name``), ``from_agent``
the ``X-A2annotate-From`` request header (not forwarded) or ``--client-name`` (default ``user``).
The gRPC binding is not proxied (out of scope).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import uuid
import zlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from app.ingest.safety import safejson

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                        "trailer", "trailers", "transfer-encoding", "upgrade", "host"})
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
EXTENDED_CARD_SUFFIXES = ("/extendedAgentCard", "/v1/card", "/agent/authenticatedExtendedCard")
FROM_HEADER = "x-a2annotate-from"
KEPT_HEADERS = ("a2a-version", "a2a-extensions", "content-type")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------- recorder

class Recorder:
    """Writes envelopes to the database off the request path; spools to disk when it cannot.

    `database_url` may be changed at any time (the next write uses it). `stream` names the capture
    stream the envelopes belong to (runs are rebuilt per stream)."""

    def __init__(self, database_url: str, stream: str = "a2a-proxy", sidecar: dict | None = None,
                 spool_dir: str | os.PathLike | None = None, log_path: str | os.PathLike | None = None,
                 batch_seconds: float = 0.2, replay_seconds: float = 10.0) -> None:
        self.database_url = database_url
        self.stream = stream
        self.sidecar = sidecar or {}
        self.spool_dir = Path(spool_dir or os.environ.get("A2ANNOTATE_SPOOL_DIR", ".a2annotate-spool"))
        self.log_path = Path(log_path) if log_path else None
        self.batch_seconds = batch_seconds
        self.replay_seconds = replay_seconds
        self.queue: asyncio.Queue[dict] | None = None
        self.task: asyncio.Task | None = None
        self.lock = threading.Lock()
        self._engines: dict[str, Any] = {}
        self.written = 0
        self.spooled = 0
        self.last_error: str | None = None

    @property
    def _safe_stream(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.stream)

    @property
    def spool_path(self) -> Path:
        """This process's spool file (each process appends to its own)."""
        return self.spool_dir / f"{self._safe_stream}.{os.getpid()}.jsonl"

    def spool_files(self) -> list[Path]:
        """Spool files to replay: this process's, and those left by processes no longer running."""
        if not self.spool_dir.is_dir():
            return []
        out = []
        for p in sorted(self.spool_dir.glob(f"{self._safe_stream}.*.jsonl")):
            pid = p.name[len(self._safe_stream) + 1:-len(".jsonl")]
            if p == self.spool_path or not pid.isdigit() or not _alive(int(pid)):
                out.append(p)
        return out

    def record(self, env: dict) -> None:
        """Queue one envelope (never blocks, never raises into the request)."""
        if self.queue is None:
            self.queue = asyncio.Queue()
        self.queue.put_nowait(env)

    async def start(self) -> None:
        if self.queue is None:
            self.queue = asyncio.Queue()
        if self.task is None:
            self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await self.drain()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def drain(self) -> None:
        """Wait until every queued envelope was written (or spooled)."""
        if self.queue is not None:
            await self.queue.join()

    async def _run(self) -> None:
        assert self.queue is not None
        while True:
            try:
                first = await asyncio.wait_for(self.queue.get(), timeout=self.replay_seconds)
            except TimeoutError:
                if self.spool_files():  # quiet: try to bring the spool in
                    await asyncio.to_thread(self.replay)
                continue
            batch = [first]
            await asyncio.sleep(self.batch_seconds)
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            try:
                await asyncio.to_thread(self.write, batch)
            except Exception:  # noqa: BLE001 - the writer must survive anything
                log.exception("recorder: writing a batch failed")
            finally:
                for _ in batch:
                    self.queue.task_done()

    def _engine(self):
        from app.core.db import make_engine

        eng = self._engines.get(self.database_url)
        if eng is None:
            eng = self._engines[self.database_url] = make_engine(self.database_url)
        return eng

    def write(self, batch: list[dict]) -> bool:
        """Log, replay the spool, write `batch`; spool it on failure. Returns True when written."""
        with self.lock:
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    for env in batch:
                        f.write(json.dumps(env, ensure_ascii=False) + "\n")
            files = self.spool_files()
            pending = [env for f in files for env in self._read_spool(f)] + batch
            try:
                self._ingest(pending)
            except Exception as exc:  # noqa: BLE001 - database down or refusing: keep it on disk
                self.last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                log.warning("recorder: database unavailable (%s); %d envelope(s) spooled to %s",
                            self.last_error, len(batch), self.spool_path)
                self._append_spool(batch)
                self.spooled += len(batch)
                return False
            for f in files:
                f.unlink(missing_ok=True)
            self.written += len(pending)
            self.last_error = None
            return True

    def replay(self) -> bool:
        """Write whatever is spooled (e.g. once the database is back). Returns True when nothing is left."""
        return self.write([])

    def _ingest(self, envelopes: list[dict]) -> None:
        if not envelopes:
            return
        from sqlalchemy.exc import IntegrityError

        from app.capture.service import ingest_envelopes
        from app.core.db import session_scope

        for attempt in range(3):  # another recorder wrote the same run meanwhile: rebuild again
            try:
                with session_scope(self._engine()) as session:
                    ingest_envelopes(session, self.stream, envelopes, self.sidecar)
                return
            except IntegrityError:
                if attempt == 2:
                    raise

    def _read_spool(self, path: Path) -> list[dict]:
        if not path.exists():
            return []
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(safejson.loads(line))
                    except ValueError:
                        log.warning("recorder: unreadable spool line skipped")
        return out

    def _append_spool(self, batch: list[dict]) -> None:
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        with open(self.spool_path, "a", encoding="utf-8") as f:
            for env in batch:
                f.write(json.dumps(env, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


# --------------------------------------------------------------------------- helpers

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def rewrite_card(card: Any, public_base: str) -> Any:
    """The card with each interface URL moved onto `public_base` (scheme://host:port), path kept."""
    if not isinstance(card, dict):
        return card
    pub = urlsplit(public_base)

    def move(url: Any) -> Any:
        if not isinstance(url, str) or not url:
            return url
        u = urlsplit(url)
        if u.scheme not in ("http", "https"):
            return url  # e.g. a gRPC target: not proxied
        return urlunsplit((pub.scheme, pub.netloc, u.path, u.query, u.fragment))

    out = dict(card)
    if "url" in out:
        out["url"] = move(out["url"])
    for key in ("supportedInterfaces", "additionalInterfaces"):
        if isinstance(out.get(key), list):
            out[key] = [dict(i, url=move(i.get("url"))) if isinstance(i, dict) else i for i in out[key]]
    return out


def _decode(data: bytes, encoding: str) -> bytes:
    enc = (encoding or "").lower()
    try:
        if enc == "gzip":
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        if enc == "deflate":
            return zlib.decompress(data)
    except zlib.error:
        return data
    return data


def _json(data: bytes) -> Any:
    if not data.strip():
        return None
    try:
        return safejson.loads(data)
    except (UnicodeDecodeError, ValueError):
        return {"raw": data.decode("utf-8", "replace")[:100_000]}


class SSEParser:
    """Incremental SSE parser: feed bytes, get the ``data`` payload of each complete event."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.buf += chunk
        out = []
        while True:
            idx = -1
            for sep in (b"\r\n\r\n", b"\n\n", b"\r\r"):
                i = self.buf.find(sep)
                if i >= 0 and (idx < 0 or i < idx):
                    idx, seplen = i, len(sep)
            if idx < 0:
                return out
            block, self.buf = self.buf[:idx], self.buf[idx + seplen:]
            data = [ln[5:].removeprefix(b" ") for ln in block.replace(b"\r\n", b"\n").split(b"\n")
                    if ln.startswith(b"data:")]
            if data:
                out.append(b"\n".join(data))

    def close(self) -> list[bytes]:
        return self.feed(b"\n\n") if self.buf.strip() else []


# --------------------------------------------------------------------------- the proxy

class Proxy:
    def __init__(self, upstream: str, recorder: Recorder, *, name: str | None = None,
                 public_url: str | None = None, client_name: str = "user",
                 transport: httpx.AsyncBaseTransport | None = None, timeout: float | None = None) -> None:
        u = urlsplit(upstream)
        self.origin = urlunsplit((u.scheme, u.netloc, "", "", ""))
        self.recorder = recorder
        self.name = name
        self.public_url = public_url
        self.client_name = client_name
        self.client = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout), follow_redirects=False)
        self.task_ctx: dict[str, str] = {}

    def tagger(self) -> Callable[[dict | None], None]:
        """Records one exchange's envelopes, each tagged with the exchange's ``context`` (run) once
        an envelope names it (the request often does not: the server assigns the context). Call
        with None when the exchange is over (what is still held goes out untagged)."""
        from app.ingest.readers.wire import envelope_context

        held: list[dict] = []
        state: dict[str, str | None] = {"ctx": None}

        def put(env: dict | None) -> None:
            if env is not None:
                if state["ctx"] is None:
                    state["ctx"] = envelope_context(env, self.task_ctx)
                held.append(env)
            if state["ctx"] is not None or env is None:
                for e in held:
                    if state["ctx"] is not None:
                        e["context"] = state["ctx"]
                    self.recorder.record(e)
                held.clear()

        return put

    def agent_name(self) -> str:
        return self.name or urlsplit(self.origin).netloc

    def envelope(self, direction: str, exchange: str, frm: str, to: str, http: dict, body: Any) -> dict:
        env = {"id": uuid.uuid4().hex, "ts": _now(), "direction": direction, "from_agent": frm, "to_agent": to,
               "exchange": exchange, "http": http}
        if body is not None:
            env["body"] = body
        return env

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        query = request.url.query
        target = self.origin + path + (f"?{query}" if query else "")
        caller = request.headers.get(FROM_HEADER) or self.client_name
        headers = [(k, v) for k, v in request.headers.raw
                   if k.decode("latin-1").lower() not in HOP_BY_HOP and k.decode("latin-1").lower() != FROM_HEADER]
        exchange = uuid.uuid4().hex
        kept = {h: request.headers[h] for h in KEPT_HEADERS if h in request.headers}
        is_card = request.method == "GET" and (path in CARD_PATHS or path.endswith(EXTENDED_CARD_SUFFIXES))
        put = self.tagger()
        if not is_card:
            put(self.envelope("request", exchange, caller, self.agent_name(),
                                               {"method": request.method, "path": path, "headers": kept},
                                               _json(body) if body else None))
        upstream_req = self.client.build_request(request.method, target, headers=headers, content=body)
        try:
            resp = await self.client.send(upstream_req, stream=True)
        except httpx.HTTPError as exc:
            msg = f"upstream {self.origin} unreachable: {type(exc).__name__}"
            put(self.envelope("response", exchange, self.agent_name(), caller,
                              {"method": request.method, "path": path, "status": 502},
                              {"error": {"code": 502, "message": msg}}))
            put(None)
            return Response(msg, status_code=502, media_type="text/plain")
        out_headers = [(k, v) for k, v in resp.headers.raw if k.decode("latin-1").lower() not in HOP_BY_HOP]
        rhttp = {"method": request.method, "path": path, "status": resp.status_code,
                 "headers": {h: resp.headers[h] for h in KEPT_HEADERS if h in resp.headers}}
        if is_card and resp.status_code == 200:
            raw = await resp.aread()  # decoded by httpx
            await resp.aclose()
            card = _json(raw)
            if isinstance(card, dict) and isinstance(card.get("name"), str) and self.name is None:
                self.name = card["name"]
            put(self.envelope("response", exchange, self.agent_name(), caller, rhttp, card))
            put(None)
            new = json.dumps(rewrite_card(card, self.public_url or str(request.base_url).rstrip("/"))).encode()
            skip = {"content-length", "content-encoding", "etag"}
            hdrs = [(k, v) for k, v in out_headers if k.decode("latin-1").lower() not in skip]
            response = Response(new, status_code=resp.status_code)
            response.raw_headers = [*hdrs, (b"content-length", str(len(new)).encode())]
            return response
        sse = resp.headers.get("content-type", "").startswith("text/event-stream")
        encoding = resp.headers.get("content-encoding", "")
        frm, to = self.agent_name(), caller

        async def relay() -> AsyncIterator[bytes]:
            parser = SSEParser() if sse else None
            dec = zlib.decompressobj(16 + zlib.MAX_WBITS) if sse and encoding == "gzip" else None
            chunks: list[bytes] = []
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
                    if parser is not None:
                        plain = dec.decompress(chunk) if dec is not None else chunk
                        for payload in parser.feed(plain):
                            put(self.envelope("response", exchange, frm, to, rhttp, _json(payload)))
                    else:
                        chunks.append(chunk)
            finally:
                await resp.aclose()
                if parser is not None:
                    for payload in parser.close():
                        put(self.envelope("response", exchange, frm, to, rhttp, _json(payload)))
                else:
                    data = _decode(b"".join(chunks), encoding)
                    if data.strip() or resp.status_code >= 400:
                        put(self.envelope("response", exchange, frm, to, rhttp, _json(data)))
                put(None)

        response = StreamingResponse(relay(), status_code=resp.status_code)
        response.raw_headers = out_headers  # exactly the upstream's (content-length, encoding, type...)
        return response


def create_proxy_app(upstream: str, recorder: Recorder, *, name: str | None = None, public_url: str | None = None,
                     client_name: str = "user", transport: httpx.AsyncBaseTransport | None = None,
                     on_startup: Callable[[], Any] | None = None) -> Starlette:
    """The ASGI app of one proxy (the recorder's writer runs for the app's lifetime)."""
    proxy = Proxy(upstream, recorder, name=name, public_url=public_url, client_name=client_name, transport=transport)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await recorder.start()
        try:
            yield
        finally:
            await recorder.stop()
            await proxy.client.aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    app = Starlette(routes=[Route("/{path:path}", proxy.handle, methods=methods)], lifespan=lifespan)
    app.state.proxy = proxy
    app.state.recorder = recorder
    return app
