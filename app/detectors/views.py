"""REST routes of the detectors.

* ``GET /api/v1/detectors``: the registered detectors and the mode each maps to (any user);
* ``POST /api/v1/detectors/run``: run them on stored runs (admins), answers the summary;
* ``GET /api/v1/detectors/scores``: precision, recall and F1 per mode with intervals against the
  demo's seeded truth (admins) or the gold labels (reviewers and admins); a stored result
  (`app.results`: served with its age, recomputed by a `result` job when the data change).

Errors are ``{"detail": "..."}``: 422 for an unknown detector, run or parameter.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.annotations.http import JsonErrorRoute, api_csrf
from app.api.deps import ApiUser, ReviewerUser, SessionDep
from app.detectors import mode_map
from app.detectors import service as det
from app.results.http import DESCRIPTION as RESULT_DESCRIPTION
from app.results.http import RESPONSES as RESULT_RESPONSES

router = APIRouter(prefix="/api/v1/detectors", tags=["detectors"], route_class=JsonErrorRoute,
                   dependencies=[Depends(api_csrf)])
ERRORS = {422: {"description": "unknown detector, run or parameter; `detail` names it"}}
SCORE_ERRORS = {**ERRORS, 403: {"description": "below reviewer; or `reference=truth` and not an admin"}}


@router.get("", summary="Registered detectors",
            description="Built-in detectors, `a2annotate.detectors` entry points and the DETECTORS setting, each "
                        "with its version, key, origin and the mode the default taxonomy maps it to (null: "
                        "none, it writes no labels). `problems`: user detectors that could not be loaded.")
def list_detectors(session: SessionDep, user: ApiUser) -> dict[str, Any]:
    reg = det.registry()
    tax = det.default_taxonomy(session)
    mapping = mode_map(tax.definition) if tax is not None else {}
    return {"detectors": [{"name": d.name, "version": d.version, "key": d.key, "origin": d.origin,
                           "description": d.description, "mode": mapping.get(d.key) or mapping.get(d.name)}
                          for d in reg.detectors], "problems": reg.problems}


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    only: list[str] | None = Field(None, description="Detector names; default all.")
    run_ids: list[str] | None = Field(None, description="Run ids; default every stored run.")
    study: str | None = Field(None, description="Only this study's runs (name or id); open to its leads.")


@router.post("/run", summary="Run the detectors (a background job)",
             responses={**ERRORS, 202: {"description": "the detect job is queued or running: `{job}`, "
                                                       "`Location: /api/v1/jobs/{id}`; its `result` is the summary"}},
             description="Stores each detector's labels as annotator `detector:<name>`, replacing its previous "
                         "labels on those runs (other annotations untouched). A detector that fails on a run is "
                         "listed in `errors` and the others go on. Runs as a background job (kind `detect`, with "
                         "progress in runs): the answer is the summary when the job ends within "
                         "DETECT_WAIT_SECONDS (header `Content-Location` names the job); otherwise, or with "
                         "`Prefer: respond-async`, 202 with `Location` of the job. A job that fails within the "
                         "wait (unknown detector or run) answers 422.")
def run_detectors(body: RunIn, request: Request, session: SessionDep, user: ApiUser) -> Any:
    from app.api.deps import study_scope
    from app.core.config import get_settings
    from app.jobs import service as jobs

    st, _ = study_scope(session, user, "detect", body.study)

    try:  # names and runs checked here, so a typo is a 422 at once, not a failed job
        det.select_detectors(det.registry(), body.only)
    except det.DetectError as exc:
        raise HTTPException(422, str(exc)) from None
    job = jobs.submit(session, "detect", {"only": body.only, "run_ids": body.run_ids,
                                          "study": None if st is None else st.id}, user.id)
    respond_async = "respond-async" in request.headers.get("prefer", "").lower()
    engine = session.get_bind()
    job = jobs.wait_for(engine, job.id, 0.0 if respond_async else get_settings().detect_wait_seconds)
    location = f"/api/v1/jobs/{job.id}"
    if not respond_async and job.state == "done":
        return JSONResponse(job.result, headers={"Content-Location": location})
    if not respond_async and job.state in ("failed", "cancelled"):
        detail = (job.error or job.state).removeprefix("DetectError: ")
        return JSONResponse({"detail": detail, "job": location}, status_code=422, headers={"Location": location})
    return JSONResponse({"job": jobs.payload(job)}, status_code=202, headers={"Location": location})


@router.get("/scores", summary="Detector scores against truth or gold",
            responses={**SCORE_ERRORS, **RESULT_RESPONSES},
            description="Per detector (then the other judges and the human labels made with hints on / off) and "
                        "mode: tp, fp, fn, precision and recall with Wilson intervals, F1 with a bootstrap "
                        "interval over runs; against the demo's seeded truth (admins only, like the truth "
                        "itself) or the adjudicated gold labels; `human_agreement`: agreement among the human "
                        "annotators with hints on vs off." + RESULT_DESCRIPTION)
def detector_scores(
    request: Request, session: SessionDep, user: ReviewerUser,
    reference: Annotated[Literal["truth", "gold"], Query(description="Seeded demo truth or gold labels.")] = "truth",
    level: Annotated[Literal["run", "agent"], Query(description="Count (run, mode) or (run, mode, agent).")] = "run",
    n_boot: Annotated[int, Query(ge=0, le=10_000, description="Bootstrap resamples for the F1 interval.")] = 1000,
    seed: Annotated[int, Query(ge=0, description="Seed of the bootstrap.")] = 0,
) -> Any:
    if reference == "truth" and user.role != "admin":
        raise HTTPException(403, "scores against the demo's seeded truth are for admins (the truth is withheld "
                                 "from everyone else); use reference=gold")
    from app.results.http import respond

    return respond(request, session, user, "detector_scores",
                   {"reference": reference, "level": level, "n_boot": n_boot, "seed": seed})
