"""POST /v1/traces: OTLP/HTTP trace ingestion (what OpenTelemetry exporters send to a collector).

Request: ``Content-Type: application/x-protobuf`` (the exporters' default) or ``application/json``,
optionally ``Content-Encoding: gzip``; ``Authorization: Bearer <token>`` of an admin or reviewer.
Answer, as OTLP/HTTP specifies, in the request's encoding: 200 with an ``ExportTraceServiceResponse``
(``partialSuccess.rejectedSpans`` and ``errorMessage`` when some spans could not be used); 400 with a
``google.rpc.Status`` for a body that does not decode; 401/403 for auth; 413 too large; 415 for
another content type; 503 (retryable, ``Retry-After``) when the database is unavailable. The spans
go through app.ingest.readers.otlp (the same mapping as trace files) into growing runs (app.capture.service).

Hostile input: the body is bounded (OTLP_MAX_BODY_BYTES, as sent and unpacked) before it is
decoded; unpacking, decoding (every input limit checked per span; a span over one is rejected by
name in the partial success) and storing run in a bounded pool of worker processes (OTLP_WORKERS,
spawned and niced; OTLP_MAX_WAITING more may wait, 503 beyond), under a CPU budget
(OTLP_CPU_SECONDS); more than OTLP_MAX_SPANS_PER_REQUEST spans is a 413 before any is converted.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import threading
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from app.auth.service import user_for_token
from app.core.config import get_settings
from app.core.db import session_scope
from app.ingest.readers.otlp import OtlpFormatError, OtlpTooLarge, read_body
from app.ingest.safety import safejson
from app.ingest.safety.limits import input_limits
from app.ingest.sidecar import SidecarError, check_sidecar, load_sidecar

log = logging.getLogger(__name__)
def _prewarm() -> None:
    """At server start: the decoding workers are started in the background (spawning them takes
    seconds; the first OTLP request should not wait for it)."""
    threading.Thread(target=_pool, daemon=True, name="otlp-pool-start").start()


router = APIRouter(tags=["live capture"], on_startup=[_prewarm])
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SIDECAR_HEADER = "a2annotate-sidecar"
_RPC = {400: 3, 401: 16, 403: 7, 413: 8, 415: 3, 500: 13, 503: 14}  # google.rpc.Code


def _status_body(ctype: str, http_status: int, message: str) -> bytes:
    if ctype == JSON:
        return json.dumps({"code": _RPC.get(http_status, 2), "message": message}).encode()
    from google.rpc.status_pb2 import Status

    return Status(code=_RPC.get(http_status, 2), message=message).SerializeToString()


def _error(ctype: str, http_status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(_status_body(ctype, http_status, message), status_code=http_status,
                    media_type=ctype, headers=headers)


def _success(ctype: str, rejected: int, message: str) -> Response:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    if ctype == JSON:
        body: dict[str, Any] = {}
        if rejected or message:
            body["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
        return Response(json.dumps(body).encode(), media_type=JSON)
    resp = ExportTraceServiceResponse()
    if rejected or message:
        resp.partial_success.rejected_spans = rejected
        resp.partial_success.error_message = message
    return Response(resp.SerializeToString(), media_type=PROTOBUF)


def _gunzip(data: bytes, limit: int) -> bytes:
    """Unpack a gzip body, at most `limit` bytes out (counted while decompressing)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise ValueError(f"the body unpacks to more than {limit} bytes (OTLP_MAX_BODY_BYTES)")
    return out


class _Budget:
    """CPU seconds of the worker handling one request (time.thread_time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.thread_time() + seconds

    def left(self) -> bool:
        return time.thread_time() < self.end

    def check(self) -> None:
        if not self.left():
            raise OtlpTooLarge(f"decoding took more than OTLP_CPU_SECONDS ({self.seconds:g}) of CPU: "
                               "send smaller batches")


#: settings the worker processes take from the server's (the server's environment may differ
#: from what they started with, e.g. in tests)
_WORKER_SETTINGS = ("max_json_depth", "max_string_bytes", "max_int_digits", "max_events_per_run", "max_record_bytes",
                    "capture_sync_rebuild_records", "capture_rebuild_growth", "otlp_max_body_bytes",
                    "otlp_max_spans_per_request", "otlp_cpu_seconds")
_POOL: ProcessPoolExecutor | None = None
_POOL_GUARD = threading.Lock()
_IN_FLIGHT = 0  # requests in or waiting for the pool (changed on the event loop only)
_ENGINES: dict[str, Any] = {}


def _pool() -> ProcessPoolExecutor:
    """OTLP bodies are unpacked, decoded and stored in worker processes (spawned, niced): neither
    the event loop nor the server's GIL or CPU share is taken by them."""
    global _POOL
    with _POOL_GUARD:
        if _POOL is None:
            n = get_settings().otlp_workers
            _POOL = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_worker_init, initargs=(os.getpid(),))
            for _ in range(n):  # start them all now, not one by one while requests wait
                _POOL.submit(_noop)
        return _POOL


