"""FastAPI dependencies: database session, the current user (Bearer token or session cookie)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlmodel import Session

from app.auth.models import User
from app.auth.service import stamp_token_uses, user_for_token
from app.core.db import session_scope
from app.web.csrf import SAFE_METHODS, check_csrf

#: highest page number the list endpoints accept (keeps the SQL offset within a 64-bit integer)
MAX_PAGE = 1_000_000

bearer = HTTPBearer(auto_error=False, description="API token from `a2annotate tokens create NAME`")


def get_session(request: Request) -> Iterator[Session]:
    """A session per request, committed when the handler returns without error and BEFORE the
    response is sent (the dependency has `scope="function"`), so a client that got 200 reads its
    change back on any connection, and a commit that fails answers an error instead of a 200.

    A route that writes calls `app.core.db.begin_write(session)` first: on SQLite its writing
    transaction then takes the write lock when it begins (BEGIN IMMEDIATE) and waits its turn
    behind an import instead of failing with "database is locked". A value the database cannot hold or compare (a NUL character in a
    text on PostgreSQL, an integer beyond the column's range) answers 422 with the reason instead
    of a server error; a commit refused for a conflict or a busy database answers 503."""
    session = None
    try:
        with session_scope(request.app.state.engine, expire_on_commit=False) as session:
            yield session
    except (DataError, OverflowError) as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, invalid_value_detail(exc)) from None
    except (OperationalError, IntegrityError) as exc:
        text = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            f"not saved: the database refused the change ({text}); try again",
                            headers={"Retry-After": "1"}) from None
    finally:
        if session is not None:
            stamp_token_uses(session)


def invalid_value_detail(exc: BaseException) -> str:
    """Returns the one-line 422 detail for a value the database refused (DataError, OverflowError)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "NUL" in first or "\\x00" in first:
        return "invalid value: a parameter or field contains a NUL character (\\x00), which cannot be stored or searched"
    if isinstance(exc, OverflowError) or "out of range" in first:
        return "invalid value: a number is out of the range the database can store"
    if "too long" in first:
        return f"invalid value: a text is too long ({first})"
    return f"invalid value: {first}"


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def current_api_user(
    request: Request, session: SessionDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> User:
    """The token's user; the web session cookie also works so pages can call the API, in which
    case POST/PUT/PATCH/DELETE must carry the session's `X-CSRF-Token` header."""
    if creds is not None and creds.scheme.lower() == "bearer":
        user = user_for_token(session, creds.credentials)
        if user is not None:
            return user
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid, revoked or expired API token",
                            headers={"WWW-Authenticate": "Bearer"})
    if "session" in request.scope and request.session.get("uid") is not None:
        from app.auth.sessions import session_user

        user = session_user(request, session)
        if user is not None:
            if request.method not in SAFE_METHODS:  # cookie auth: unsafe requests need the CSRF header
                check_csrf(request, request.headers.get("x-csrf-token"))
            return user
    raise HTTPException(status.HTTP_401_UNAUTHORIZED, "authentication required: send 'Authorization: Bearer <token>'",
                        headers={"WWW-Authenticate": "Bearer"})


ApiUser = Annotated[User, Depends(current_api_user)]


def require_role(*roles: str):
    def check(user: ApiUser) -> User:
        if user.role not in roles:
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"requires role {' or '.join(roles)}")
        return user

    return check


ReviewerUser = Annotated[User, Depends(require_role("admin", "reviewer"))]
AdminUser = Annotated[User, Depends(require_role("admin"))]


def require_labels_visible(session: Session, user: User, what: str) -> None:
    """403 unless `user` may see every annotator's labels (reviewers, admins, or after reveal).

    `what` names the aggregate refused, e.g. "agreement" or "reports"."""
    from app.annotations.blind import labels_visible_to

    if not labels_visible_to(session, user):
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"blind mode: {what} aggregate every annotator's labels; open to reviewers and admins, "
                            "and to annotators once an admin reveals labels")


StudyQuery = Annotated[str | None, Query(
    description="A study (name or id): only its runs. 404 for an unknown study, 403 unless you may use it "
                "(an admin, a lead of the study, or for reports, agreement and exports a member).")]


def study_scope(session: Session, user: User, action: str, ref: str | None):
    """(study or None, its run-id subquery or None) after the one permission rule
    (app.studies.access) allowed `user` to do `action` there: 404 unknown study, 403 refused."""
    from app.studies.access import study_for
    from app.studies.service import study_run_ids

    study = study_for(session, user, action, ref)
    return study, study_run_ids(session, study)


def study_cache_key(study) -> tuple | None:
    """The part of a cache key that a study adds (its id and saved selection)."""
    import json

    return None if study is None else (study.id, json.dumps(study.selection or {}, sort_keys=True))
