"""Password hashing (argon2) and API token generation/hashing. Pure functions."""
from __future__ import annotations

import hashlib
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
TOKEN_PREFIX = "a2a_"


def hash_password(password: str) -> str:
    return _hasher.hash(password)


_dummy_hash: str | None = None


def dummy_hash() -> str:
    """A hash of a random password with the default parameters, made once: checking a password
    against it costs what checking a real user's does (so unknown users cannot be told apart by
    the time the answer takes)."""
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = _hasher.hash(secrets.token_urlsafe(16))
    return _dummy_hash


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches `password_hash`. No hash (unknown user, or one without a
    password) is checked against `dummy_hash()` and is always False, in the same time."""
    try:
        if not password_hash:
            _hasher.verify(dummy_hash(), password)
            return False
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def new_token() -> str:
    """A fresh API token: shown to the user once, stored only as its sha256."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
