"""The reader registry: every reader `import`, `inspect`, the REST upload and the OTLP endpoint use.

Readers are found one way, built-ins included: the entry point group ``a2annotate.readers``
(`app.ingest.readers.base.ENTRY_POINT_GROUP`). a2annotate declares its own readers there in
pyproject.toml (``[project.entry-points."a2annotate.readers"]``); a user's package declares
theirs the same way (docs/readers.md). An entry point names a `Reader` class (instantiated with
no arguments), an instance, or a function returning one. When the installed metadata of
a2annotate itself is stale (a source checkout not reinstalled since pyproject.toml changed), its
entry points are read from that pyproject.toml instead, so the built-ins are never missing.

Detection asks every reader to `sniff` the path (directories: only readers with `reads_dirs`)
and takes the highest score; a tie goes to the built-in reader, then to the name first in
alphabetical order (a plugin that wants a shape a built-in also claims must score higher). A
reader whose sniff raises is skipped with that as its reason. No reader above 0: the path is
refused with every reader's reason and a pointer to `a2annotate inspect` (`declined_message`).

Tests (and embedding code) add readers with `register(reader)` or, scoped, `with registered(r):`.
A plugin that fails to load is skipped and listed in `Registry.problems` (shown by `inspect`).
"""
from __future__ import annotations

import importlib
import os
import threading
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from app.ingest.budget import BudgetExceeded
from app.ingest.readers.base import ENTRY_POINT_GROUP, Sniff

BUILTIN_DIST = "a2annotate"


@dataclass
class Entry:
    """One registered reader and where it came from."""

    reader: Any
    origin: str
    builtin: bool = False

    @property
    def name(self) -> str:
        return self.reader.name


@dataclass
class Tried:
    """One reader's answer about one path."""

    name: str
    sniff: Sniff
    builtin: bool


@dataclass
class Pick:
    """The reader chosen for a path (None when every reader declined) and what each one said."""

    reader: Any | None
    sniff: Sniff | None
    tried: list[Tried] = field(default_factory=list)

    @property
    def name(self) -> str | None:
        return self.reader.name if self.reader is not None else None


class UnknownReader(ValueError):
    pass


def as_reader(obj: Any, name: str) -> Any:
    """The reader an entry point names: a class (instantiated), an instance, or a factory."""
    reader = obj
    if isinstance(obj, type):
        reader = obj()
    elif callable(obj) and not hasattr(obj, "sniff"):
        reader = obj()
    for attr in ("sniff", "read"):
        if not callable(getattr(reader, attr, None)):
            raise TypeError(f"reader {name!r}: has no {attr}() method")
    if not getattr(reader, "name", None):
        try:
            reader.name = name
        except AttributeError as exc:
            raise TypeError(f"reader {name!r}: has no name") from exc
    return reader


class Registry:
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._aliases: dict[str, str] = {}
        #: plugins that could not be loaded: "name (origin): error"
        self.problems: list[str] = []

    # ------------------------------------------------------------------ building
    def add(self, reader: Any, origin: str = "registered", builtin: bool = False) -> Any:
        """Register `reader` under its `name` (and its `aliases`); a later reader of the same name
        replaces the earlier one."""
        reader = as_reader(reader, getattr(reader, "name", "") or "reader")
        self._entries[reader.name] = Entry(reader, origin, builtin)
        for alias in getattr(reader, "aliases", ()) or ():
            self._aliases[alias] = reader.name
        return reader

    def remove(self, name: str) -> None:
        self._entries.pop(name, None)
        for alias, target in list(self._aliases.items()):
            if target == name:
                del self._aliases[alias]

    # ------------------------------------------------------------------ looking up
    def names(self) -> list[str]:
        """Every name `--format` takes: readers' names and their aliases, sorted."""
        return sorted({*self._entries, *(a for a, t in self._aliases.items() if t in self._entries)})

    def entries(self) -> list[Entry]:
        return [self._entries[n] for n in sorted(self._entries)]

    def get(self, name: str) -> Any:
        """The reader called `name` (or one of its aliases); raises UnknownReader naming them all."""
        target = name if name in self._entries else self._aliases.get(name)
        if target is None or target not in self._entries:
            raise UnknownReader(f"unknown format {name!r}; expected one of {', '.join(self.names())}")
        return self._entries[target].reader

    def entry(self, name: str) -> Entry:
        self.get(name)
        return self._entries[name if name in self._entries else self._aliases[name]]

    # ------------------------------------------------------------------ detection
    def sniff_all(self, path: str | os.PathLike, dirs: bool | None = None) -> list[Tried]:
        """Every eligible reader's answer for `path`, best first (score, built-in, name)."""
        p = Path(path)
        is_dir = p.is_dir() if dirs is None else dirs
        out: list[Tried] = []
        for entry in self._entries.values():
            if is_dir and not getattr(entry.reader, "reads_dirs", False):
                continue
            try:
                s = entry.reader.sniff(p)
                if not isinstance(s, Sniff):
                    s = Sniff(float(getattr(s, "score", s) or 0), str(getattr(s, "reason", "")))
            except BudgetExceeded:
                raise  # the import's budget is spent while sniffing (e.g. blank lines): the import stops
            except Exception as exc:  # noqa: BLE001 - a reader's bug never stops detection
                s = Sniff(0.0, f"sniff failed: {type(exc).__name__}: {exc}")
            out.append(Tried(entry.name, s, entry.builtin))
        out.sort(key=lambda t: (-t.sniff.score, not t.builtin, t.name))
        return out

    def pick(self, path: str | os.PathLike, dirs: bool | None = None) -> Pick:
        tried = self.sniff_all(path, dirs)
        if tried and tried[0].sniff.score > 0:
            best = tried[0]
            return Pick(self._entries[best.name].reader, best.sniff, tried)
        return Pick(None, None, tried)


    def pick_spans(self, spans: list[Any]) -> Pick:
        """The reader for OTLP spans received live (POST /v1/traces): among readers with
        ``sniff_spans(spans)`` and ``runs_from_spans(spans)``, the highest score (ties as `pick`)."""
        tried: list[Tried] = []
        for entry in self._entries.values():
            fn = getattr(entry.reader, "sniff_spans", None)
            if not callable(fn) or not callable(getattr(entry.reader, "runs_from_spans", None)):
                continue
            try:
                s = fn(spans)
            except Exception as exc:  # noqa: BLE001
                s = Sniff(0.0, f"sniff_spans failed: {type(exc).__name__}: {exc}")
            tried.append(Tried(entry.name, s, entry.builtin))
        tried.sort(key=lambda t: (-t.sniff.score, not t.builtin, t.name))
        if tried and tried[0].sniff.score > 0:
            return Pick(self._entries[tried[0].name].reader, tried[0].sniff, tried)
        return Pick(None, None, tried)


