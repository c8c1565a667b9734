"""REST routes for skip and flag (thin: the work is in app.flags.service)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from app.annotations.http import JsonErrorRoute, api_csrf
from app.api.deps import ApiUser, ReviewerUser, SessionDep
from app.core.db import begin_write
from app.flags import service

router = APIRouter(prefix="/api/v1", tags=["flags"], route_class=JsonErrorRoute, dependencies=[Depends(api_csrf)])


class FlagIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    taxonomy: str | None = Field(default=None, description="`key@version`; default: the version the caller labels the run under")
    kind: Literal["skip", "flag"] = Field(description="`skip`: set the run aside; `flag`: ask a reviewer to look")
    reason: Literal["unclear", "broken_log", "needs_expert", "other"]
    note: str | None = Field(default=None, max_length=service.MAX_NOTE, description="required when reason is `other`")


def _run_and_tax(session, user, run_id: str, ref: str | None):
    from app.runs.service import get_run
    from app.web.pages import choose_taxonomy

    run = get_run(session, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id!r}")
    tax = choose_taxonomy(session, user, run, ref)
    if tax is None:
        raise HTTPException(404, f"no taxonomy {ref!r}" if ref else "no taxonomy is registered")
    return run, tax


@router.post("/flags", summary="Skip or flag a run (the caller's queue moves on)",
             description="Sets the run aside for the caller (`skip`) or asks a reviewer to look at it (`flag`), "
                         "with a reason (`unclear`, `broken_log`, `needs_expert`, `other` + note). Replaces the "
                         "caller's earlier skip/flag of the run. The run leaves `GET /api/v1/queue/next` until the "
                         "caller takes it back (`DELETE`) or a reviewer resolves it. Answers the next run in the "
                         "caller's queue as `next_run_id` (null when none).",
             responses={404: {"description": "no such run or taxonomy"}, 422: {"description": "bad field"}})
def post_flag(body: FlagIn, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    from app.annotations.assignments import next_in_queue

    begin_write(session)  # SQLite: wait for the write lock like saves do (no "database is locked")
    run, tax = _run_and_tax(session, user, body.run_id, body.taxonomy)
    try:
        row = service.set_flag(session, user, run, tax, body.kind, body.reason, body.note)
    except service.FlagError as exc:
        raise HTTPException(422, str(exc)) from None
    out = service.to_dict(row, run.run_id, user.username, tax)
    session.commit()
    nxt = next_in_queue(session, user)
    out["next_run_id"] = nxt["run_id"] if nxt else None
    return out


@router.delete("/flags", summary="Take back the caller's skip or flag of a run",
               responses={404: {"description": "no such run, or the caller has not skipped or flagged it"}})
def delete_flag(session: SessionDep, user: ApiUser, run_id: str,
                taxonomy: Annotated[str | None, Query(description="`key@version`")] = None) -> dict[str, Any]:
    begin_write(session)
    run, tax = _run_and_tax(session, user, run_id, taxonomy)
    if not service.clear_flag(session, user, run, tax):
        raise HTTPException(404, "you have not skipped or flagged this run")
    session.commit()
    return {"run_id": run.run_id, "cleared": True}


@router.get("/flags", summary="Skipped and flagged runs (reviewers and admins)",
            description="Open skips and flags, flags first: `[{id, run_id, annotator, kind, reason, reason_text, "
                        "note, taxonomy, created_at, resolved}]`. `kind=flag` for flags only; "
                        "`include_resolved=true` for the history.")
def get_flags(session: SessionDep, user: ReviewerUser,
              kind: Literal["skip", "flag"] | None = None, include_resolved: bool = False) -> list[dict[str, Any]]:
    kinds = (kind,) if kind else service.KINDS
    return service.list_flags(session, kinds, include_resolved)


@router.post("/flags/{flag_id}/resolve", summary="Resolve a skip or flag: the run returns to the annotator's queue",
             responses={404: {"description": "no such flag"}})
def resolve(flag_id: int, session: SessionDep, user: ReviewerUser) -> dict[str, Any]:
    # takes its turn for SQLite's write lock like label saves (BEGIN IMMEDIATE, busy timeout): while
    # annotators saved, 16 of 30 resolves answered 503 "database is locked"
    begin_write(session)
    row = service.resolve_flag(session, flag_id, user)
    if row is None:
        raise HTTPException(404, f"no flag {flag_id}")
    session.commit()
    return {"id": flag_id, "resolved": True}
