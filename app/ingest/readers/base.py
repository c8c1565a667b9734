"""The reader interface. Every source format is one reader; built-in readers and users' readers
(entry point group ``a2annotate.readers``) are registered alike, and `import`, `inspect`, the
REST upload and the OTLP endpoint all ask the same registry which reader takes a path.

A reader:

* `name`: what ``--format`` takes (``"tau-bench"``, ``"openai-agents"``, ...);
* `sniff(path)`: how sure it is that it can read `path` (a file or, when `reads_dirs`, a
  directory), as a `Sniff` with a score in [0, 1] and a one-line reason; it reads as little as it
  can (the start of the file, a few keys) and never raises for input it does not know;
* `read(path, shown)`: the runs in `path` as `ImportItem`s (a normalized run with its warnings,
  or the error that rejected one run), `shown` being the name used in error locations.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from app.ingest.items import ImportItem

#: the entry point group through which readers are found (built-ins included)
ENTRY_POINT_GROUP = "a2annotate.readers"


@dataclass(frozen=True)
class Sniff:
    """A reader's answer to "can you read this?": `score` 0 (no) to 1 (certain), and why."""

    score: float
    reason: str = ""

    def __bool__(self) -> bool:
        return self.score > 0


NO = Sniff(0.0, "not this reader's shape")


class Reader:
    """Base class of readers (subclassing is optional: any object with these attributes works)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: whether `sniff`/`read` take a directory as one whole (else files only)
    reads_dirs: ClassVar[bool] = False

    def sniff(self, path: Path) -> Sniff:  # pragma: no cover - interface
        raise NotImplementedError

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:  # pragma: no cover - interface
        raise NotImplementedError
