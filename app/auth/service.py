"""User and API-token services. Plain functions that take a session."""
from __future__ import annotations

from sqlmodel import Session, select

from app.auth.models import ROLES, ApiToken, User
from app.auth.security import hash_password, hash_token, new_token, verify_password
from app.runs.models import utcnow


class AuthError(ValueError):
    pass


def get_user(session: Session, username: str) -> User | None:
    return session.exec(select(User).where(User.username == username)).first()


#: longest user name (the column holds 200 characters)
MAX_USERNAME = 200


def create_user(session: Session, username: str, role: str, password: str | None = None,
                kind: str = "human") -> User:
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
    if len(password) < 8:
        raise AuthError("password must have at least 8 characters")
    user.password_hash = hash_password(password)
    session.add(user)


def authenticate(session: Session, username: str, password: str) -> User | None:
    user = get_user(session, username)
    if user is None or not user.is_active or user.kind != "human":
        # Spend the same time as a real check so usernames cannot be probed by timing.
        verify_password(None, password)
        return None
    return user if verify_password(user.password_hash, password) else None


def create_token(session: Session, user: User, name: str | None = None) -> str:
    """Create an API token for `user`; returns the token text (only time it is visible).

    Automated judges (`judge:<source>`) get none: their labels arrive with runs or import-labels."""
    if user.kind != "human":
        raise AuthError(f"{user.username!r} is an automated judge, not a person: it cannot hold API tokens")
    token = new_token()
    session.add(ApiToken(user_id=user.id, name=name, token_hash=hash_token(token), prefix=token[:8]))
    session.flush()
    return token


def user_for_token(session: Session, token: str) -> User | None:
    row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).first()
    if row is None or row.revoked:
        return None
    user = session.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    row.last_used_at = utcnow()
    session.add(row)
    return user


def judge_user(session: Session, source: str) -> User:
    """The non-human annotator `judge:<source>`, created on first use."""
    name = source if source.startswith("judge:") else f"judge:{source}"
    user = get_user(session, name)
    if user is None:
        user = User(username=name, role="annotator", kind="judge")
        session.add(user)
        session.flush()
    return user
