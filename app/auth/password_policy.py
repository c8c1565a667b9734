"""The password policy, checked wherever a password is set (`a2annotate users create` and
`users set-password`, the admin pages' new user and password reset, the demo's accounts): all go
through `app.auth.service.set_password`, which raises AuthError with `password_problem`'s reason.

A password is refused when it is

* shorter than PASSWORD_MIN_LENGTH (8 by default, NIST SP 800-63B's minimum) or longer than
  `MAX_LENGTH` (hashing is bounded),
* one of the 30,000 most common passwords of breached password lists, as shipped by the
  maintained `zxcvbn` package (its `passwords` frequency list, from the Xato corpus of
  10 million leaked passwords; compared case-insensitively),
* or guessable by zxcvbn's estimate (score below PASSWORD_MIN_SCORE, 2 by default: keyboard
  walks, repeats, dates, dictionary words with l33t substitutions, the user's own name).

Pure: no database, no web.
"""
from __future__ import annotations

from functools import lru_cache

#: longest password accepted (argon2 hashes any length; a megabyte-long one only costs time)
MAX_LENGTH = 1024
#: characters of a long password zxcvbn looks at (its matching is slow on long inputs)
SCORED_PREFIX = 100


@lru_cache(maxsize=1)
def common_passwords() -> frozenset[str]:
    """zxcvbn's list of the most common passwords (lower case)."""
    from zxcvbn.frequency_lists import FREQUENCY_LISTS

    return frozenset(p.lower() for p in FREQUENCY_LISTS["passwords"])


def password_problem(password: str, username: str | None = None, *, min_length: int | None = None,
                     min_score: int | None = None) -> str | None:
    """Why `password` may not be set (a sentence starting "password ..."), or None when it may.
    `min_length` / `min_score` default to the settings PASSWORD_MIN_LENGTH / PASSWORD_MIN_SCORE."""
    if min_length is None or min_score is None:
        from app.core.config import get_settings

        s = get_settings()
        min_length = s.password_min_length if min_length is None else min_length
        min_score = s.password_min_score if min_score is None else min_score
    if len(password) < min_length:
        return f"password must have at least {min_length} characters"
    if len(password) > MAX_LENGTH:
        return f"password must have at most {MAX_LENGTH} characters"
    if password.lower() in common_passwords() or password.strip().lower() in common_passwords():
        return "password is one of the most common passwords (breached password lists); choose another"
    if username and password.strip().lower() == username.strip().lower():
        return "password must not be the user name"
    if min_score > 0:
        from zxcvbn import zxcvbn

        result = zxcvbn(password[:SCORED_PREFIX], user_inputs=[username] if username else [])
        if result["score"] < min_score:
            fb = result.get("feedback") or {}
            hint = " ".join(x for x in [fb.get("warning") or "", *(fb.get("suggestions") or [])[:1]] if x)
            return "password is too easy to guess" + (f": {hint}" if hint else "")
    return None
