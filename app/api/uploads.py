"""Reading an upload from a request body or a multipart `file` field, with the size limit."""
from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException, Request, UploadFile

from app.core.config import get_settings


async def read_upload(request: Request, body_filename: Callable[[str], str], empty_hint: str) -> tuple[bytes, str, str]:
    """Return (data, filename, content_type) of a raw body or of a multipart field `file`.

    `body_filename(content_type)` names a raw body (the name tells the parsers its format).
    413 above MAX_UPLOAD_BYTES; 422 for a missing field or an empty body.
    """
    limit = get_settings().max_upload_bytes
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        form = await request.form()
        upload = form.get("file")
        if not isinstance(upload, UploadFile) and not hasattr(upload, "read"):
            raise HTTPException(422, "file: multipart upload needs a field named 'file'")
        data = await upload.read()
        filename = upload.filename or "upload"
        ctype = upload.content_type or ""
    else:
        data = await request.body()
        filename = body_filename(ctype)
    if len(data) > limit:
        raise HTTPException(413, f"upload larger than {limit} bytes")
    if not data.strip():
        raise HTTPException(422, empty_hint)
    return data, filename, ctype


def upload_request_body(raw: dict[str, str], description: str) -> dict:
    """Returns the OpenAPI `requestBody` of an upload route (the route reads the raw request, so
    FastAPI cannot infer it): each raw content type in `raw` (type -> description) plus a multipart
    form with the field `file`."""
    content: dict[str, dict] = {ct: {"schema": {"type": "string", "description": d}} for ct, d in raw.items()}
    content["multipart/form-data"] = {"schema": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary", "description": "the file to import"}}}}
    return {"required": True, "description": description, "content": content}
