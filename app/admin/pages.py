"""Admin pages: `/admin` (users, reveal labels, end a user's sessions), `/admin/assignments`,
`/admin/progress`, `/admin/tokens` (list and revoke API tokens).

Users, tokens and revealing labels are an admin's; assignments, progress, detectors and live
capture follow the one permission rule (app.studies.access): admins everywhere, a study lead (a
reviewer) within the studies they lead (`?study=`), reviewers see progress. Every form post carries the session's
CSRF token (`verify_form_csrf`); successful changes redirect back (303) with a one-time message.
"""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse

from app.admin import service as admin_service
from app.annotations.assignments import STRATUM_FIELDS, create_assignments
from app.annotations.blind import labels_revealed, set_revealed
from app.annotations.policies import POLICIES
from app.annotations.progress import RUN_STATES, progress
from app.annotations.service import AnnotationError, resolve_taxonomy
from app.api.deps import SessionDep
from app.auth.models import ROLES, ApiToken
from app.auth.service import AuthError, create_user, list_tokens, revoke_token, set_password, token_state
from app.auth.sessions import end_all_sessions
from app.runs.service import RunFilter
from app.studies.access import require, study_for
from app.taxonomies.service import all_versions
from app.web.csrf import verify_form_csrf
from app.web.deps import AdminPage, PageUser, page_study, study_switcher
from app.web.templating import render

router = APIRouter(include_in_schema=False)
CSRF = [Depends(verify_form_csrf)]


def _flash(request: Request, kind: str, text: str) -> None:
    request.session["flash"] = {"kind": kind, "text": text}


def _back(request: Request, kind: str, text: str, url: str = "/admin") -> RedirectResponse:
    _flash(request, kind, text)
    return RedirectResponse(url, status_code=303)


# --------------------------------------------------------------------------- users

@router.get("/admin")
def admin_home(request: Request, session: SessionDep, user: AdminPage):
    humans, judges = admin_service.list_users(session)
    return render(request, "admin/index.html", humans=humans, judges=judges, roles=ROLES,
                  revealed=labels_revealed(session), flash=request.session.pop("flash", None))


@router.post("/admin/users", dependencies=CSRF)
def admin_create_user(request: Request, session: SessionDep, user: AdminPage,
                      username: Annotated[str, Form()], role: Annotated[str, Form()],
                      password: Annotated[str, Form()]):
    try:
        new = create_user(session, username, role)
        set_password(session, new, password)
    except AuthError as exc:
        session.rollback()
        return _back(request, "error", f"Could not create user: {exc}")
    return _back(request, "ok", f"Created {role} {new.username}.")


@router.post("/admin/users/{user_id}/password", dependencies=CSRF)
def admin_reset_password(request: Request, session: SessionDep, user: AdminPage, user_id: int,
                         password: Annotated[str, Form()]):
    try:
        target = admin_service.get_human(session, user_id)
        set_password(session, target, password)
    except AuthError as exc:
        return _back(request, "error", f"Could not reset the password: {exc}")
    return _back(request, "ok", f"Password of {target.username} changed.")


@router.post("/admin/users/{user_id}/active", dependencies=CSRF)
def admin_set_active(request: Request, session: SessionDep, user: AdminPage, user_id: int,
                     active: Annotated[bool, Form()]):
    try:
        target = admin_service.get_human(session, user_id)
        admin_service.set_active(session, user, target, active)
    except AuthError as exc:
        return _back(request, "error", str(exc))
    return _back(request, "ok", f"{target.username} {'reactivated' if active else 'deactivated'}.")


@router.post("/admin/users/{user_id}/role", dependencies=CSRF)
def admin_set_role(request: Request, session: SessionDep, user: AdminPage, user_id: int,
                   role: Annotated[str, Form()]):
    try:
        target = admin_service.get_human(session, user_id)
        admin_service.set_role(session, user, target, role)
    except AuthError as exc:
        return _back(request, "error", str(exc))
    return _back(request, "ok", f"{target.username} is now {role}.")


@router.post("/admin/users/{user_id}/sessions", dependencies=CSRF)
def admin_end_sessions(request: Request, session: SessionDep, user: AdminPage, user_id: int):
    try:
        target = admin_service.get_human(session, user_id)
    except AuthError as exc:
        return _back(request, "error", str(exc))
    end_all_sessions(session, target)
    return _back(request, "ok", f"Every session of {target.username} has ended.")


# --------------------------------------------------------------------------- API tokens

@router.get("/admin/tokens")
def tokens_page(request: Request, session: SessionDep, user: AdminPage):
    rows = [(t, name, token_state(t)) for t, name in list_tokens(session)]
    return render(request, "admin/tokens.html", tokens=rows, flash=request.session.pop("flash", None))


@router.post("/admin/tokens/{token_id}/revoke", dependencies=CSRF)
def tokens_revoke(request: Request, session: SessionDep, user: AdminPage, token_id: int):
    tok = session.get(ApiToken, token_id)
    if tok is None:
        return _back(request, "error", f"no API token with id {token_id}", "/admin/tokens")
    revoke_token(session, tok)
    return _back(request, "ok", f"Token {tok.prefix}… revoked.", "/admin/tokens")


