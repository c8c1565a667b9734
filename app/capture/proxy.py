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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
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


def _decode(data: bytes, encoding: str, limit: int | None = None) -> bytes:
    """`data` un-gzipped / inflated (at most `limit` bytes out), else as it is."""
    enc = (encoding or "").lower()
    if enc not in ("gzip", "deflate"):
        return data
    try:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS if enc == "gzip" else zlib.MAX_WBITS)
        out = d.decompress(data, limit or 0)
        if limit and d.unconsumed_tail:
            return b'{"not_recorded": "the response unpacks to more than PROXY_MAX_BODY_BYTES"}'
        return out
    except zlib.error:
        return data


def _json(data: bytes) -> Any:
    if not data.strip():
        return None
    try:
        return safejson.loads(data)
    except (UnicodeDecodeError, ValueError):
        return {"raw": data.decode("utf-8", "replace")[:100_000]}


class SSEParser:
    """Incremental SSE parser: feed bytes, get the ``data`` payload of each complete event.

    Linear in the input: each byte is looked at a constant number of times (lines are split as
    they arrive, an event's data lines are kept in a list and joined once). Lines end in CRLF, LF
    or CR (also split across chunks). An event whose data passes `max_event_bytes` is dropped
    (counted in `dropped`) and its further lines are skipped without being kept."""

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self.max_event_bytes = max_event_bytes
        self.partial = bytearray()  # the incomplete last line
        self.data: list[bytes] = []
        self.size = 0
        self.has_data = False
        self.oversized = False
        self.dropped = 0
        self.cr = False  # the last chunk ended in CR: a LF at the start of the next one belongs to it

    def _line(self, line: bytes, out: list[bytes]) -> None:
        if not line:
            if self.oversized:
                self.dropped += 1
            elif self.has_data:
                out.append(b"\n".join(self.data))
            self.data, self.size, self.has_data, self.oversized = [], 0, False, False
            return
        if self.oversized or not line.startswith(b"data"):
            return
        if line.startswith(b"data:"):
            value = line[5:]
            if value.startswith(b" "):
                value = value[1:]
        elif line == b"data":
            value = b""
        else:
            return
        self.size += len(value) + 1
        if self.max_event_bytes is not None and self.size > self.max_event_bytes:
            self.oversized, self.data = True, []
            return
        self.data.append(value)
        self.has_data = True

    def _too_long(self) -> bool:
        return self.max_event_bytes is not None and len(self.partial) > self.max_event_bytes + 16

    def feed(self, chunk: bytes) -> list[bytes]:
        out: list[bytes] = []
        n = len(chunk)
        i = 0
        if self.cr and n and chunk[0] == 0x0A:
            i = 1
        self.cr = False
        while i < n:
            lf = chunk.find(b"\n", i)
            cr = chunk.find(b"\r", i, lf if lf >= 0 else n)
            j = cr if cr >= 0 else lf
            if j < 0:
                if not self.oversized:
                    self.partial += chunk[i:]
                    if self._too_long():  # one line longer than an event may be
                        self.oversized, self.data, self.partial = True, [], bytearray()
                break
            if self.partial:
                self.partial += chunk[i:j]
                line = bytes(self.partial)
                self.partial = bytearray()
            else:
                line = chunk[i:j]
            self._line(line, out)
            if j == cr:
                if j + 1 < n:
                    i = j + 2 if chunk[j + 1] == 0x0A else j + 1
                else:
                    self.cr, i = True, n
            else:
                i = j + 1
        return out

    def close(self) -> list[bytes]:
        out: list[bytes] = []
        if self.partial:
            self._line(bytes(self.partial), out)
            self.partial = bytearray()
        self._line(b"", out)
        return out


# --------------------------------------------------------------------------- the proxy

@dataclass(frozen=True)
class ProxyLimits:
    """What one proxy accepts (defaults: the PROXY_* settings, `ProxyLimits.from_settings()`)."""

    #: largest request body, non-streamed response body kept for the record, SSE event (bytes)
    max_body_bytes: int = 16 * 1024 * 1024
    #: seconds to connect to the upstream and get its answer's headers (504 beyond)
    upstream_timeout: float = 60.0
    #: seconds the upstream's answer (a stream) may stay silent between two chunks
    stream_idle_timeout: float = 300.0
    #: seconds a client may pause between two chunks of its body (408 beyond), and may take for all of it
    client_timeout: float = 15.0
    client_total_timeout: float = 120.0
    #: most connections at once (uvicorn's limit_concurrency: 503 beyond)
    max_connections: int = 100

    @classmethod
    def from_settings(cls) -> ProxyLimits:
        from app.core.config import get_settings

        st = get_settings()
        return cls(max_body_bytes=st.proxy_max_body_bytes, upstream_timeout=st.proxy_upstream_timeout,
                   stream_idle_timeout=st.proxy_stream_idle_timeout, client_timeout=st.proxy_client_timeout,
                   client_total_timeout=max(st.proxy_client_timeout, 8 * st.proxy_client_timeout),
                   max_connections=st.proxy_max_connections)


