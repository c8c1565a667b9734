"""Reading an upload (a raw request body or a multipart `file` field) into a temporary file.

The body is streamed to disk as it arrives and its bytes are counted on the way: the upload is
refused (413) the moment MAX_UPLOAD_BYTES is passed (or at once when Content-Length says so),
nothing is held in memory beyond one chunk, and a client that stops sending for
UPLOAD_IDLE_TIMEOUT seconds (or takes longer than UPLOAD_TOTAL_TIMEOUT in all) gets 408. The
upload routes authenticate with `UploadUser`, whose database session is closed before the body is
read, so a slow upload never holds a pooled connection.

Temporary files live in one folder per server process under UPLOAD_DIR; `clean_upload_dirs()`
(run when the app starts) removes the folders of processes that are gone, so an upload cut off by
a crash leaves nothing behind for long.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from app.api.deps import bearer, current_api_user
from app.auth.models import User
from app.core.config import get_settings
from app.core.db import session_scope
from app.core.scratch import clean_upload_dirs, process_dir, upload_root  # noqa: F401 - re-exported

#: bytes gathered before one write to disk (the write runs in a worker thread)
WRITE_BATCH = 1 << 20
#: largest non-file field of a multipart upload
MAX_FIELD_BYTES = 64 * 1024
ZIP_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-zip")


# --------------------------------------------------------------------------- authentication

def upload_api_user(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> User:
    """The caller (as `current_api_user`), looked up in a database session of its own that is
    closed again before the route reads the body."""
    with session_scope(request.app.state.engine) as session:
        user = current_api_user(request, session, creds)
        session.expunge(user)
    return user


UploadUser = Annotated[User, Depends(upload_api_user)]


def _reviewer(user: UploadUser) -> User:
    if user.role not in ("admin", "reviewer"):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "requires role admin or reviewer")
    return user


UploadReviewer = Annotated[User, Depends(_reviewer)]


# --------------------------------------------------------------------------- reading the body

@dataclass
class Upload:
    """An upload on disk: `path` (named so its ending tells the parsers the format), the
    client's `filename` and `content_type`, and its `size` in bytes; `fields`: the other fields
    of a multipart upload (name -> bytes, each at most MAX_FIELD_BYTES; the first of a name).
    `close()` removes it."""

    path: Path
    filename: str
    content_type: str
    size: int
    folder: Path
    fields: dict[str, bytes] = field(default_factory=dict)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def hand_over(self, folder: Path) -> Path:
        """Move the upload into ``folder`` (another owner's, e.g. a job's, which removes it when it
        is done); returns the upload's new path. `close()` then removes nothing."""
        new_path = folder / self.path.name
        shutil.move(str(self.path), new_path)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.path = new_path
        self.folder = folder / ".handed-over"  # close() has nothing left to remove
        return new_path

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Body:
    """The request body as chunks, within the size limit and the timeouts."""

    def __init__(self, request: Request):
        s = get_settings()
        self.limit = s.max_upload_bytes
        self.idle = s.upload_idle_timeout
        self.deadline = time.monotonic() + s.upload_total_timeout
        self.stream = request.stream()
        self.size = 0
        declared = request.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self.limit:
            raise HTTPException(413, f"upload larger than {self.limit} bytes (MAX_UPLOAD_BYTES)")

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        wait = min(self.idle, self.deadline - time.monotonic())
        if wait <= 0:
            raise HTTPException(408, "upload too slow: the body did not arrive within UPLOAD_TOTAL_TIMEOUT seconds")
        try:
            chunk = await asyncio.wait_for(self.stream.__anext__(), wait)
        except TimeoutError:
            raise HTTPException(408, "upload stalled: no data for UPLOAD_IDLE_TIMEOUT seconds") from None
        except ClientDisconnect:  # nobody is left to answer; not a server error
            raise HTTPException(400, "the client disconnected before the upload was complete") from None
        self.size += len(chunk)
        if self.size > self.limit:
            raise HTTPException(413, f"upload larger than {self.limit} bytes (MAX_UPLOAD_BYTES)")
        return chunk


class _Writer:
    """Buffers chunks and writes them to `path` in a worker thread, a batch at a time."""

    def __init__(self, path: Path):
        self.f = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.pending: list[bytes] = []
        self.n = 0
        self.size = 0

    def add(self, data: bytes) -> None:
        if data:
            self.pending.append(data)
            self.n += len(data)
            self.size += len(data)

    async def flush(self, force: bool = False) -> None:
        if self.pending and (force or self.n >= WRITE_BATCH):
            data, self.pending, self.n = b"".join(self.pending), [], 0
            await run_in_threadpool(self.f.write, data)

    async def close(self) -> None:
        await self.flush(force=True)
        self.f.close()


def _suffix(name: str, ctype: str, head: bytes) -> str:
    if head[:4] == b"PK\x03\x04" or ctype in ZIP_TYPES:
        return ".zip"
    if ctype in ("application/x-ndjson", "application/jsonl", "application/jsonlines"):
        return ".jsonl"
    suffix = Path(name).suffix
    return suffix if suffix.isascii() and len(suffix) <= 16 else ""