def _reset_pool() -> None:
    global _POOL
    with _POOL_GUARD:
        pool, _POOL = _POOL, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def _worker_init(server: int) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops its workers itself
    with contextlib.suppress(OSError):
        os.nice(10)  # the server's own requests come first

    def watch() -> None:  # end with the server, even after kill -9 (then the parent changes)
        # `server` is the pid that made the pool, passed in: a worker still starting (spawning
        # takes seconds) when the server stopped finds itself already reparented and ends here,
        # where reading its parent's pid now would take init for the server and wait forever
        while os.getppid() == server:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="otlp-parent-watch").start()


def _noop() -> None:
    return None


def _settings_for_worker() -> dict[str, Any]:
    s = get_settings()
    return {k: getattr(s, k) for k in _WORKER_SETTINGS}


def _take_settings(values: dict[str, Any]) -> None:
    s = get_settings()
    if all(getattr(s, k) == v for k, v in values.items()):
        return
    for k, v in values.items():
        os.environ[k.upper()] = str(v)
    get_settings.cache_clear()


def _work(db_url: str, settings: dict[str, Any], data: bytes, encoding: str, ctype: str,
          sidecar: dict) -> tuple[int, int, str]:
    """In a worker process: unpack, decode within the limits and the CPU budget, grow the runs.
    Returns (http status, rejected spans, message)."""
    _take_settings(settings)
    s = get_settings()
    budget = _Budget(s.otlp_cpu_seconds)
    if encoding == "gzip":
        try:
            data = _gunzip(data, s.otlp_max_body_bytes)
        except ValueError as exc:
            return 413, 0, f"gzip body: {exc}"
        except zlib.error as exc:
            return 400, 0, f"gzip body does not decompress: {exc}"
    try:
        spans, problems = read_body(data, ctype, limits=input_limits(), max_spans=s.otlp_max_spans_per_request,
                                    budget=budget.check)
    except OtlpTooLarge as exc:
        return 413, 0, str(exc)
    except OtlpFormatError as exc:
        return 400, 0, str(exc)
    del data
    engine = _ENGINES.get(db_url)
    if engine is None:
        from app.core.db import make_engine

        engine = _ENGINES[db_url] = make_engine(db_url)
    try:
        result = _ingest(engine, spans, sidecar, budget.left)
    except OperationalError:
        log.warning("POST /v1/traces: database unavailable", exc_info=True)
        return 503, 0, "database unavailable"
    except Exception:  # noqa: BLE001 - logged here, answered as a 500 by the server
        log.exception("POST /v1/traces: storing the spans failed")
        return 500, 0, "internal error while storing the spans (logged)"
    messages = problems[:5] + result.errors[:5]
    return 200, len(problems) + result.rejected, "; ".join(messages)


def _auth(request: Request) -> tuple[int, str] | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return 401, "authentication required: send 'Authorization: Bearer <token>'"
    with session_scope(request.app.state.engine) as session:
        user = user_for_token(session, token.strip())
        if user is None:
            return 401, "invalid or revoked API token"
        if user.role not in ("admin", "reviewer"):
            return 403, "requires role admin or reviewer"
    return None


def _sidecar(request: Request) -> dict:
    side = load_sidecar(get_settings().capture_sidecar)
    raw = request.headers.get(SIDECAR_HEADER)
    if raw:
        try:
            doc = safejson.loads(unquote(raw))
        except ValueError as exc:
            raise SidecarError(f"{SIDECAR_HEADER} header: not JSON: {exc}") from None
        side = {**side, **check_sidecar(doc, f"{SIDECAR_HEADER} header")}
    return side


def _ingest(engine, spans, sidecar: dict, budget):
    from sqlalchemy.exc import IntegrityError

    from app.capture.service import ingest_spans

    for attempt in range(3):  # another process stored the same spans or run meanwhile: rebuild again
        try:
            with session_scope(engine, write=True) as session:
                return ingest_spans(session, spans, sidecar, budget)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


