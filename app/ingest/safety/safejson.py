"""JSON parsing with input limits, enforced while the text is read and before anything is built.

Why not `json.loads` or `ijson` alone:

* ijson's C backend (yajl2_c) calls `int()` on each integer literal and does not check the
  result; an integer of more than 4,300 digits (Python's `int` limit) makes it dereference a NULL
  pointer and the whole process dies (exit 139). ijson's `items()` also keeps a prefix string per
  nesting level, so memory grows with the square of the depth.
* `json.loads` raises RecursionError (not a ValueError) on deep nesting, after building the
  levels above, and a bare ValueError on an integer of more than 4,300 digits.

So the bracket structure is scanned first with one possessive regular expression (strings are
skipped in C, only brackets are visited), which bounds the nesting depth and the length of
strings; then `json.loads` builds the value with an integer hook that refuses too many digits.
A top-level JSON array is streamed element by element the same way (`iter_array`), so one bad
element (too deep, a too-long string, an integer out of range) is an error for that element only
and the elements after it are still read.

Every breach raises `JSONLimitError` (a `json.JSONDecodeError`, so a ValueError) whose message
names the field (a JSON path such as ``events[3].data``), the line and the limit.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from app.ingest import budget as _budget
from app.ingest.safety.limits import InputLimits, input_limits

BOM = b"\xef\xbb\xbf"
#: everything that is not a bracket, strings skipped whole (possessive: never backtracks)
_SKIP = re.compile(rb'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.S)
#: the rest of a string from inside it, up to (not including) its closing quote
_IN_STRING = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.S)
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)
#: tokens for locating a breach: a string (and whether it is a key), a bracket, a comma, a number
_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(")?(\s*:)?|[\[\]{},]|-?\d++(?:\.\d++)?(?:[eE][+-]?\d++)?', re.S)
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_LIMIT_NAMES = {"depth": "MAX_JSON_DEPTH", "string": "MAX_STRING_BYTES", "int": "MAX_INT_DIGITS",
                "size": "MAX_RECORD_BYTES"}


class JSONLimitError(json.JSONDecodeError):
    """A JSON text over one of the input limits. `field` is the JSON path of the value
    (``""`` for the top level), `kind` one of "depth", "string", "int"."""

    def __init__(self, kind: str, message: str, doc: str, pos: int, field: str):
        self.kind = kind
        self.field = field
        where = f"field {field}: " if field else ""
        super().__init__(f"{where}{message} (limit {_LIMIT_NAMES[kind]})", doc, pos)

    def __str__(self) -> str:
        return self.msg


def _as_bytes(data: bytes | bytearray | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _line_col(data: bytes, pos: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, pos) + 1
    return line, pos - (data.rfind(b"\n", 0, pos) + 1) + 1


def _path(stack: list[Any]) -> str:
    out = ""
    for p in stack:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p is not None:
            out += f".{p}" if out else p
    if len(out) > 100:
        out = out[:50] + "..." + out[-40:]
    return out


def locate(data: bytes, pos: int, base: list[Any] | None = None) -> str:
    """The JSON path of the value at byte `pos` of `data` (e.g. ``events[2].data.a``); a slow
    token walk, only run to name the field of a breach. `base` prefixes the path."""
    stack: list[Any] = list(base or [])
    depth0 = len(stack)
    i = 0
    key: Any = None
    while i < pos:
        m = _TOKEN.search(data, i, pos + 1)
        if m is None or m.start() >= pos:
            break
        tok = m.group()
        c = tok[0]
        if c == 0x22:  # string
            if m.group(2):
                key = json.loads(tok[:tok.rfind(b'"') + 1].decode("utf-8", "replace")) if m.group(1) else "?"
                if len(stack) > depth0 and not isinstance(stack[-1], int):
                    stack[-1] = key
        elif c in _OPEN:
            stack.append(0 if c == 0x5B else None)
        elif c in _CLOSE:
            if len(stack) > depth0:
                stack.pop()
        elif c == 0x2C and len(stack) > depth0 and isinstance(stack[-1], int):
            stack[-1] += 1
        i = m.end()
    return _path(stack)


def _first_long_int(data: bytes, max_digits: int) -> int | None:
    """Byte offset of the first integer (outside strings) with more than `max_digits` digits."""
    i = 0
    while True:
        m = _TOKEN.search(data, i)
        if m is None:
            return None
        tok = m.group()
        if tok[0] not in b'"[]{},' and len(tok.lstrip(b"-")) > max_digits and not re.search(rb"[.eE]", tok):
            return m.start()
        i = m.end()


def _depth_breach(data: bytes, max_depth: int, start: int = 0, depth: int = 0) -> tuple[int, int] | None:
    """(position, kind) of the first bracket nested deeper than `max_depth`, or of an unterminated
    string ((pos, -1)); None when the nesting stays within the limit."""
    n = len(data)
    pos = start
    while True:
        pos = _SKIP.match(data, pos).end()
        if pos >= n:
            return None
        c = data[pos]
        if c == 0x22:  # a string that never ends: json.loads reports it
            return None
        if c in _OPEN:
            depth += 1
            if depth > max_depth:
                return pos, 1
        else:
            depth -= 1
        pos += 1


def _long_string(data: bytes, max_bytes: int) -> int | None:
    if len(data) <= max_bytes:
        return None
    for m in _STRING.finditer(data):
        if m.end() - m.start() - 2 > max_bytes:
            return m.start()
    return None


def _int_hook(max_digits: int):
    def parse_int(s: str) -> int:
        if len(s) - (s[0] == "-") > max_digits:
            raise _TooManyDigits
        return int(s)

    return parse_int


class _TooManyDigits(Exception):
    pass


_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def _surely_within(data: bytes, lim: InputLimits) -> tuple[bool, bool]:
    """Fast checks, all in C: (nesting surely within MAX_JSON_DEPTH, no integer can have more
    than MAX_INT_DIGITS digits). False means "look closer", not "over the limit"."""
    # brackets and digits inside strings count too: that can only send a text to the closer look
    brackets = data.translate(None, _NOT_BRACKETS)
    passes = 0
    while brackets and passes <= lim.max_json_depth:  # one pass removes one level of pairs
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if shorter == brackets:
            break
        brackets = shorter
        passes += 1
    depth_ok = not brackets and passes <= lim.max_json_depth
    digits_ok = re.search(rb"\d{%d}" % (lim.max_int_digits + 1), data) is None
    return depth_ok, digits_ok


def check(data: bytes, limits: InputLimits | None = None, *, depth_checked: bool = False,
          base: list[Any] | None = None) -> bool:
    """Raises JSONLimitError when `data` nests too deep or holds a too-long string; returns
    whether any integer may have too many digits (then `loads` parses with a checking hook)."""
    lim = limits or input_limits()
    depth_ok, digits_ok = _surely_within(data, lim)
    if not depth_checked and not depth_ok:
        hit = _depth_breach(data, lim.max_json_depth)
        if hit is not None:
            raise JSONLimitError("depth", f"nested deeper than {lim.max_json_depth} levels",
                                 data.decode("utf-8", "replace"), hit[0], locate(data, hit[0], base))
    where = _long_string(data, lim.max_string_bytes)
    if where is not None:
        raise JSONLimitError("string", f"a string longer than {lim.max_string_bytes} bytes",
                             data.decode("utf-8", "replace"), where, locate(data, where, base))
    return not digits_ok


def loads(data: bytes | bytearray | str, limits: InputLimits | None = None, *,
          base: list[Any] | None = None, _depth_checked: bool = False) -> Any:
    """`json.loads` within the input limits: raises JSONLimitError (nesting deeper than
    MAX_JSON_DEPTH, a string longer than MAX_STRING_BYTES, an integer with more than
    MAX_INT_DIGITS digits) or json.JSONDecodeError; never RecursionError. `data` may start with
    a UTF-8 BOM; bytes that are not UTF-8 raise UnicodeDecodeError."""
    lim = limits or input_limits()
    raw = _as_bytes(data)
    if raw.startswith(BOM):
        raw = raw[3:]
    long_ints = check(raw, lim, depth_checked=_depth_checked, base=base)
    text = raw.decode("utf-8")
    try:
        if not long_ints:
            return json.loads(text)
        return json.loads(text, parse_int=_int_hook(lim.max_int_digits))
    except _TooManyDigits:
        where = _first_long_int(raw, lim.max_int_digits) or 0
        raise JSONLimitError("int", f"an integer with more than {lim.max_int_digits} digits", text,
                             len(raw[:where].decode("utf-8", "replace")), locate(raw, where, base)) from None
    except RecursionError:  # only with MAX_JSON_DEPTH near the interpreter's recursion limit
        raise JSONLimitError("depth", "nested too deep for this interpreter", text, 0, _path(base or [])) from None


def load(f: IO[bytes], limits: InputLimits | None = None) -> Any:
    """`loads` of a whole binary file object."""
    return loads(f.read(), limits)


@dataclass
class ArrayElement:
    """One element of a streamed top-level array: its `index`, the `line` it starts on, and
    either the parsed `value` or the `error` (a ValueError) that rejected it. `fatal` errors end
    the array (the rest of the file cannot be read)."""

    index: int
    line: int
    value: Any = None
    error: ValueError | None = None
    fatal: bool = False


def iter_array(f: IO[bytes], limits: InputLimits | None = None, chunk_size: int = 1 << 16) -> Iterator[ArrayElement]:
    """Stream the elements of the top-level JSON array in binary file `f`.

    Only the element being read is held in memory. An element nested deeper than
    MAX_JSON_DEPTH or holding a string longer than MAX_STRING_BYTES is skipped (its bytes are not
    kept) and comes back with its error; reading goes on with the next element. A value that is
    not an object or an array at the top level of the array is returned as parsed."""
    lim = limits or input_limits()
    buf = bytearray()
    eof = False
    pos = 0            # scan position in buf
    depth = 0          # 0 before the array, 1 inside it, 2+ inside an element
    started = False
    ended = False
    elem_start: int | None = None   # start of the current element in buf (None between elements)
    bad: ValueError | None = None   # the current element's error (its bytes are then dropped)
    in_string = False  # inside an over-long string of a bad element
    index = 0
    lines_before = 0   # newlines in the bytes already dropped from buf
    gap_start = 0      # where the text between elements starts in buf
    first = True

    def line_at(p: int) -> int:
        return lines_before + buf.count(b"\n", 0, p) + 1

    def drop(upto: int) -> None:
        nonlocal buf, pos, lines_before, elem_start, gap_start
        if upto <= 0:
            return
        lines_before += buf.count(b"\n", 0, upto)
        del buf[:upto]
        pos -= upto
        gap_start = max(0, gap_start - upto)
        if elem_start is not None:
            elem_start = max(0, elem_start - upto)

    def too_big() -> bool:
        """Marks the open element bad once it holds more than MAX_RECORD_BYTES."""
        nonlocal bad
        if bad is None and elem_start is not None and pos - elem_start > lim.max_record_bytes:
            bad = JSONLimitError("size", f"an element longer than {lim.max_record_bytes} bytes", "", 0, f"[{index}]")
            bad.lineno = line_at(elem_start)
            return True
        return False

    def scalars(gap: bytes, line: int) -> Iterator[ArrayElement]:
        nonlocal index
        for piece in gap.split(b","):
            piece = piece.strip()
            if piece:
                try:
                    value = loads(piece, lim)
                except ValueError as exc:
                    yield ArrayElement(index, line, error=exc)
                else:
                    yield ArrayElement(index, line, value=value)
                index += 1

    while True:
        if not eof and (pos >= len(buf) or in_string):
            data = f.read(chunk_size)
            if first:
                first = False
                if data.startswith(BOM):
                    data = data[3:]
            if not data:
                eof = True
            buf += data
        if in_string:
            end = _IN_STRING.match(buf, pos).end()
            if end < len(buf) and buf[end] == 0x22:
                in_string = False
                pos = end + 1
                drop(pos)
                continue
            if eof:
                yield ArrayElement(index, line_at(pos), error=bad, fatal=True)
                return
            keep = end if end < len(buf) else len(buf)  # a lone trailing backslash stays
            pos = keep
            drop(pos)
            continue
        pos = _SKIP.match(buf, pos).end()
        if pos >= len(buf):
            if eof:
                break
            if elem_start is None and depth <= 1 and pos - gap_start > (1 << 20):
                # a long run of scalars between elements: report them, do not keep them
                gap = bytes(buf[gap_start:pos])
                if gap.strip(b" \t\r\n,"):
                    yield from scalars(gap, line_at(gap_start))
                drop(pos)
            elif bad is not None:
                drop(pos)
            elif too_big():
                drop(pos)
            continue
        c = buf[pos]
        if c == 0x22:  # a string not finished in buf
            if len(buf) - pos - 1 > lim.max_string_bytes:
                if depth < 2:  # a top-level string element
                    yield ArrayElement(index, line_at(pos), error=ValueError(
                        f"[{index}]: a string longer than {lim.max_string_bytes} bytes"), fatal=False)
                    index += 1
                    gap_start = pos
                    in_string = True
                    pos += 1
                    bad = ValueError("string not terminated")
                    continue
                if bad is None:
                    field = locate(bytes(buf[elem_start:pos]), pos - elem_start, [index])
                    bad = JSONLimitError("string", f"a string longer than {lim.max_string_bytes} bytes",
                                         "", 0, field)
                    bad.lineno = line_at(pos)
                in_string = True
                pos += 1
                drop(pos)
                continue
            if eof:
                break  # unterminated string at the end of the file
            if bad is not None or (elem_start is None and depth <= 1) or too_big():
                drop(pos)
            # read more: the string continues in the next chunk
            data = f.read(chunk_size)
            if not data:
                eof = True
            buf += data
            continue
        if c in _OPEN:
            depth += 1
            if depth == 1:
                if started:
                    yield ArrayElement(index, line_at(pos), error=ValueError("text after the end of the array"),
                                       fatal=True)
                    return
                started = True
                gap_start = pos + 1
            elif depth == 2:
                gap = bytes(buf[gap_start:pos])
                if gap.strip(b" \t\r\n,"):
                    yield from scalars(gap, line_at(gap_start))
                elem_start = pos
                bad = None
            elif depth - 1 > lim.max_json_depth and bad is None:
                field = locate(bytes(buf[elem_start:pos]), pos - elem_start, [index])
                bad = JSONLimitError("depth", f"nested deeper than {lim.max_json_depth} levels", "", 0, field)
                bad.lineno = line_at(pos)
                drop(pos)
        elif c in _CLOSE:
            depth -= 1
            if depth == 1 and elem_start is not None:
                line = line_at(elem_start)
                if bad is not None:
                    yield ArrayElement(index, line, error=bad)
                else:
                    try:
                        value = loads(bytes(buf[elem_start:pos + 1]), lim, base=[index], _depth_checked=True)
                    except ValueError as exc:
                        if isinstance(exc, json.JSONDecodeError):
                            exc.lineno = line + exc.lineno - 1
                        yield ArrayElement(index, line, error=exc)
                    else:
                        yield ArrayElement(index, line, value=value)
                index += 1
                elem_start = None
                bad = None
                gap_start = pos + 1
                pos += 1
                drop(pos)
                continue
            if depth == 0:
                gap = bytes(buf[gap_start:pos])
                if gap.strip(b" \t\r\n,"):
                    yield from scalars(gap, line_at(gap_start))
                ended = True
                pos += 1
                rest = buf[pos:].strip()
                while not rest and not eof:
                    data = f.read(chunk_size)
                    if not data:
                        break
                    rest = data.strip()
                if rest:
                    yield ArrayElement(index, line_at(pos), error=ValueError("text after the end of the array"),
                                       fatal=True)
                return
            if depth < 0:
                yield ArrayElement(index, line_at(pos), error=ValueError("a closing bracket without its opening one"),
                                   fatal=True)
                return
        pos += 1
    if not started:
        yield ArrayElement(index, 1, error=ValueError("not a JSON array"), fatal=True)
    elif not ended:
        yield ArrayElement(index, line_at(min(pos, len(buf))),
                           error=ValueError("the file ends inside the array (truncated?); the rest could not be read"),
                           fatal=True)


class LineTooLong:
    """Stands for a line longer than the limit in `bounded_lines` (its bytes were not kept)."""

    def __init__(self, size: int):
        self.size = size


def bounded_lines(f: IO[bytes], max_line: int | None = None) -> Iterator[bytes | LineTooLong]:
    """The lines of binary file `f`, like iterating over it, except that a line longer than
    `max_line` bytes (MAX_RECORD_BYTES) is not held in memory: it comes back as a `LineTooLong`
    and reading goes on with the next line."""
    most = max_line if max_line is not None else input_limits().max_record_bytes
    spend = _budget.current()  # every line counts, blank and comment lines too (MAX_IMPORT_RECORDS)
    while True:
        line = f.readline(most + 1)
        if not line:
            return
        if spend is not None:
            spend.records()
        if len(line) <= most or line.endswith(b"\n") and len(line) == most + 1 and most > 0:
            yield line
            continue
        size = len(line)
        while not line.endswith(b"\n"):
            line = f.readline(1 << 20)
            if not line:
                break
            size += len(line)
        yield LineTooLong(size)


def top_level_keys(f: IO[bytes], limit: int = 64, max_bytes: int = 8 << 20,
                   stop: tuple[str, ...] = ("run_id", "jsonrpc", "body"), first_record: bool = False) -> set[str]:
    """Keys of the top-level object in binary file `f` (read at most `max_bytes`), for format
    sniffing; stops after `limit` keys or at a key of `stop`. With `first_record`, a top-level
    array gives the keys of its first element instead (JSON Lines: of the first line's object)."""
    data = f.read(max_bytes)
    if data.startswith(BOM):
        data = data[3:]
    keys: set[str] = set()
    level = 1
    if first_record and data.lstrip()[:1] == b"[":
        level = 2
    depth = 0
    i = 0
    while len(keys) < limit:
        m = _TOKEN.search(data, i)
        if m is None:
            break
        tok = m.group()
        c = tok[0]
        if c == 0x22 and m.group(1) and m.group(2) and depth == level:
            try:
                k = json.loads(tok[:tok.rfind(b'"') + 1])
            except ValueError:
                k = None
            if isinstance(k, str):
                keys.add(k)
                if k in stop:
                    break
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth < level:
                break
        i = m.end()
    return keys