#: a non-streamed answer up to this size is parsed on the loop at once (a JSON-RPC answer); larger in the pool
_INLINE_BYTES = 64 * 1024
#: upstream answers never recorded: the agent refused the caller (or the proxy could not ask it)
REFUSED_STATUSES = frozenset({401, 403, 407, 429})


def a2a_error(body: Any) -> bool:
    """A JSON-RPC error object or an A2A HTTP+JSON error (``{"error": {...}}`` / google.rpc.Status)."""
    if not isinstance(body, dict):
        return False
    err = body.get("error")
    if isinstance(err, dict) and ("code" in err or "message" in err):
        return True
    return "code" in body and "message" in body


def recordable(status: int, body: Any) -> bool:
    """Whether an exchange is recorded: the upstream accepted it (2xx), or answered an A2A error
    after authenticating the caller; never a 401/403/407/429."""
    if 200 <= status < 300:
        return True
    return status not in REFUSED_STATUSES and a2a_error(body)


class _BodyProblem(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Proxy:
    def __init__(self, upstream: str, recorder: Recorder, *, name: str | None = None,
                 public_url: str | None = None, client_name: str = "user",
                 transport: httpx.AsyncBaseTransport | None = None, timeout: float | None = None,
                 limits: ProxyLimits | None = None) -> None:
        u = urlsplit(upstream)
        self.origin = urlunsplit((u.scheme, u.netloc, "", "", ""))
        self.recorder = recorder
        self.name = name
        self.public_url = public_url
        self.client_name = client_name
        self.limits = limits or ProxyLimits.from_settings()
        if timeout is not None:
            self.limits = replace(self.limits, upstream_timeout=timeout)
        lim = self.limits
        self.client = httpx.AsyncClient(
            transport=transport, follow_redirects=False,
            timeout=httpx.Timeout(lim.upstream_timeout, read=max(lim.upstream_timeout, lim.stream_idle_timeout)))
        self.task_ctx: dict[str, str] = {}
        self.pending: set[asyncio.Task] = set()  # exchanges still being recorded
        # parsing of recorded bodies and SSE streams, off the event loop (one stream's chunks in order)
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="a2a-proxy-parse")

    async def _off(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

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

    def _framing_problem(self, request: Request) -> str | None:
        """A request whose length is ambiguous is refused, never forwarded (request smuggling)."""
        raw = request.headers.raw
        lengths = {v.strip() for k, v in raw if k.lower() == b"content-length"}
        chunked = any(k.lower() == b"transfer-encoding" for k, _ in raw)
        if lengths and chunked:
            return "conflicting Content-Length and Transfer-Encoding"
        if len(lengths) > 1:
            return "conflicting Content-Length headers"
        if lengths and not next(iter(lengths)).isdigit():
            return "invalid Content-Length"
        return None

    async def _read_body(self, request: Request) -> bytes:
        lim = self.limits
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > lim.max_body_bytes:
            raise _BodyProblem(413, f"request body larger than {lim.max_body_bytes} bytes (PROXY_MAX_BODY_BYTES)")
        body = bytearray()
        stream = request.stream().__aiter__()
        deadline = asyncio.get_running_loop().time() + lim.client_total_timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                chunk = await asyncio.wait_for(stream.__anext__(), min(lim.client_timeout, max(left, 0.001)))
            except StopAsyncIteration:
                return bytes(body)
            except TimeoutError:
                raise _BodyProblem(408, "request body not received in time") from None
            body.extend(chunk)
            if len(body) > lim.max_body_bytes:
                raise _BodyProblem(413, f"request body larger than {lim.max_body_bytes} bytes (PROXY_MAX_BODY_BYTES)")

    async def handle(self, request: Request) -> Response:
        problem = self._framing_problem(request)
        if problem is not None:
            return Response(problem, status_code=400, media_type="text/plain", headers={"Connection": "close"})
        try:
            body = await self._read_body(request)
        except _BodyProblem as exc:
            return Response(exc.message, status_code=exc.status, media_type="text/plain",
                            headers={"Connection": "close"})
        path = request.url.path
        query = request.url.query
        target = self.origin + path + (f"?{query}" if query else "")
        caller = request.headers.get(FROM_HEADER) or self.client_name
        # the body's length is set by httpx from the body itself, never the client's Content-Length
        headers = [(k, v) for k, v in request.headers.raw
                   if k.decode("latin-1").lower() not in HOP_BY_HOP
                   and k.decode("latin-1").lower() not in (FROM_HEADER, "content-length")]
        exchange = uuid.uuid4().hex
        kept = {h: request.headers[h] for h in KEPT_HEADERS if h in request.headers}
        is_card = request.method == "GET" and (path in CARD_PATHS or path.endswith(EXTENDED_CARD_SUFFIXES))
        put = self.tagger()
        req_env = None
        if not is_card:
            req_env = self.envelope("request", exchange, caller, self.agent_name(),
                                    {"method": request.method, "path": path, "headers": kept},
                                    (await self._off(_json, body)) if body else None)
        upstream_req = self.client.build_request(request.method, target, headers=headers, content=body)
        try:
            resp = await asyncio.wait_for(self.client.send(upstream_req, stream=True), self.limits.upstream_timeout)
        except TimeoutError:  # nothing recorded: the upstream did not accept anything
            return Response(f"upstream {self.origin} did not answer within {self.limits.upstream_timeout:g} s",
                            status_code=504, media_type="text/plain")
        except (httpx.HTTPError, OSError, ValueError) as exc:
            msg = f"upstream {self.origin} unreachable: {type(exc).__name__}"
            return Response(msg, status_code=502, media_type="text/plain")
        out_headers = [(k, v) for k, v in resp.headers.raw if k.decode("latin-1").lower() not in HOP_BY_HOP]
        rhttp = {"method": request.method, "path": path, "status": resp.status_code,
                 "headers": {h: resp.headers[h] for h in KEPT_HEADERS if h in resp.headers}}
        if is_card and resp.status_code == 200:
            try:
                raw = await self._bounded_read(resp)  # decoded by httpx
            except _BodyProblem as exc:
                return Response(exc.message, status_code=502, media_type="text/plain")
            finally:
                await resp.aclose()
            card = await self._off(_json, raw)
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
        accepted = 200 <= resp.status_code < 300
        max_kept = self.limits.max_body_bytes
        if accepted and req_env is not None:
            put(req_env)
        # recording goes on in tasks of their own (parsing in the pool), so a client that leaves
        # early never cuts an exchange's record short
        queue: asyncio.Queue[bytes | None] | None = None
        backlog = [0]
        if sse and accepted:
            queue = asyncio.Queue()
            self._spawn(self._record_sse(queue, backlog, put, encoding, exchange, frm, to, rhttp))

        async def relay() -> AsyncIterator[bytes]:
            chunks: list[bytes] = []
            kept = 0
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
                    if queue is not None:
                        if backlog[0] <= 4 * max_kept:  # beyond: the parser cannot keep up, stop recording
                            backlog[0] += len(chunk)
                            queue.put_nowait(chunk)
                    elif kept <= max_kept:
                        kept += len(chunk)
                        chunks.append(chunk)
            finally:
                if queue is not None:
                    queue.put_nowait(None)
                elif kept <= _INLINE_BYTES and encoding.lower() in ("", "identity"):  # the usual small answer
                    self._finish_body(_json(b"".join(chunks)), resp.status_code, req_env, put, exchange, frm, to,
                                      rhttp)
                else:
                    self._spawn(self._record_body(b"".join(chunks) if kept <= max_kept else None, encoding,
                                                  resp.status_code, req_env, put, exchange, frm, to, rhttp))
                del chunks
                await resp.aclose()

        response = StreamingResponse(relay(), status_code=resp.status_code)
        response.raw_headers = out_headers  # exactly the upstream's (content-length, encoding, type...)
        return response

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _record_sse(self, queue: asyncio.Queue, backlog: list[int], put, encoding: str, exchange: str,
                          frm: str, to: str, rhttp: dict) -> None:
        max_kept = self.limits.max_body_bytes
        parser = SSEParser(max_kept)
        dec = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None

        def parse(chunk: bytes) -> list[Any]:
            plain = dec.decompress(chunk, 4 * max_kept) if dec is not None else chunk
            return [_json(p) for p in parser.feed(plain)]

        try:
            while (chunk := await queue.get()) is not None:
                backlog[0] -= len(chunk)
                for payload in await self._off(parse, chunk):
                    put(self.envelope("response", exchange, frm, to, rhttp, payload))
            for payload in parser.close():
                put(self.envelope("response", exchange, frm, to, rhttp, _json(payload)))
        except Exception:  # noqa: BLE001 - recording must never break the stream
            log.exception("proxy: recording an SSE stream failed")
        finally:
            put(None)

    async def _record_body(self, data: bytes | None, encoding: str, status: int, req_env: dict | None, put,
                           exchange: str, frm: str, to: str, rhttp: dict) -> None:
        try:
            if data is None:
                doc: Any = {"not_recorded": f"response body larger than {self.limits.max_body_bytes} bytes "
                                            "(PROXY_MAX_BODY_BYTES)"}
            else:
                doc = await self._off(_decoded_json, data, encoding, self.limits.max_body_bytes)
            self._finish_body(doc, status, req_env, put, exchange, frm, to, rhttp)
        except Exception:  # noqa: BLE001
            log.exception("proxy: recording a response failed")
            put(None)

    def _finish_body(self, doc: Any, status: int, req_env: dict | None, put, exchange: str, frm: str, to: str,
                     rhttp: dict) -> None:
        record = 200 <= status < 300 and req_env is not None
        if not record and req_env is not None and recordable(status, doc):
            put(req_env)  # an A2A error after authentication: the exchange is recorded
            record = True
        if record and (doc is not None or status >= 400):
            put(self.envelope("response", exchange, frm, to, rhttp, doc))
        put(None)

    async def _bounded_read(self, resp: httpx.Response) -> bytes:
        out = bytearray()
        async for chunk in resp.aiter_bytes():
            out.extend(chunk)
            if len(out) > self.limits.max_body_bytes:
                raise _BodyProblem(502, f"upstream answer larger than {self.limits.max_body_bytes} bytes")
        return bytes(out)


def _decoded_json(data: bytes, encoding: str, limit: int) -> Any:
    return _json(_decode(data, encoding, limit))


def create_proxy_app(upstream: str, recorder: Recorder, *, name: str | None = None, public_url: str | None = None,
                     client_name: str = "user", transport: httpx.AsyncBaseTransport | None = None,
                     on_startup: Callable[[], Any] | None = None, limits: ProxyLimits | None = None) -> Starlette:
    """The ASGI app of one proxy (the recorder's writer runs for the app's lifetime). Serve it with
    `uvicorn_config` (connection limit and keep-alive timeout from its limits)."""
    proxy = Proxy(upstream, recorder, name=name, public_url=public_url, client_name=client_name, transport=transport,
                  limits=limits)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await recorder.start()
        try:
            yield
        finally:
            if proxy.pending:
                await asyncio.gather(*list(proxy.pending), return_exceptions=True)
            await recorder.stop()
            await proxy.client.aclose()
            proxy.pool.shutdown(wait=False, cancel_futures=True)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    app = Starlette(routes=[Route("/{path:path}", proxy.handle, methods=methods)], lifespan=lifespan)
    app.state.proxy = proxy
    app.state.recorder = recorder
    return app


def uvicorn_config(app: Starlette, host: str, port: int, **kwargs: Any):
    """uvicorn settings for a proxy app: at most `limits.max_connections` connections (503 beyond),
    idle keep-alive connections closed after `limits.client_timeout` s, bounded headers; the
    server's guarded h11 protocol (app.core.guarded_http): request headers must arrive within
    SERVER_TIMEOUT_HEADERS (408), a body may pause at most SERVER_TIMEOUT_BODY, and one address
    holds at most SERVER_LIMIT_PER_ADDRESS connections (slowloris)."""
    import uvicorn

    from app.core.guarded_http import GuardedH11Protocol

    lim: ProxyLimits = app.state.proxy.limits
    kwargs.setdefault("http", GuardedH11Protocol)
    return uvicorn.Config(app, host=host, port=port, limit_concurrency=lim.max_connections,
                          timeout_keep_alive=max(1, int(lim.client_timeout)), h11_max_incomplete_event_size=64 * 1024,
                          **kwargs)
