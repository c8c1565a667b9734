"""`/admin/detectors`: run the detectors, turn hints on per assignment batch, see their scores.

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
    scores = det.score_report(session, reference=reference, level=level, n_boot=200) if tax is not None else None
    return render(request, "admin/detectors.html", detectors=rows, problems=reg.problems, scores=scores,
                  batches=det.all_batches(session), reference=reference, level=level,
                  taxonomy=f"{tax.key}@{tax.version}" if tax is not None else None,
                  flash=request.session.pop("flash", None), study=st,
                  switcher=study_switcher(session, user, "detect", st))


@router.post(f"{URL}/run", dependencies=CSRF)
def detectors_run(request: Request, session: SessionDep, user: PageUser,
                  only: Annotated[str, Form()] = "", run_id: Annotated[str, Form()] = "",
                  study: Annotated[str, Form()] = ""):
    """Run every detector (or `only` one) on every run (or `run_id`), within `study` when given."""
    from app.studies.access import study_for
    from app.studies.service import study_run_ids

    st = study_for(session, user, "detect", study)
    try:
        summary = det.detect_all(session, only=[only] if only.strip() else None,
                                 run_ids=[run_id.strip()] if run_id.strip() else None,
                                 scope=study_run_ids(session, st))
    except det.DetectError as exc:
        session.rollback()
        return _back(request, "error", str(exc), study)
    text = summary.line()
    if summary.errors:
        first = summary.errors[0]
        text += f" (first: run {first['run_id']}, detector {first['detector']}: {first['error']})"
        return _back(request, "error", text, study)
    return _back(request, "ok", text, study)


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
