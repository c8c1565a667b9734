"""The error responses of the OpenAPI document, made to match what the API sends.

Every JSON error is ``{"detail": "<one line>"}`` (the routes' `JsonErrorRoute` turns request
validation errors into one string naming the fields too; an unexpected error adds
``request_id``). FastAPI's generated document instead says 422 is a list of error objects and
leaves 401 and other error bodies undescribed; `install_error_schemas(app)` rewrites it:

* 422 on routes of `JsonErrorRoute` is `ErrorDetail` (a string `detail`); on any other route it is
  either that or FastAPI's `HTTPValidationError` (an `HTTPException(422, "...")` sends a string);
* 401 (`ErrorDetail`, with `WWW-Authenticate`) on every operation that takes the API token;
* 500 (`ErrorDetail` with `request_id`) on every operation;
* every other documented error status without a body schema gets `ErrorDetail`.
"""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI

ERROR_DETAIL = {
    "title": "ErrorDetail", "type": "object", "required": ["detail"],
    "properties": {"detail": {"type": "string", "description": "what went wrong, naming the field or parameter"},
                   "request_id": {"type": "string", "description": "on 500: the id logged with the error"}},
}
_REF = {"$ref": "#/components/schemas/ErrorDetail"}


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def install_error_schemas(app: FastAPI) -> None:
    """Replace `app.openapi` with one whose error responses match what is sent (see above)."""
    from app.annotations.http import JsonErrorRoute

    string_422 = {(r.path_format, m.lower()) for r in app.routes if isinstance(r, JsonErrorRoute)
                  for m in (r.methods or ())}

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema and app.openapi_schema.get("x-error-schemas"):
            return app.openapi_schema
        spec = generate()
        spec["x-error-schemas"] = True
        spec.setdefault("components", {}).setdefault("schemas", {})["ErrorDetail"] = ERROR_DETAIL
        for path, ops in spec.get("paths", {}).items():
            for method, op in ops.items():
                if not isinstance(op, dict) or "responses" not in op:
                    continue
                responses = op["responses"]
                if "422" in responses:
                    schema = _REF if (path, method) in string_422 else \
                        {"anyOf": [_REF, {"$ref": "#/components/schemas/HTTPValidationError"}]}
                    responses["422"]["content"] = _json(schema)
                if op.get("security"):
                    responses.setdefault("401", {"description": "missing, invalid or revoked API token"})
                    responses["401"].setdefault("headers", {"WWW-Authenticate": {"schema": {"type": "string"}}})
                responses.setdefault("500", {"description": "unexpected error; logged with `request_id`"})
                for code, resp in responses.items():
                    if code[:1] in "45" and "content" not in resp:
                        resp["content"] = _json(_REF)
        app.openapi_schema = spec
        return spec

    app.openapi = openapi
