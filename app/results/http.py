"""How a route answers with a stored result (`app.results.service.get_result`).

* 200: the payload plus ``computed_at`` (ISO time), ``stale`` (true when the data changed since;
  a recompute job is on its way) and ``recompute_job`` (that job's id, else null); header ``Age``
  (seconds since it was computed).
* 202: nothing stored yet and its job did not finish within ``RESULTS_WAIT_SECONDS``:
  ``{detail, job}`` with ``Location: /api/v1/jobs/{id}``; the same GET again serves it once done.
* 422: an unknown query parameter, or the computation failed on these parameters (``detail``
  names the parameter or field).
"""
from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from sqlmodel import Session

from app.auth.models import User
from app.results import service
from app.results.service import Served

#: OpenAPI text shared by the routes that answer with a stored result
DESCRIPTION = (
    " The result is stored in the database by (parameters, data version) and shared by every app process "
    "and worker: the answer carries `computed_at`, `stale` and `recompute_job`, and an `Age` header. When the "
    "data changed since it was computed, the last stored result is served with `stale: true` and a recompute "
    "job (kind `result`) refreshes it; nothing is computed inside the request. With nothing stored yet, small "
    "data (at most `RESULTS_INLINE_ROWS` runs + labels) are computed at once; otherwise the request waits up "
    "to `RESULTS_WAIT_SECONDS` for the job and else answers 202 with `Location` of the job.")

RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"description": "being computed by a job: `{detail, job}`, `Location: /api/v1/jobs/{id}`; ask again"},
}


def _check_query(request: Request) -> None:
    """422 for a query parameter the route does not declare (its OpenAPI lists the ones it takes):
    a misspelt filter is named instead of silently answering, and storing, the unfiltered result."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known: set[str] = set()
    todo = [dependant]
    while todo:  # the route's query parameters and its dependencies'
        d = todo.pop()
        known.update(p.alias for p in d.query_params)
        todo.extend(d.dependencies)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise HTTPException(422, f"{unknown[0]}: unknown query parameter (this route takes {', '.join(sorted(known))})")


def served(request: Request, session: Session, user: User, kind: str, params: dict[str, Any]) -> Served:
    """The stored result of ``kind`` for ``params`` and the request's raw query (part of the key);
    422 for a query parameter the route does not declare."""
    _check_query(request)
    params = service.with_query(params, request.query_params)
    try:
        return service.get_result(session, kind, params, user_id=user.id)
    except service.ResultFailed as exc:
        raise HTTPException(422, str(exc)) from None


def pending_response(result: Served) -> JSONResponse:
    return JSONResponse({"detail": f"being computed by job {result.job_id}; ask again or follow Location",
                         "job": {"id": result.job_id, "location": f"/api/v1/jobs/{result.job_id}"}},
                        status_code=202, headers={"Location": f"/api/v1/jobs/{result.job_id}"})


def respond(request: Request, session: Session, user: User, kind: str, params: dict[str, Any]) -> JSONResponse:
    result = served(request, session, user, kind, params)
    if result.state == "pending":
        return pending_response(result)
    body = {**result.payload, "computed_at": result.computed_at.isoformat() if result.computed_at else None,
            "stale": result.stale, "recompute_job": result.job_id}
    return JSONResponse(body, headers={"Age": str(result.age_seconds() or 0)})
