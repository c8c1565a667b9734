"""Small text checks shared by the services."""
from __future__ import annotations


def is_decimal(s: str, *, signed: bool = False) -> bool:
    """True when `s` is a non-empty run of ASCII digits 0-9 (with one leading ``-`` if `signed`).

    Unlike `str.isdigit()`, which is also true for superscripts and other Unicode digits such as
    ``"³"`` that `int()` refuses, a True here means `int(s)` succeeds."""
    if signed and s.startswith("-"):
        s = s[1:]
    return s.isascii() and s.isdigit()
