"""REST routes of the LLM judges (reviewers and admins only: judge verdicts are labels, which blind
mode withholds from annotators).

* ``POST /api/v1/judges``: register a judge file (its version is its content hash);
* ``GET /api/v1/judges``: judges with their versions;
* ``POST /api/v1/judges/{name}/runs``: launch a judge run: 202 with ``Location`` (the status URL);
  the run is stored as queued and worked on outside the request;
* ``GET /api/v1/judges/{name}/runs`` / ``.../runs/{id}`` / ``POST .../runs/{id}/cancel``;
* ``GET /api/v1/judges/{name}/results``: per-run answers of a version;
* ``GET /api/v1/judges/{name}/score``: calibration against gold / the human majority.

Errors are ``{"detail": "..."}``: 422 for a bad judge file (naming the key), unknown run or batch,
or an estimate above the cost cap; 404 for an unknown judge or judge run; 409 when a judge run of
the same version is still going or has already ended (cancel).
"""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.annotations.http import JsonErrorRoute, api_csrf
from app.api.deps import ReviewerUser, SessionDep
from app.judges import service
from app.judges.schema import JudgeFileError

router = APIRouter(prefix="/api/v1/judges", tags=["judges"], route_class=JsonErrorRoute,
                   dependencies=[Depends(api_csrf)])
NOT_FOUND = {404: {"description": "no such judge (or judge run)"}}


class JudgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str = Field(..., max_length=1_000_000, description="The judge file's YAML text (see docs/judges.md).")


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str | None = Field(None, max_length=64, description="A version (prefix); default the latest.")
    run_ids: list[str] | None = Field(None, max_length=100_000, description="Judge only these runs.")
    batch: str | None = Field(None, max_length=200, description="Judge the runs of this assignment batch.")
    study: str | None = Field(None, max_length=200, description="Only the runs of this study (name or id); its "
                                                                "leads may launch judges in it.")
    limit: int | None = Field(None, ge=1, description="At most this many runs not yet judged by this version.")
    dry_run: bool = Field(False, description="Only estimate calls, tokens and cost; nothing is started.")


def _judge(session, name: str, version: str | None = None):
    try:
        return service.resolve_judge(session, f"{name}@{version}" if version else name)
    except service.JudgeError as exc:
        raise HTTPException(404, str(exc)) from None


@router.post("", summary="Register a judge file", status_code=201,
             responses={422: {"description": "the judge file is invalid; `detail` names the key"}},
             description="Checks the file (schema, templates, taxonomy and modes) and stores it as a version of "
                         "its judge. Answers `{name, version, created, definition}`; registering a known version "
                         "again updates its endpoint address, limits and prices and keeps its results.")
def register_judge(body: JudgeIn, session: SessionDep, user: ReviewerUser) -> dict[str, Any]:
    try:
        jv, created = service.register(session, body.file, "file")
    except JudgeFileError as exc:
        raise HTTPException(422, str(exc)) from None
    session.commit()
    return {**service.version_to_api(jv), "created": created}


@router.get("", summary="Judges and their versions")
def list_judges(session: SessionDep, user: ReviewerUser) -> dict[str, Any]:
    return {"judges": service.list_judges(session)}


@router.post("/{name}/runs", summary="Launch a judge run", status_code=202,
             responses={**NOT_FOUND, 200: {"description": "with `dry_run`: the estimate, nothing started"},
                        409: {"description": "a judge run of this version is still going"},
                        422: {"description": "unknown run or batch, or the estimate exceeds the cost cap"}},
             description="Stores a judge run over the selection (runs already judged by this version at their "
                         "current content are skipped) as `queued` and hands it to a background worker as a `judge` job "
                         "(GET /api/v1/jobs). Answers 202 "
                         "with `Location` (the status URL) and the judge run's status. With `dry_run`: 200 with the "
                         "estimate, nothing started.")