async def receive_upload(request: Request, body_filename: Callable[[str], str], empty_hint: str) -> Upload:
    """Stream a raw body, or the multipart field `file`, to a temporary file; returns the Upload
    (the caller closes it). `body_filename(content_type)` names a raw body. 413 above
    MAX_UPLOAD_BYTES, 408 for a stalled upload, 422 for a missing field or an empty body."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = _Body(request)
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=process_dir()))
    target = folder / "body"
    writer = _Writer(target)
    fields: dict[str, bytes] = {}
    try:
        if ctype == "multipart/form-data":
            filename, part_type = await _read_multipart(request, body, writer, fields)
        else:
            filename, part_type = body_filename(ctype), ctype
            async for chunk in body:
                writer.add(chunk)
                await writer.flush()
        await writer.close()
        with open(target, "rb") as f:
            head = f.read(4096)
        if not head.strip() and (writer.size <= 4096 or not await run_in_threadpool(_has_content, target)):
            raise HTTPException(422, empty_hint)
        suffix = _suffix(filename, part_type, head)
        if suffix == ".zip" and ctype != "multipart/form-data" and not filename.lower().endswith(".zip"):
            # a raw zip body: named as one (`request-body.zip/runs/a.jsonl:3`), not `request-body.json`
            filename = Path(filename).stem + ".zip"
        final = folder / ("upload" + suffix)
        target.rename(final)
        return Upload(final, filename, part_type, writer.size, folder, fields)
    except BaseException:
        writer.f.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _has_content(path: Path) -> bool:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if chunk.strip():
                return True
    return False


async def _read_multipart(request: Request, body: _Body, writer: _Writer,
                          fields: dict[str, bytes] | None = None) -> tuple[str, str]:
    """The field `file` goes to `writer`; the other fields (at most MAX_FIELD_BYTES each) into
    `fields` (the first of each name). Returns the file's (filename, content type)."""
    _, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if not boundary:
        raise HTTPException(422, "file: multipart upload without a boundary")
    state = {"headers": [], "hname": b"", "hvalue": b"", "is_file": False, "field": None, "fsize": 0,
             "seen": False, "filename": "upload", "ctype": "", "value": []}
    if fields is None:
        fields = {}

    def on_part_begin():
        state.update(headers=[], is_file=False, field=None, fsize=0, value=[])

    def on_header_field(data, start, end):
        state["hname"] += data[start:end]

    def on_header_value(data, start, end):
        state["hvalue"] += data[start:end]

    def on_header_end():
        state["headers"].append((state["hname"].lower(), state["hvalue"]))
        state["hname"] = state["hvalue"] = b""

    def on_headers_finished():
        headers = dict(state["headers"])
        _, opts = parse_options_header(headers.get(b"content-disposition", b""))
        name = opts.get(b"name", b"").decode("utf-8", "replace")
        if name == "file" and not state["seen"]:
            state["is_file"] = True
            state["seen"] = True
            state["filename"] = opts.get(b"filename", b"upload").decode("utf-8", "replace") or "upload"
            state["ctype"] = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        elif name and name != "file" and name not in fields:
            state["field"] = name

    def on_part_data(data, start, end):
        if state["is_file"]:
            writer.add(bytes(data[start:end]))
        else:
            state["fsize"] += end - start
            if state["fsize"] > MAX_FIELD_BYTES:
                raise HTTPException(413, f"a multipart field other than 'file' is larger than {MAX_FIELD_BYTES} bytes")
            if state["field"] is not None:
                state["value"].append(bytes(data[start:end]))

    def on_part_end():
        if state["field"] is not None:
            fields[state["field"]] = b"".join(state["value"])

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field, "on_header_value": on_header_value,
        "on_header_end": on_header_end, "on_headers_finished": on_headers_finished, "on_part_data": on_part_data,
        "on_part_end": on_part_end})
    try:
        async for chunk in body:
            parser.write(chunk)
            await writer.flush()
        parser.finalize()
    except HTTPException:
        raise
    except Exception as exc:  # python-multipart's parse errors
        raise HTTPException(422, f"file: not a valid multipart upload ({type(exc).__name__})") from None
    if not state["seen"]:
        raise HTTPException(422, "file: multipart upload needs a field named 'file'")
    return state["filename"], state["ctype"]


def upload_request_body(raw: dict[str, str], description: str, fields: dict[str, str] | None = None) -> dict:
    """Returns the OpenAPI `requestBody` of an upload route (the route reads the raw request, so
    FastAPI cannot infer it): each raw content type in `raw` (type -> description) plus a multipart
    form with the field `file` and the optional text `fields` (name -> description)."""
    # raw bytes of a file (`format: binary`): any bytes are a valid body, whatever is wrong inside is
    # reported in the answer (`errors`), so no body is "schema-violating" yet accepted
    content: dict[str, dict] = {ct: {"schema": {"type": "string", "format": "binary", "description": d}}
                                for ct, d in raw.items()}
    content["multipart/form-data"] = {"schema": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary", "description": "the file to import"},
                       **{name: {"type": "string", "description": d} for name, d in (fields or {}).items()}}}}
    return {"required": True, "description": description, "content": content}