@router.post("/admin/reveal", dependencies=CSRF)
def admin_reveal(request: Request, session: SessionDep, user: AdminPage, revealed: Annotated[bool, Form()]):
    set_revealed(session, revealed)
    return _back(request, "ok", "Labels are now visible to all annotators." if revealed
                 else "Blind mode is on: annotators see only their own labels.")


# --------------------------------------------------------------------------- assignments

def _assignment_page(request: Request, session, status_code: int = 200, study=None, **ctx):
    from app.admin.study import batches
    from app.studies.service import members

    humans, _ = admin_service.list_users(session)
    annotators = [u for u in humans if u.is_active]
    if study is not None:  # a study's queue: its members first, everyone else after
        names = {m["username"] for m in members(session, study)}
        annotators.sort(key=lambda u: (u.username not in names, u.username))
    ctx.setdefault("form", {})
    ctx.setdefault("flash", request.session.pop("flash", None))
    user = request.state.user
    return render(request, "admin/assignments.html", status_code=status_code,
                  annotators=annotators, choices=admin_service.filter_choices(session),
                  taxonomies=all_versions(session), batches=batches(session, study=study), study=study,
                  policies=POLICIES, stratum_fields=STRATUM_FIELDS,
                  switcher=study_switcher(session, user, "assign", study), **ctx)


def _assignment_inputs(session, annotators, k, seed, sample_size, taxonomy, batch, family, scenario, model,
                       status, alignment, study=None):
    """The assignment form's values checked: (taxonomy, RunFilter, sample size); raises AnnotationError."""
    try:
        size = int(sample_size) if sample_size.strip() else None
    except ValueError:
        raise AnnotationError("sample_size", f"{sample_size!r} is not a whole number") from None
    if study is not None and not taxonomy:
        from app.taxonomies.models import Taxonomy

        tax = session.get(Taxonomy, study.taxonomy_pk)
    else:
        tax = resolve_taxonomy(session, taxonomy or None)
    f = RunFilter(family=family or None, scenario=scenario or None, model=model or None,
                  status=status or None, alignment=alignment or None)
    return tax, f, size


def _policy_options(study, user, policy: str, stratify_by: str, allocation: str, against: str, source: str):
    params = {}
    if policy == "stratified":
        params = {"stratify_by": stratify_by.strip(), "allocation": allocation or "proportional"}
    elif policy == "disagreement" and against.strip():
        params = {"against": against.strip()}
    elif policy in ("uncertainty", "flagged") and source.strip():
        params = {"source": source.strip()}
    return {"policy": policy or "random", "params": params, "study": study, "created_by": user}


@router.get("/admin/assignments")
def assignments_page(request: Request, session: SessionDep, user: PageUser, study: str | None = None):
    st, redirect = page_study(request, session, user, "assign", study)
    if redirect is not None:
        return redirect
    return _assignment_page(request, session, study=st)


@router.post("/admin/assignments", dependencies=CSRF)
def assignments_create(
    request: Request, session: SessionDep, user: PageUser,
    annotators: Annotated[list[str], Form()] = [],  # noqa: B006 - FastAPI form default
    k: Annotated[int, Form()] = 2, seed: Annotated[int, Form()] = 0,
    sample_size: Annotated[str, Form()] = "", taxonomy: Annotated[str, Form()] = "",
    batch: Annotated[str, Form()] = "",
    family: Annotated[str, Form()] = "", scenario: Annotated[str, Form()] = "",
    model: Annotated[str, Form()] = "", status: Annotated[str, Form()] = "",
    alignment: Annotated[str, Form()] = "", preview: Annotated[str, Form()] = "",
    study: Annotated[str, Form()] = "", policy: Annotated[str, Form()] = "random",
    stratify_by: Annotated[str, Form()] = "", allocation: Annotated[str, Form()] = "proportional",
    against: Annotated[str, Form()] = "", source: Annotated[str, Form()] = "",
):
    """Assign (or, with `preview`, show what Assign would create without creating anything)."""
    from app.admin.study import default_batch_name, preview_assignments
    from app.annotations.policies import PolicyError

    st = study_for(session, user, "assign", study)
    form = {"annotators": annotators, "k": k, "seed": seed, "sample_size": sample_size, "taxonomy": taxonomy,
            "batch": batch, "family": family, "scenario": scenario, "model": model, "status": status,
            "alignment": alignment, "policy": policy, "stratify_by": stratify_by, "allocation": allocation,
            "against": against, "source": source}
    try:
        tax, f, size = _assignment_inputs(session, annotators, k, seed, sample_size, taxonomy, batch, family,
                                          scenario, model, status, alignment, st)
        options = _policy_options(st, user, policy, stratify_by, allocation, against, source)
        if preview:
            return _assignment_page(request, session, form=form, study=st,
                                    preview=preview_assignments(session, f, size, seed, annotators, k, tax,
                                                                batch.strip() or None, **options))
        # every batch has a name, so that it can be undone
        result = create_assignments(session, f, size, seed, annotators, k, tax,
                                    batch=batch.strip() or default_batch_name(), **options)
    except (AnnotationError, PolicyError) as exc:
        session.rollback()
        return _assignment_page(request, session, 422, form=form, error=str(exc), study=st)
    return _assignment_page(request, session, form=form, result=result, study=st)