def declined_message(shown: str, tried: Iterable[Tried]) -> str:
    """The message for a path no reader takes: every reader's reason, and where to look next."""
    reasons = "; ".join(f"{t.name}: {t.sniff.reason or 'declined'}" for t in tried)
    return (f"cannot tell the format: no reader takes this file ({reasons}); run `a2annotate inspect {shown}` "
            "to see what it holds and write an import profile, or name a reader with --format")


# ---------------------------------------------------------------------- loading

def _load_ref(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module.strip())
    for part in attr.strip().split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _pyproject_refs() -> list[tuple[str, str]]:
    """a2annotate's own reader entry points, read from its pyproject.toml (source checkouts)."""
    import tomllib

    path = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    table = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return [(k, v) for k, v in table.items() if isinstance(v, str)]


def _dist_name(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", "") or ""
    return name.lower().replace("_", "-")


def load_registry(*, use_entry_points: bool = True) -> Registry:
    """A registry of a2annotate's readers and every installed package's (see the module docstring)."""
    reg = Registry()
    eps = list(entry_points(group=ENTRY_POINT_GROUP)) if use_entry_points else []
    own = [(ep.name, ep.value) for ep in eps if _dist_name(ep) == BUILTIN_DIST]
    own_names = {n for n, _ in own}
    for name, ref in _pyproject_refs():
        if name not in own_names:  # metadata older than pyproject.toml: the source wins
            own.append((name, ref))
    for name, ref in sorted(own):
        try:
            reg.add(as_reader(_load_ref(ref), name), origin=f"built-in ({ref})", builtin=True)
        except Exception as exc:  # noqa: BLE001
            reg.problems.append(f"{name} (built-in {ref}): {type(exc).__name__}: {exc}")
    for ep in sorted((e for e in eps if _dist_name(e) != BUILTIN_DIST), key=lambda e: e.name):
        origin = f"entry point {ep.name} ({_dist_name(ep) or 'unknown package'}: {ep.value})"
        try:
            reg.add(as_reader(ep.load(), ep.name), origin=origin)
        except Exception as exc:  # noqa: BLE001 - one broken plugin never stops the others
            reg.problems.append(f"{ep.name} ({origin}): {type(exc).__name__}: {exc}\n"
                                + traceback.format_exc(limit=3))
    return reg


_lock = threading.Lock()
_registry: Registry | None = None
_extra: list[Any] = []


def registry() -> Registry:
    """The process's registry (loaded once; `reload_registry()` reads the entry points again)."""
    global _registry
    if _registry is None:
        with _lock:
            if _registry is None:
                reg = load_registry()
                for r in _extra:
                    reg.add(r)
                _registry = reg
    return _registry


def reload_registry() -> Registry:
    global _registry
    with _lock:
        _registry = None
    return registry()


def register(reader: Any) -> Any:
    """Add `reader` to the process's registry (kept across `reload_registry`); returns it."""
    reader = as_reader(reader, getattr(reader, "name", "") or "reader")
    _extra.append(reader)
    registry().add(reader)
    return reader


def unregister(name: str) -> None:
    _extra[:] = [r for r in _extra if r.name != name]
    reload_registry()


@contextmanager
def registered(*readers: Any) -> Iterator[list[Any]]:
    """Register `readers` for the duration of a ``with`` block (tests)."""
    added = [register(r) for r in readers]
    try:
        yield added
    finally:
        for r in added:
            unregister(r.name)
