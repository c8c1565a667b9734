"""`/admin/detectors`: run the detectors (a `detect` job, shown at `/jobs/{id}`), turn hints on per
assignment batch, see their scores.

Routes stay thin: the work is in `app.detectors.service`. Only admins change things; every form
post carries the session's CSRF token.
"""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.detectors import mode_map
from app.detectors import service as det
from app.web.csrf import verify_form_csrf
from app.web.deps import AdminPage, PageUser, page_study, study_switcher
from app.web.templating import render

router = APIRouter(include_in_schema=False)
CSRF = [Depends(verify_form_csrf)]
URL = "/admin/detectors"
#: bootstrap resamples of the scores' F1 intervals on the page
PAGE_N_BOOT = 200


def _back(request: Request, kind: str, text: str, study: str = "") -> RedirectResponse:
    from urllib.parse import quote

    request.session["flash"] = {"kind": kind, "text": text}
    return RedirectResponse(URL + (f"?study={quote(study)}" if study else ""), status_code=303)


@router.get(URL)
def detectors_page(request: Request, session: SessionDep, user: PageUser, reference: str = "truth",
                   level: str = "run", study: str | None = None):
    """Registered detectors with their modes, the run button, hints per batch, and scores; for an
    admin, or a study lead within their study."""
    st, redirect = page_study(request, session, user, "detect", study)
    if redirect is not None:
        return redirect
    reg = det.registry()
    tax = det.default_taxonomy(session)
    mapping = mode_map(tax.definition) if tax is not None else {}
    rows = [{"name": d.name, "version": d.version, "key": d.key, "origin": d.origin, "description": d.description,
             "mode": mapping.get(d.key) or mapping.get(d.name)} for d in reg.detectors]
    reference = reference if reference in det.REFERENCES else "truth"
    level = level if level in ("run", "agent") else "run"
    scores, scores_state, freshness = None, None, None
    if tax is not None:  # a stored result (app.results): served with its age, recomputed by a job on new data
        from app.results import service as stored_results

        try:
            got = stored_results.get_result(session, "detector_scores", {"reference": reference, "level": level,
                                                                         "n_boot": PAGE_N_BOOT, "seed": 0},
                                            user_id=user.id)
        except stored_results.ResultFailed as exc:
            scores_state = str(exc)
        else:
            if got.state == "pending":
                scores_state = (f"The scores are being computed in the background (job {got.job_id}); "
                                "reload this page in a moment.")
            else:
                scores = got.payload
                freshness = {"computed_at": got.computed_at, "stale": got.stale, "job": got.job_id}
    return render(request, "admin/detectors.html", detectors=rows, problems=reg.problems, scores=scores,
                  scores_state=scores_state, freshness=freshness,
                  batches=det.all_batches(session), reference=reference, level=level,
                  taxonomy=f"{tax.key}@{tax.version}" if tax is not None else None,
                  flash=request.session.pop("flash", None), study=st,
                  switcher=study_switcher(session, user, "detect", st))


@router.post(f"{URL}/run", dependencies=CSRF)
def detectors_run(request: Request, session: SessionDep, user: PageUser,
                  only: Annotated[str, Form()] = "", run_id: Annotated[str, Form()] = "",
                  study: Annotated[str, Form()] = ""):
    """Enqueue a `detect` job for every detector (or `only` one) on every run (or `run_id`), within
    `study` when given, and show the job (`/jobs/{id}`: progress, outcome, cancel). A detector name
    that does not exist is refused here, before any job."""
    from app.jobs import service as jobs
    from app.studies.access import study_for

    st = study_for(session, user, "detect", study)
    names = [only.strip()] if only.strip() else None
    try:
        det.select_detectors(det.registry(), names)
    except det.DetectError as exc:
        return _back(request, "error", str(exc), study)
    job = jobs.submit(session, "detect", {"only": names, "run_ids": [run_id.strip()] if run_id.strip() else None,
                                          "study": None if st is None else st.id}, user.id)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


@router.post(f"{URL}/hints", dependencies=CSRF)
def detectors_hints(request: Request, session: SessionDep, user: AdminPage,
                    batch: Annotated[str, Form()], on: Annotated[str, Form()] = "true"):
    """Turn detector hints on (or off) in the labeling panel for one assignment batch."""
    enabled = on.strip().lower() in ("true", "1", "on", "yes")
    try:
        det.set_hints(session, batch, enabled)
    except det.DetectError as exc:
        session.rollback()
        return _back(request, "error", str(exc))
    session.commit()
    return _back(request, "ok", f"Detector hints {'on' if enabled else 'off'} for batch {batch.strip()}.")
