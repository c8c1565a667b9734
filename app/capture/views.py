"""POST /v1/traces: OTLP/HTTP trace ingestion (what OpenTelemetry exporters send to a collector).

Request: ``Content-Type: application/x-protobuf`` (the exporters' default) or ``application/json``,
optionally ``Content-Encoding: gzip``; ``Authorization: Bearer <token>`` of an admin or reviewer.
Answer, as OTLP/HTTP specifies, in the request's encoding: 200 with an ``ExportTraceServiceResponse``
(``partialSuccess.rejectedSpans`` and ``errorMessage`` when some spans could not be used); 400 with a
``google.rpc.Status`` for a body that does not decode; 401/403 for auth; 413 too large; 415 for
another content type; 503 (retryable, ``Retry-After``) when the database is unavailable. The spans
go through app.ingest.readers.otlp (the same mapping as trace files) into growing runs (app.capture.service).
"""
from __future__ import annotations

import json
import logging
import zlib
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from app.auth.service import user_for_token
from app.core.config import get_settings
from app.core.db import session_scope
from app.ingest.readers.otlp import OtlpFormatError, read_body
from app.ingest.safety import safejson
from app.ingest.sidecar import SidecarError, check_sidecar, load_sidecar

log = logging.getLogger(__name__)
router = APIRouter(tags=["live capture"])
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
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise ValueError(f"the body unpacks to more than {limit} bytes")
    return out


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


def _ingest(request: Request, spans, sidecar: dict):
    from sqlalchemy.exc import IntegrityError

    from app.capture.service import ingest_spans

    for attempt in range(3):  # another process stored the same spans or run meanwhile: rebuild again
        try:
            with session_scope(request.app.state.engine) as session:
                return ingest_spans(session, spans, sidecar)
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
                                              (413, "body too large"),
                                              (415, "not application/x-protobuf or application/json"),
                                              (503, "database unavailable; retry (Retry-After)"))}},
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
    limit = get_settings().max_upload_bytes
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            return _error(ctype, 413, f"body larger than {limit} bytes")
    data = bytes(body)
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding == "gzip":
        try:
            data = _gunzip(data, limit)
        except ValueError as exc:
            return _error(ctype, 413 if "more than" in str(exc) else 400, f"gzip body: {exc}")
        except zlib.error as exc:
            return _error(ctype, 400, f"gzip body does not decompress: {exc}")
    elif encoding not in ("", "identity"):
        return _error(ctype, 415, f"unsupported content encoding {encoding!r}: send gzip or none")
    try:
        sidecar = _sidecar(request)
        spans, problems = read_body(data, ctype)
    except (OtlpFormatError, SidecarError) as exc:
        return _error(ctype, 400, str(exc))
    try:
        result = await run_in_threadpool(_ingest, request, spans, sidecar)
    except OperationalError:
        log.warning("POST /v1/traces: database unavailable", exc_info=True)
        return _error(ctype, 503, "database unavailable", {"Retry-After": "5"})
    rejected_runs = [rid for rid, out in result.runs.items() if out in ("rejected", "conflict")]
    rejected = len(problems)
    messages = problems[:5] + result.errors[:5]
    return _success(ctype, rejected + _spans_in(spans, rejected_runs), "; ".join(messages))


def _spans_in(spans, run_ids: list[str]) -> int:
    if not run_ids:
        return 0
    from app.ingest.readers.otlp import group_runs

    groups = group_runs(spans)
    return sum(len(groups.get(r, [])) for r in run_ids)