#: OTLP/HTTP errors are a google.rpc.Status, in the request's encoding (JSON or protobuf)
_STATUS_CONTENT = {
    JSON: {"schema": {"title": "GoogleRpcStatus", "type": "object",
                      "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                                     "details": {"type": "array", "items": {"type": "object"}}}}},
    PROTOBUF: {"schema": {"type": "string", "format": "binary", "description": "google.rpc.Status"}},
}


@router.post("/v1/traces", summary="OTLP/HTTP trace ingestion (protobuf or JSON, optionally gzip)",
             responses={200: {"description": "ExportTraceServiceResponse (partialSuccess when spans were rejected)",
                              "content": {PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
                                          JSON: {"schema": {"type": "object"}}}},
                        **{code: {"description": f"google.rpc.Status: {what}", "content": _STATUS_CONTENT}
                           for code, what in ((400, "the body does not decode"),
                                              (401, "missing or invalid Bearer token"),
                                              (403, "the token's user is not admin or reviewer"),
                                              (413, "body (as sent or unpacked) or span count over "
                                                    "the limits, or the CPU budget spent"),
                                              (415, "not application/x-protobuf or application/json"),
                                              (503, "database unavailable or too many requests "
                                                    "waiting; retry (Retry-After)"))}},
             openapi_extra={"requestBody": {"required": True, "content": {
                 PROTOBUF: {"schema": {"type": "string", "format": "binary",
                                       "description": "ExportTraceServiceRequest"}},
                 JSON: {"schema": {"type": "object", "description": "ExportTraceServiceRequest (OTLP/JSON)"}}}}})
async def otlp_traces(request: Request) -> Response:
    """Spans become growing runs (one per conversation id, else per trace) by the same mapping as
    OTLP trace files; a re-sent batch adds nothing. Sidecar (principals, private state): the
    CAPTURE_SIDECAR file and/or a JSON `a2annotate-sidecar` header."""
    ctype = request.headers.get("content-type", PROTOBUF).split(";")[0].strip().lower() or PROTOBUF
    if ctype not in (PROTOBUF, JSON):
        return _error(PROTOBUF, 415, f"unsupported content type {ctype!r}: send {PROTOBUF} or {JSON}")
    try:
        denied = await run_in_threadpool(_auth, request)
    except OperationalError:
        return _error(ctype, 503, "database unavailable", {"Retry-After": "5"})
    if denied is not None:
        return _error(ctype, denied[0], denied[1], {"WWW-Authenticate": "Bearer"} if denied[0] == 401 else None)
    settings = get_settings()
    limit = settings.otlp_max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _error(ctype, 413, f"body larger than {limit} bytes (OTLP_MAX_BODY_BYTES)")
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip"):
        return _error(ctype, 415, f"unsupported content encoding {encoding!r}: send gzip or none")
    try:
        sidecar = _sidecar(request)
    except SidecarError as exc:
        return _error(ctype, 400, str(exc))
    body = bytearray()
    too_large = False
    try:
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > limit:
                too_large = True
                break
    except HTTPException as exc:  # cut off by the BodyLimit middleware
        if exc.status_code != 413:
            raise
        too_large = True
    if too_large:
        return _error(ctype, 413, f"body larger than {limit} bytes (OTLP_MAX_BODY_BYTES)")
    global _IN_FLIGHT
    if _IN_FLIGHT >= settings.otlp_workers + settings.otlp_max_waiting:
        return _error(ctype, 503, "too many OTLP requests being decoded; retry", {"Retry-After": "2"})
    _IN_FLIGHT += 1
    db_url = request.app.state.engine.url.render_as_string(hide_password=False)
    try:  # unpacking, decoding and storing off the event loop, in a bounded pool of processes
        status, rejected, message = await asyncio.wrap_future(
            _pool().submit(_work, db_url, _settings_for_worker(), bytes(body), encoding, ctype, sidecar))
    except BrokenProcessPool:  # a worker died (e.g. killed for memory): a new pool for the next request
        log.error("POST /v1/traces: a decoding worker died; starting new ones")
        _reset_pool()
        return _error(ctype, 503, "the decoding worker stopped; retry", {"Retry-After": "5"})
    finally:
        _IN_FLIGHT -= 1
        del body
    if status == 503:
        return _error(ctype, 503, message, {"Retry-After": "5"})
    if status != 200:
        return _error(ctype, status, message)
    return _success(ctype, rejected, message)
