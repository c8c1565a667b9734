"""Deterministic detectors that pre-flag failure candidates (pure; see `app.detectors.base`).

Built-in detectors, one module each: `leak` (private value in a shared event), `divergence`
(final records disagree), `mandate` (violations / limit exceeded), `handoff` (request never
answered), `unchecked_claim` (contradicting peer claim relied on without a check).

User detectors (documented in docs/detectors.md) are found in two places:

* the entry point group ``a2annotate.detectors`` of any installed package: the object is a
  `Detector`, or a function ``run -> list`` of `Candidate` or dicts with ``agent``, ``evidence``,
  ``reason`` and optionally ``mode``, ``principals`` (name: the entry point's name; version: the
  function's ``version`` attribute, else "1"; key: its ``key`` attribute, else the name);
* the ``DETECTORS`` setting: comma-separated ``module:attribute`` or ``/path/to/file.py:attribute``
  references of the same kinds of objects.

`run_detectors(run, detectors, mode_map)` runs each detector on one canonical run and never
raises: a detector that raises is reported in its result (``error``) and the others still run.
"""
from __future__ import annotations

import importlib
import importlib.util
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from app.detectors.base import Candidate, Detector, Run

ENTRY_POINT_GROUP = "a2annotate.detectors"


def builtin_detectors() -> list[Detector]:
    from app.detectors import divergence, handoff, leak, mandate, unchecked_claim

    return [m.DETECTOR for m in (leak, divergence, mandate, handoff, unchecked_claim)]


def as_detector(obj: Any, name: str, origin: str) -> Detector:
    """A `Detector` from a Detector or a plain function (see the module docstring)."""
    if isinstance(obj, Detector):
        return obj
    if not callable(obj):
        raise TypeError(f"{origin}: {name!r} is neither a Detector nor a function")
    return Detector(name=getattr(obj, "detector_name", name), version=str(getattr(obj, "version", "1")),
                    key=getattr(obj, "key", name), description=(obj.__doc__ or "").strip().split("\n")[0],
                    detect=obj, origin=origin)


def _load_ref(ref: str) -> tuple[str, Any]:
    target, _, attr = ref.strip().rpartition(":")
    if not target:
        raise ValueError(f"detector reference {ref!r} must look like module:attribute or /path/file.py:attribute")
    if target.endswith(".py"):
        path = Path(target)
        spec = importlib.util.spec_from_file_location(f"a2annotate_user_detector_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return attr, getattr(module, attr)


@dataclass
class Registry:
    detectors: list[Detector] = field(default_factory=list)
    #: problems met while loading user detectors (reported, never fatal)
    problems: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [d.name for d in self.detectors]

    def get(self, name: str) -> Detector | None:
        return next((d for d in self.detectors if d.name == name), None)


def load_registry(settings_refs: str | Iterable[str] | None = None, *, use_entry_points: bool = True) -> Registry:
    """Built-ins, then entry points, then the settings references (a later detector of the same
    name is refused and reported, so a user cannot silently replace a built-in)."""
    reg = Registry(detectors=builtin_detectors())
    found: list[tuple[str, Callable[[], Any], str]] = []
    if use_entry_points:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            found.append((ep.name, ep.load, f"entry point {ep.name}"))
    if isinstance(settings_refs, str):
        settings_refs = [r for r in settings_refs.split(",") if r.strip()]
    for ref in settings_refs or []:
        found.append((ref, (lambda r=ref: _load_ref(r)[1]), f"settings {ref.strip()}"))
    for name, load, origin in found:
        try:
            obj = load()
            objs = obj if isinstance(obj, (list, tuple)) else [obj]
            for o in objs:
                default = name.rpartition(":")[2] if ":" in name else name
                d = as_detector(o, getattr(o, "__name__", default) if len(objs) > 1 else default, origin)
                if isinstance(o, Detector):
                    d = Detector(name=d.name, version=d.version, key=d.key, description=d.description,
                                 detect=d.detect, origin=origin)
                if reg.get(d.name) is not None:
                    reg.problems.append(f"{origin}: a detector named {d.name!r} is already registered; skipped")
                    continue
                reg.detectors.append(d)
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is reported, the rest still load
            reg.problems.append(f"{origin}: {type(exc).__name__}: {exc}")
    return reg


def mode_map(definition: Mapping[str, Any]) -> dict[str, str]:
    """{detector key or name: mode code} from a taxonomy definition's ``detectors`` lists on its
    modes (``x-detectors`` is read too, for files written for other tools)."""
    out: dict[str, str] = {}
    for m in definition.get("modes") or []:
        for key in [*(m.get("detectors") or []), *(m.get("x-detectors") or [])]:
            out.setdefault(str(key), m["code"])
    return out


@dataclass
class DetectorResult:
    detector: Detector
    labels: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: candidates dropped because no mode could be found for them (or an unknown agent/seq)
    dropped: list[str] = field(default_factory=list)


def _candidate(c: Any) -> Candidate:
    if isinstance(c, Candidate):
        return c
    if isinstance(c, Mapping):
        return Candidate(agent=c["agent"], evidence=tuple(int(s) for s in c.get("evidence") or ()),
                         reason=str(c.get("reason") or c.get("note") or ""),
                         principals=tuple(c.get("principals") or ()), mode=c.get("mode"))
    raise TypeError(f"a detector must return Candidate objects or dicts, got {type(c).__name__}")


def run_one(detector: Detector, run: Run, modes: Mapping[str, str], valid_modes: Iterable[str] | None = None
            ) -> DetectorResult:
    """Run one detector on one run; an exception (in the detector, or a malformed candidate)
    becomes ``error`` (one line plus the location) and no labels."""
    res = DetectorResult(detector=detector)
    try:
        cands = [_candidate(c) for c in detector.detect(run) or []]
        agents = {a["id"] for a in run.get("agents") or []}
        seqs = {e["seq"] for e in run.get("events") or []}
        principals = {p["id"] for p in run.get("principals") or []}
        valid = set(valid_modes) if valid_modes is not None else None
        for c in cands:
            mode = c.mode or modes.get(detector.key) or modes.get(detector.name)
            if mode is None or (valid is not None and mode not in valid):
                res.dropped.append(f"no mode for detector key {detector.key!r}" if mode is None
                                   else f"unknown mode {mode!r}")
                continue
            if not isinstance(c.agent, str) or c.agent not in agents or not c.evidence \
                    or not {int(s) for s in c.evidence} <= seqs:
                res.dropped.append(f"candidate names an unknown agent or event: {c.agent!r} {list(c.evidence)}")
                continue
            res.labels.append({"mode": mode, "agent": c.agent, "evidence": sorted({int(s) for s in c.evidence}),
                               "principals": [p for p in c.principals if p in principals],
                               "note": str(c.reason).replace("\x00", "\\u0000")[:2000]})
    except Exception as exc:  # noqa: BLE001 - reported, never stops the other detectors
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        res.error = f"{type(exc).__name__}: {exc}{where}"
        res.labels = []
    return res


def run_detectors(run: Run, detectors: Iterable[Detector], modes: Mapping[str, str],
                  valid_modes: Iterable[str] | None = None) -> list[DetectorResult]:
    """Every detector on one run (pure). One detector raising is reported in its own result."""
    valid = list(valid_modes) if valid_modes is not None else None
    return [run_one(d, run, modes, valid) for d in detectors]