def launch_run(name: str, body: RunIn, request: Request, session: SessionDep, user: ReviewerUser):
    jv = _judge(session, name, body.version)
    scope = None
    if body.study is not None:
        from app.api.deps import study_scope

        _, scope = study_scope(session, user, "judge", body.study)
    try:
        if body.dry_run:
            pending, skipped = service.select_pending(session, jv, run_ids=body.run_ids, batch=body.batch,
                                                      limit=body.limit, scope=scope)
            est = service.estimate(session, jv, [pk for pk, _, _ in pending])
            return JSONResponse({**est, "skipped": skipped, "judge": jv.name, "version": jv.version})
        jr = service.plan(session, jv, run_ids=body.run_ids, batch=body.batch, limit=body.limit, user=user,
                          scope=scope)
    except service.JudgeError as exc:
        session.rollback()
        code = 409 if "still running" in str(exc) or "is queued" in str(exc) else 422
        raise HTTPException(code, str(exc)) from None
    session.commit()
    service.launch(request.app.state.engine, jr.id, user.id)
    url = f"/api/v1/judges/{jv.name}/runs/{jr.id}"
    return JSONResponse({**service.judge_run_status(session, jr), "status_url": url}, status_code=202,
                        headers={"Location": url})


@router.get("/{name}/runs", summary="Judge runs of a judge, newest first", responses=NOT_FOUND)
def list_runs(name: str, session: SessionDep, user: ReviewerUser,
              limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
    _judge(session, name)
    return {"runs": service.judge_runs(session, name, limit)}


@router.get("/{name}/runs/{run_id}", summary="A judge run's status", responses=NOT_FOUND,
            description="`state`: queued | running | done | error | cancelled; `progress: {done, total}`; "
                        "`states`: how many runs are queued, running, delayed, done, error; calls, tokens, "
                        "latency and cost summed over the run's calls.")
def run_status(name: str, run_id: int, session: SessionDep, user: ReviewerUser) -> dict[str, Any]:
    try:
        jr = service.get_judge_run(session, name, run_id)
    except service.JudgeError as exc:
        raise HTTPException(404, str(exc)) from None
    return service.judge_run_status(session, jr)


@router.post("/{name}/runs/{run_id}/cancel", summary="Cancel a judge run",
             responses={**NOT_FOUND, 409: {"description": "the judge run has already ended"}},
             description="Runs already judged are kept; the others stay queued for the next judge run.")
def cancel_run(name: str, run_id: int, session: SessionDep, user: ReviewerUser) -> dict[str, Any]:
    try:
        jr = service.get_judge_run(session, name, run_id)
        service.cancel(session, jr)
    except service.JudgeError as exc:
        raise HTTPException(404 if "has no judge run" in str(exc) else 409, str(exc)) from None
    session.commit()
    return service.judge_run_status(session, jr)


@router.get("/{name}/results", summary="A judge version's answers per run", responses=NOT_FOUND,
            description="Each run's state, merged and validated answer, what validation dropped (`problems`), the "
                        "raw text of an answer that could not be parsed, windows, truncation, tokens, cost.")
def results(name: str, session: SessionDep, user: ReviewerUser,
            version: Annotated[str | None, Query(max_length=64)] = None,
            run_id: Annotated[str | None, Query(max_length=300)] = None,
            state: Annotated[str | None, Query(pattern="^(queued|running|delayed|done|error)$")] = None,
            page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
            page_size: Annotated[int, Query(ge=1, le=500)] = 100) -> dict[str, Any]:
    jv = _judge(session, name, version)
    return service.results(session, jv, run_id=run_id, state=state, page=page, page_size=page_size)


@router.get("/{name}/score", summary="Calibration against gold / the human majority", responses=NOT_FOUND,
            description="Per mode and category precision, recall, F1 (intervals) and Cohen's kappa (bootstrap "
                        "interval); the confusion of mode codes; agent-attribution accuracy; evidence overlap; "
                        "failure-point agent and step accuracy (exact and within ±k); disagreements; kappa per "
                        "version; tokens and cost per correct label.")
def score(name: str, session: SessionDep, user: ReviewerUser,
          version: Annotated[str | None, Query(max_length=64)] = None,
          k: Annotated[int, Query(ge=0, le=1000)] = 1,
          n_boot: Annotated[int, Query(ge=0, le=10_000)] = 1000,
          seed: Annotated[int, Query(ge=0)] = 0) -> dict[str, Any]:
    jv = _judge(session, name, version)
    return service.score(session, f"{jv.name}@{jv.version}" if version else jv.name, n_boot=n_boot, seed=seed, k=k)
