"""The one permission rule, used by the pages (app.web.deps) and the API (app.api.deps).

`allowed(session, user, action, study)`:
- an admin may do everything;
- users, tokens and revealing labels (`ADMIN_ONLY`) are an admin's only;
- in a study: its leads (reviewers or admins who are `lead` members) may do every study action
  (`LEAD_ACTIONS`: make and undo batches and rules, watch progress, adjudicate, run detectors
  and judges, export, see reports and agreement); its other members may see its reports,
  agreement and exports (`MEMBER_ACTIONS`, blind mode still applies); nobody else may use it;
- without a study: what each role could do before studies (`GLOBAL`): reviewers see progress,
  reports, agreement, flags, detector scores, adjudicate and export; any user exports (blind
  mode filtering applies); managing queues and running detectors over every run stays an
  admin's, and the live-capture overview opens to reviewers who lead a study.
"""
from __future__ import annotations

from fastapi import HTTPException, status
from sqlmodel import Session

from app.auth.models import User
from app.studies.models import Study

ADMIN_ONLY = frozenset({"users", "tokens", "reveal"})
LEAD_ACTIONS = frozenset({"assign", "progress", "adjudicate", "detect", "judge", "export", "reports", "agreement",
                          "flags", "capture", "detector_scores", "estimates"})
MEMBER_ACTIONS = frozenset({"reports", "agreement", "export", "estimates"})
ACTIONS = ADMIN_ONLY | LEAD_ACTIONS
#: without a study: the roles that may do each action (as before studies)
GLOBAL: dict[str, frozenset[str]] = {
    "assign": frozenset({"admin"}),
    "detect": frozenset({"admin"}),
    "judge": frozenset({"admin"}),
    "capture": frozenset({"admin"}),
    "progress": frozenset({"admin", "reviewer"}),
    "adjudicate": frozenset({"admin", "reviewer"}),
    "flags": frozenset({"admin", "reviewer"}),
    "detector_scores": frozenset({"admin", "reviewer"}),
    "reports": frozenset({"admin", "reviewer", "annotator"}),
    "agreement": frozenset({"admin", "reviewer", "annotator"}),
    "estimates": frozenset({"admin", "reviewer", "annotator"}),
    "export": frozenset({"admin", "reviewer", "annotator"}),
}


def allowed(session: Session, user: User, action: str, study: Study | None = None) -> bool:
    """Whether `user` may do `action` (in `study`, or over every run when None)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if user is None or not user.is_active or user.kind != "human":
        return False
    if user.role == "admin":
        return True
    if action in ADMIN_ONLY:
        return False
    from app.studies.service import led_study_ids, member_role

    if study is not None:
        role = member_role(session, user, study)
        if role == "lead" and user.role == "reviewer":
            return action in LEAD_ACTIONS
        return role is not None and action in MEMBER_ACTIONS
    if user.role in GLOBAL.get(action, frozenset()):
        return True
    return action == "capture" and user.role == "reviewer" and bool(led_study_ids(session, user))


def leads_any(session: Session, user: User) -> bool:
    """Whether `user` is a reviewer leading at least one study (or an admin)."""
    from app.studies.service import led_study_ids

    return user.role == "admin" or (user.role == "reviewer" and bool(led_study_ids(session, user)))


def require(session: Session, user: User, action: str, study: Study | None = None) -> None:
    """403 unless `allowed(...)`; the detail says what is needed."""
    if allowed(session, user, action, study):
        return
    if action in ADMIN_ONLY:
        detail = "requires role admin"
    elif study is not None:
        detail = f"{action} in study {study.name!r} requires an admin or a lead of that study"
    else:
        roles = sorted(GLOBAL.get(action, {"admin"}))
        detail = f"requires role {' or '.join(roles)}" + (
            " (or pick a study you lead)" if action in LEAD_ACTIONS else "")
    raise HTTPException(status.HTTP_403_FORBIDDEN, detail)


def study_for(session: Session, user: User, action: str, ref: str | None) -> Study | None:
    """The study `ref` names (None for none) after checking `user` may do `action` in it:
    404 for an unknown study, 403 when not allowed (also without a study)."""
    from app.studies.service import StudyNotFound, optional_study

    try:
        study = optional_study(session, ref)
    except StudyNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    require(session, user, action, study)
    return study
