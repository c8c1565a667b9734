"""What the readers yield: one `ImportItem` per run (or per error), plus a reading summary."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.ingest.canonical import Location, RunFormatError, normalize_run_checked


@dataclass
class ImportItem:
    """One result of reading: a normalized `run`, or the `error` that rejected one run.

    `source` says where it came from (file, line or run directory). `unused_files` lists input
    files nobody read (tree reader); an item may carry only those, with run and error both None.
    """

    run: dict[str, Any] | None = None
    error: RunFormatError | None = None
    source: str = ""
    unused_files: list[str] = field(default_factory=list)
    #: what a lenient reader could not map and kept aside: ``[{location, message, field?}]``
    warnings: list[dict[str, Any]] = field(default_factory=list)
    #: informational notices (``[{location, message}]``): what was kept verbatim in metadata with
    #: nothing lost; reported, never counted as warnings (``--strict`` accepts them)
    notices: list[dict[str, Any]] = field(default_factory=list)
    #: audit mode names that match nothing in the taxonomy (name -> count), kept in run metadata
    unknown_modes: dict[str, int] = field(default_factory=dict)
    #: further problems of a rejected run, beyond `error` (every problem is reported)
    more_errors: list[RunFormatError] = field(default_factory=list)
    #: the run holds no float that json and orjson write differently (see
    #: `app.ingest.canonical.normalize_run_checked`): the loader encodes it without checking
    plain_floats: bool = False

    @property
    def ok(self) -> bool:
        return self.run is not None


@dataclass
class ReadSummary:
    """Filled by `iter_path(..., summary=...)` while its items are consumed."""

    runs: int = 0
    errors: list[RunFormatError] = field(default_factory=list)
    unused_files: list[str] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    notices: list[dict[str, Any]] = field(default_factory=list)

    def add(self, item: ImportItem) -> None:
        if item.run is not None:
            self.runs += 1
        if item.error is not None:
            self.errors.append(item.error)
            self.errors.extend(item.more_errors)
        self.unused_files.extend(item.unused_files)
        self.warnings.extend(item.warnings)
        self.notices.extend(item.notices)


def item_from_raw(raw: Any, location: Location) -> ImportItem:
    """Normalize `raw` (strictly: the canonical shape is our contract); return an ImportItem
    holding the run, or the RunFormatError and, in `more_errors`, the run's other problems."""
    try:
        run, plain = normalize_run_checked(raw, location)
    except RunFormatError as exc:
        return ImportItem(error=exc, source=str(location), more_errors=other_problems(raw, location, exc))
    return ImportItem(run=run, source=str(location), warnings=_metadata_warnings(run, location), plain_floats=plain)


def _metadata_warnings(run: dict[str, Any], location: Location) -> list[dict[str, Any]]:
    """The warnings a dataset reader (MAD, Who&When, OTLP) kept in the run's
    ``metadata.import_warnings``, as summary warnings: every repair is counted and reported."""
    kept = (run.get("metadata") or {}).get("import_warnings")
    if not isinstance(kept, list):
        return []
    out = []
    for w in kept:
        message = w.get("message", str(w)) if isinstance(w, dict) else str(w)
        out.append({"location": str(location), "message": message, "run_id": run.get("run_id")})
    return out


def other_problems(raw: Any, location: Location, first: RunFormatError) -> list[RunFormatError]:
    """The problems of `raw` besides `first` (found by the lenient normalizer, nothing stored)."""
    import copy

    from app.ingest.lenient import normalize_lenient

    if not isinstance(raw, dict):
        return []
    try:
        _, problems = normalize_lenient(copy.deepcopy(raw), location, max_repairs=200)
    except RunFormatError as exc:
        problems = getattr(exc, "problems", [])
    except Exception:  # noqa: BLE001 - the first error is reported whatever happens here
        return []
    return [RunFormatError(location, p.message.split("; ", 1)[0], run_id=first.run_id, field=p.field)
            for p in problems if p.field != first.field][:100]


def error_item(location: Location | str, message: str, **kw: Any) -> ImportItem:
    """An ImportItem carrying a new RunFormatError."""
    err = RunFormatError(location, message, **kw)
    return ImportItem(error=err, source=str(err.where))
