"""`/import`: the web upload page for run logs (admins and reviewers, who may POST /api/v1/imports).

The form posts a multipart upload that takes the REST import's one path (`start_import` in
app.runs.views): the same upload store and limits (MAX_UPLOAD_BYTES, the upload timeouts), the
same profile check, the same `import` job. The page then redirects (303) to the job's page
`/jobs/{id}`, which shows its progress and, once done, the summary. An upload that is refused (too
large, empty, a bad profile) shows the form again with the reason; nothing is kept.

The CSRF token travels in the multipart form (its first field): it is checked once the body has
arrived and before anything is stored or queued (a refused upload's temporary file is removed).
"""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.auth.models import User
from app.core.config import get_settings
from app.ingest.profile import builtin_profile_names
from app.web.csrf import check_csrf
from app.web.deps import ReviewerPage, UploadPageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)
URL = "/import"
#: who may import: the rule of POST /api/v1/imports
ROLES = ("admin", "reviewer")
TRUE = ("true", "1", "on", "yes")


def _form(request: Request, error: str | None = None, status_code: int = 200, **values):
    return render(request, "import.html", status_code=status_code, error=error,
                  profiles=builtin_profile_names(), max_bytes=get_settings().max_upload_bytes,
                  values=values)


@router.get(URL)
def import_page(request: Request, user: ReviewerPage):
    """The upload form: the file, an optional built-in profile or profile YAML, strict, replace."""
    return _form(request)


def _text(fields: dict[str, bytes], name: str) -> str:
    return fields.get(name, b"").decode("utf-8", "replace").strip()


@router.post(URL)
async def import_upload(request: Request, user: UploadPageUser):
    """Stream the upload into an import job and go to its page (303 to /jobs/{id})."""
    from app.runs.views import ImportOptions, start_import

    _allowed(user)
    if request.headers.get("x-csrf-token") is not None:  # a script's post: checked before the body is read
        check_csrf(request, request.headers["x-csrf-token"])
    seen: dict[str, str] = {}

    def options(fields: dict[str, bytes]) -> ImportOptions:
        if request.headers.get("x-csrf-token") is None:
            check_csrf(request, _text(fields, "csrf_token"))
        seen.update(profile_name=_text(fields, "profile_name"), strict=_text(fields, "strict"),
                    replace=_text(fields, "replace"))
        if not fields.get("profile", b"").strip():
            fields.pop("profile", None)  # the profile file input left empty
        return ImportOptions(replace=seen["replace"].lower() in TRUE, strict=seen["strict"].lower() in TRUE,
                             profile=seen["profile_name"] or None)

    try:
        job = await start_import(request, user.id, options)
    except HTTPException as exc:
        if exc.status_code == 403:  # CSRF: the app's own answer (a login page when the session ended)
            raise
        return _form(request, str(exc.detail), exc.status_code, **seen)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


def _allowed(user: User) -> None:
    if user.role not in ROLES:
        raise HTTPException(403, f"this page requires role {' or '.join(ROLES)}")
