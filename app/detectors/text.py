"""Value normalisation shared by the detectors (pure).

* numbers in their usual spellings: ``18500``, ``18,500``, ``18.5k``, ``$18,500.00``, ``€1.2m``,
  ``eighteen thousand five hundred``; dates (ISO, ``Mar 12``, ``12 March 2026``) and times are
  taken out of a text before its numbers are read, so the day of a date is not a number;
* values compared the way a person would: numbers with units as numbers, dates as dates, text
  with case and whitespace normalised.
"""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_RE = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
            r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE_PATTERNS = (
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"),
    re.compile(rf"\b{_MONTH_RE}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b", re.I),
    re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_RE}(?:,?\s+\d{{4}})?\b", re.I),
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
    re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:am|pm)?\b", re.I),
)
_NUMBER = re.compile(
    r"(?<![\w.\-/])(?P<cur>[$€£]\s?)?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?"
    r"(?:\s?(?P<suf>[kKmM]\b|thousand\b|million\b|bn\b|billion\b))?(?![\w\-])")
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i >= 2}
_WORD_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_WORD = re.compile(r"[a-z]+")
_ANY_NUMBER_WORD = re.compile(r"\b(?:" + "|".join([*_UNITS, *_TENS]) + r")\b", re.I)


def strip_dates(text: str) -> str:
    """`text` with dates and clock times replaced by a space (so their digits are not numbers)."""
    if not any(ch.isdigit() for ch in text):
        return text
    for pat in _DATE_PATTERNS:
        text = pat.sub(" ", text)
    return text


def _word_numbers(text: str) -> Iterator[float]:
    """Numbers written in English words ("eighteen thousand five hundred" -> 18500)."""
    words = _WORD.findall(text.lower().replace("-", " "))
    total = current = 0
    seen = False
    for w in [*words, "."]:
        if w in _UNITS:
            current += _UNITS[w]
            seen = True
        elif w in _TENS:
            current += _TENS[w]
            seen = True
        elif w == "hundred" and seen:
            current = max(current, 1) * 100
        elif w in _WORD_SCALES and seen:
            total += max(current, 1) * _WORD_SCALES[w]
            current = 0
        elif w == "and" and seen:
            continue
        else:
            if seen and (total + current) >= 10:
                yield float(total + current)
            total = current = 0
            seen = False


_UNIT_AFTER = re.compile(r"\s?(?:%|[a-z]{2,})", re.I)


def numbers_in_text(text: str | None, *, short_needs_unit: bool = False) -> list[float]:
    """Every number in `text`, in its usual spellings, dates and times excluded. With
    `short_needs_unit`, a bare number of one or two digits counts only with a currency sign,
    a scale or a unit word after it ("30 months", "$45"), so "clause 24" or "item 3)" are not
    values."""
    if not text:
        return []
    clean = strip_dates(text)
    out = []
    for m in _NUMBER.finditer(clean):
        if short_needs_unit and not m.group("cur") and not m.group("suf") and not m.group("frac") \
                and len(m.group("int").replace(",", "").lstrip("0")) < 3 \
                and not _UNIT_AFTER.match(clean, m.end()):
            continue
        whole = float(m.group("int").replace(",", ""))
        frac = m.group("frac")
        value = whole + (float(f"0.{frac}") if frac else 0.0)
        suf = (m.group("suf") or "").lower()
        if suf:
            value *= _SCALE[suf]
        out.append(round(value, 6))
    if _ANY_NUMBER_WORD.search(clean):
        out.extend(_word_numbers(clean))
    return out


def parse_number(value: Any) -> float | None:
    """A number from a JSON value: ints/floats as they are, a string that is one number with a
    currency sign or unit (``"$18,500.00"``, ``"18.5k"``, ``"45 days"``) as that number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not re.search(r"\d", value) or looks_like_date(value):
        return None
    nums = numbers_in_text(value)
    if len(nums) != 1:
        return None
    rest = _NUMBER.sub(" ", strip_dates(value))
    if len(re.sub(r"[\s/]", "", rest)) > 12:  # "45 days" or "USD" is a unit; a sentence is not
        return None
    return nums[0]


_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "dollars": "usd", "dollar": "usd", "euros": "eur", "euro": "eur"}


def unit_of(value: Any) -> str:
    """The unit written beside a number (``"$18,500"`` -> ``usd``, ``"45 days"`` -> ``days``; ""
    when there is none), so that 45 days and 45 months are not the same value."""
    if not isinstance(value, str):
        return ""
    rest = _NUMBER.sub(lambda m: f" {m.group('cur') or ''} ", value.lower())
    words = [_CURRENCY.get(w, w) for w in re.findall(r"[$€£]|[a-z]+", rest)]
    return " ".join(w for w in words if w not in _SCALE)


def looks_like_date(value: str) -> bool:
    return parse_date(value) is not None


_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?")
_MDY = re.compile(rf"(?:[a-z]+,?\s+)?({_MONTH_RE})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", re.I)
_DMY = re.compile(rf"(?:[a-z]+,?\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE}),?\s+(\d{{4}})", re.I)


def parse_date(value: Any) -> dt.date | None:
    """A date from an ISO string (``2026-03-12``, ``2026-03-12T10:00:00Z``) or an English one
    (``March 12, 2026``, ``12 Mar 2026``); None for anything else."""
    if not isinstance(value, str) or not any(ch.isdigit() for ch in value):
        return None
    s = value.strip()
    m = _ISO_DATE.fullmatch(s)
    if m:
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
    m = _MDY.fullmatch(s)
    if m:
        month, day, year = m[1], m[2], m[3]
    else:
        m = _DMY.fullmatch(s)
        if not m:
            return None
        day, month, year = m[1], m[2], m[3]
    try:
        return dt.date(int(year), _MONTHS.index(month.lower()[:3]) + 1, int(day))
    except ValueError:
        return None


def norm_text(value: Any) -> str:
    """Lower case, runs of whitespace as one space, trimmed."""
    return " ".join(str(value).lower().split())


def same_number(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y))


def same_value(x: Any, y: Any) -> bool:
    """True when two record values mean the same: numbers (with units) as numbers, dates as
    dates, text ignoring case and whitespace, lists and objects element by element."""
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same_value(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same_value(a, b) for a, b in zip(x, y))
    if isinstance(x, bool) or isinstance(y, bool):
        return x == y
    dx, dy = parse_date(x), parse_date(y)
    if dx is not None or dy is not None:
        return dx == dy
    nx, ny = parse_number(x), parse_number(y)
    if nx is not None and ny is not None:
        ux, uy = unit_of(x), unit_of(y)
        return same_number(nx, ny) and (not ux or not uy or ux == uy)
    if x is None or y is None:
        return x is y
    return norm_text(x) == norm_text(y)


def significant_digits(value: float) -> int:
    """How many digits a number is written with (18500 -> 5, 4.25 -> 3, 0.5 -> 1)."""
    text = f"{abs(value):.6f}".rstrip("0").rstrip(".")
    return len(text.replace(".", "").lstrip("0"))


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every scalar inside a JSON value (list items as ``path[i]``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def last_key(path: str) -> str:
    """The last key of a dotted path, list indexes dropped, lower case (``a.b[0].Price`` -> ``price``)."""
    return re.sub(r"\[\d+\]", "", path).rsplit(".", 1)[-1].lower()