@router.post("/admin/assignments/preview", dependencies=CSRF)
def assignments_preview(
    request: Request, session: SessionDep, user: PageUser,
    annotators: Annotated[list[str], Form()] = [],  # noqa: B006 - FastAPI form default
    k: Annotated[int, Form()] = 2, seed: Annotated[int, Form()] = 0,
    sample_size: Annotated[str, Form()] = "", taxonomy: Annotated[str, Form()] = "",
    batch: Annotated[str, Form()] = "",
    family: Annotated[str, Form()] = "", scenario: Annotated[str, Form()] = "",
    model: Annotated[str, Form()] = "", status: Annotated[str, Form()] = "",
    alignment: Annotated[str, Form()] = "",
    study: Annotated[str, Form()] = "", policy: Annotated[str, Form()] = "random",
    stratify_by: Annotated[str, Form()] = "", allocation: Annotated[str, Form()] = "proportional",
    against: Annotated[str, Form()] = "", source: Annotated[str, Form()] = "",
):
    """The live preview of the assignment form (JSON): what Assign would create; nothing is written."""
    from fastapi.responses import JSONResponse

    from app.admin.study import preview_assignments
    from app.annotations.policies import PolicyError

    st = study_for(session, user, "assign", study)
    try:
        tax, f, size = _assignment_inputs(session, annotators, k, seed, sample_size, taxonomy, batch, family,
                                          scenario, model, status, alignment, st)
        options = _policy_options(st, user, policy, stratify_by, allocation, against, source)
        return preview_assignments(session, f, size, seed, annotators, k, tax, batch.strip() or None, **options)
    except (AnnotationError, PolicyError) as exc:
        session.rollback()
        return JSONResponse({"detail": str(exc)}, status_code=422)


@router.post("/admin/assignments/undo", dependencies=CSRF)
def assignments_undo(request: Request, session: SessionDep, user: PageUser,
                     batch: Annotated[str, Form()], taxonomy_pk: Annotated[int, Form()],
                     study: Annotated[str, Form()] = ""):
    """Undo a batch: its assignments nobody has started are removed; started ones stay."""
    from urllib.parse import quote

    from app.admin.study import undo_batch

    st = study_for(session, user, "assign", study)
    removed, kept = undo_batch(session, batch, taxonomy_pk, st)
    text = f"Batch {batch}: {removed} assignment(s) removed"
    text += f"; {kept} kept because the annotator has already started them." if kept else "."
    url = "/admin/assignments" + (f"?study={quote(st.name)}" if st is not None else "")
    return _back(request, "ok" if removed or not kept else "error", text, url)


# --------------------------------------------------------------------------- progress

@router.get("/admin/progress")
def progress_page(request: Request, session: SessionDep, user: PageUser, taxonomy: str | None = None,
                  state: str | None = None, page: int = 1, study: str | None = None, runs: bool = False):
    """Batches and annotators first; the per-run list only behind a filter (a run state, or
    runs=1 for all of them)."""
    st, redirect = page_study(request, session, user, "progress", study)
    if redirect is not None:
        return redirect
    switcher = study_switcher(session, user, "progress", st)
    try:
        if st is not None and not taxonomy:
            from app.taxonomies.models import Taxonomy

            tax = session.get(Taxonomy, st.taxonomy_pk)
        else:
            tax = resolve_taxonomy(session, taxonomy or None)
    except AnnotationError as exc:
        return render(request, "admin/progress.html", status_code=404, error=str(exc), data=None,
                      taxonomies=all_versions(session), states=RUN_STATES, state=None, switcher=switcher)
    state = state if state in RUN_STATES else None
    data = progress(session, tax, max(page, 1), 100, state, st)
    from app.admin.study import batches, runs_per_day, time_on_task

    per_day = runs_per_day(session, tax)
    return render(request, "admin/progress.html", data=data, tax=tax, taxonomies=all_versions(session),
                  states=RUN_STATES, state=state, error=None, batches=batches(session, tax, st),
                  show_runs=bool(runs or state or page > 1),
                  time_on_task=time_on_task(session, tax), per_day=per_day,
                  day_peak=max([d["submitted"] for d in per_day] + [1]), switcher=switcher, study=st)


# --------------------------------------------------------------------------- live capture

@router.get("/admin/capture")
def admin_capture(request: Request, session: SessionDep, user: PageUser):
    """What live capture (POST /v1/traces, `a2annotate record`) has brought in: runs recording and
    final per source, their events, raw records kept, and the latest capture errors."""
    from app.capture.service import capture_summary, finalize_idle
    from app.core.config import get_settings

    require(session, user, "capture")
    finalize_idle(session)
    return render(request, "admin/capture.html", data=capture_summary(session),
                  idle=get_settings().capture_idle_seconds, flash=request.session.pop("flash", None))
