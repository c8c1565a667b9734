"""Import: source formats -> the canonical run record -> the database, through one loader.

Layout:

* the canonical record (`app.ingest.canonical`: `normalize_run`, `content_hash`, `RunFormatError`),
  what readers yield (`app.ingest.items`: `ImportItem`, `ReadSummary`), the loader
  (`app.ingest.loader`, the one path into the database) and the writers (`app.ingest.writers`);
* the readers, one module per source format, in `app.ingest.readers` (the interface:
  `app.ingest.readers.base`); the registry that finds them, built-ins and users' plugins alike,
  through the entry point group ``a2annotate.readers`` (`app.ingest.registry`);
* detection and the entry points `detect_format(path)`, `iter_path(path, format=None, ...)`,
  `iter_bytes(data, filename, content_type)` (`app.ingest.detect`, asking the registry);
* the parsing safety layer (input limits, bounded JSON and YAML) in `app.ingest.safety`;
* import profiles for directory trees (`app.ingest.profile`, built-ins in app/ingest/profiles/,
  read by `app.ingest.profiled`), the lenient normalizer (`app.ingest.lenient`) and the
  inspector (`app.ingest.inspect`, backing `a2annotate inspect`).
"""
from app.ingest.canonical import Location, RunFormatError, content_hash, normalize_run
from app.ingest.detect import detect_format, iter_bytes, iter_path
from app.ingest.items import ImportItem, ReadSummary
from app.ingest.writers import write_files, write_json_array, write_jsonl, write_tree, write_wire

__all__ = [
    "ImportItem", "Location", "ReadSummary", "RunFormatError", "content_hash", "detect_format", "iter_bytes",
    "iter_path", "normalize_run", "write_files", "write_json_array", "write_jsonl", "write_tree", "write_wire",
]
