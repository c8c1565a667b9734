"""User and API-token services. Plain functions that take a session."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from app.auth.models import ROLES, ApiToken, User, source_name_for
from app.auth.security import TOKEN_PREFIX, hash_password, hash_token, new_token, verify_password
from app.core.config import get_settings
from app.runs.models import utcnow


class AuthError(ValueError):
    pass


def get_user(session: Session, username: str) -> User | None:
    return session.exec(select(User).where(User.username == username)).first()


#: longest user name (the column holds 200 characters)
MAX_USERNAME = 200


def create_user(session: Session, username: str, role: str, password: str | None = None,
                kind: str = "human") -> User:
    """A new user. `password` here is stored as given (a seam for fixtures and scripts); every
    path that takes a password from a person (CLI, admin pages, demo) sets it with
    `set_password`, which checks the password policy."""
    username = username.strip()
    if not username:
        raise AuthError("username must not be empty")
    if len(username) > MAX_USERNAME:
        raise AuthError(f"username must have at most {MAX_USERNAME} characters, got {len(username)}")
    if any(ord(c) < 32 for c in username):
        raise AuthError("username must not contain control characters")
    if role not in ROLES:
        raise AuthError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if get_user(session, username) is not None:
        raise AuthError(f"user {username!r} already exists")
    if kind == "human" and username.startswith("judge:"):
        raise AuthError("names starting with 'judge:' are reserved for automated judges")
    if kind == "human" and username.startswith("detector:"):
        raise AuthError("names starting with 'detector:' are reserved for detectors")
    user = User(username=username, role=role, kind=kind,
                password_hash=hash_password(password) if password else None)
    session.add(user)
    session.flush()
    return user


def set_password(session: Session, user: User, password: str) -> None:
    """Set `user`'s password; a reset of an existing password ends all of their sessions. Every
    path that sets a password comes here: the policy (length, common and guessable passwords,
    app.auth.password_policy) is checked, AuthError naming the reason."""
    from app.auth.password_policy import password_problem

    problem = password_problem(password, user.username)
    if problem:
        raise AuthError(problem)
    had_password = user.password_hash is not None
    user.password_hash = hash_password(password)
    if had_password and user.id is not None:
        user.session_generation = (user.session_generation or 0) + 1
    session.add(user)


def authenticate(session: Session, username: str, password: str) -> User | None:
    user = get_user(session, username)
    if user is None or not user.is_active or user.kind != "human":
        # Check against a dummy hash: the same time as a real check, so usernames cannot be
        # probed by timing.
        verify_password(None, password)
        return None
    return user if verify_password(user.password_hash, password) else None


def create_token(session: Session, user: User, name: str | None = None, expires_days: int | None = None) -> str:
    """Create an API token for `user`; returns the token text (only time it is visible).

    It expires after `expires_days` days (default TOKEN_EXPIRY_DAYS; 0: never).
    Automated judges (`judge:<source>`) get none: their labels arrive with runs or import-labels."""
    if user.kind != "human":
        raise AuthError(f"{user.username!r} is an automated judge, not a person: it cannot hold API tokens")
    days = get_settings().token_expiry_days if expires_days is None else expires_days
    if isinstance(days, bool) or not isinstance(days, int) or days < 0:
        raise AuthError(f"expiry must be a whole number of days >= 0 (0: never), got {days!r}")
    token = new_token()
    expires = utcnow() + timedelta(days=days) if days else None
    session.add(ApiToken(user_id=user.id, name=name, token_hash=hash_token(token), prefix=token[:8],
                         expires_at=expires))
    session.flush()
    return token


#: `last_used_at` of a token is written at most this often (seconds)
LAST_USED_RESOLUTION = 60


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def token_state(row: ApiToken, now: datetime | None = None) -> str:
    """Returns `active`, `revoked` or `expired`."""
    if row.revoked:
        return "revoked"
    expires = _aware(row.expires_at)
    if expires is not None and expires <= (now or utcnow()):
        return "expired"
    return "active"


def user_for_token(session: Session, token: str) -> User | None:
    """The active user of an active (not revoked, not expired) token, or None.

    The token's `last_used_at` is written at most once a minute, in its own short transaction
    after the request's (`stamp_token_uses`), so a token request does not take the database's
    write lock for its whole duration, and a busy database only skips the stamp."""
    found = session.exec(select(ApiToken, User).join(User, User.id == ApiToken.user_id)
                         .where(ApiToken.token_hash == hash_token(token))).first()  # one query for both
    now = utcnow()
    if found is None or token_state(found[0], now) != "active":
        return None
    row, user = found
    if not user.is_active:
        return None
    last = _aware(row.last_used_at)
    if last is None or (now - last).total_seconds() >= LAST_USED_RESOLUTION:
        session.info.setdefault(TOKEN_STAMPS, []).append((row.id, now))
    return user


#: `session.info` key of the token uses to stamp once the session's transaction has ended
TOKEN_STAMPS = "a2a_token_stamps"


def stamp_token_uses(session: Session) -> None:
    """Write the `last_used_at` stamps that `user_for_token` noted on `session`, each in its own
    short transaction. Call it after the session's transaction ended: a stamp written while a
    read transaction is open would make that transaction's own later write fail on SQLite
    (its snapshot would be stale)."""
    for token_id, now in session.info.pop(TOKEN_STAMPS, []):
        _stamp_last_used(session.get_bind(), token_id, now)


def _stamp_last_used(bind: Any, token_id: int, now: datetime) -> None:
    cutoff = now - timedelta(seconds=LAST_USED_RESOLUTION)
    table = ApiToken.__table__
    engine = getattr(bind, "engine", bind)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA busy_timeout=200")  # a stamp never waits long
                conn.commit()
            try:
                with conn.begin():
                    conn.execute(update(table).where(table.c.id == token_id, or_(
                        table.c.last_used_at.is_(None), table.c.last_used_at < cutoff)).values(last_used_at=now))
            finally:
                if engine.dialect.name == "sqlite":
                    conn.exec_driver_sql(f"PRAGMA busy_timeout={int(get_settings().sqlite_busy_timeout_ms)}")
                    conn.commit()
    except OperationalError:  # database busy: the stamp waits for the next request
        pass


def revoke_token(session: Session, token: ApiToken) -> None:
    """Revoke `token`: it is refused from the next request on."""
    if not token.revoked:
        token.revoked = True
        token.revoked_at = utcnow()
        session.add(token)


def find_tokens(session: Session, ref: str) -> list[ApiToken]:
    """Tokens named by `ref`: the full token text, or its prefix as listed (`a2a_xxxx`)."""
    ref = ref.strip()
    if ref.startswith(TOKEN_PREFIX) and len(ref) > 16:
        return list(session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(ref))).all())
    return list(session.exec(select(ApiToken).where(ApiToken.prefix == ref)).all()) if ref else []


def list_tokens(session: Session, user: User | None = None) -> list[tuple[ApiToken, str]]:
    """Returns [(token, user name)] newest first, of one user or all."""
    q = select(ApiToken, User.username).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id.desc())
    if user is not None:
        q = q.where(ApiToken.user_id == user.id)
    return [(t, name) for t, name in session.exec(q).all()]


def judge_user(session: Session, source: str) -> User:
    """The non-human annotator `judge:<source>`, created on first use."""
    name = source if source.startswith("judge:") else f"judge:{source}"
    user = get_user(session, name)
    if user is None:
        user = User(username=name, role="annotator", kind="judge", source_name=source_name_for(name, "judge"))
        session.add(user)
        session.flush()
    return user
