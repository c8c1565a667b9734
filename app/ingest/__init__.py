"""Import parsing (pure, no database) and writers for the three input shapes.

Public API:

* `normalize_run(obj, location) -> dict`, `content_hash(run) -> str`, `RunFormatError`
  (app.ingest.canonical);
* `ImportItem`, `ReadSummary` (app.ingest.items);
* `detect_format(path)`, `iter_path(path, format=None, mapping=None)`,
  `iter_bytes(data, filename, content_type)` (app.ingest.detect);
* writers `write_json_array`, `write_jsonl`, `write_files`, `write_tree`, `write_wire`
  (app.ingest.writers).

Directory trees are read leniently (app.ingest.lenient) through an import profile
(app.ingest.profile: `load_profile`, built-in profiles in app/ingest/profiles/); `iter_path(...,
profile=...)` takes one, else the profile app.ingest.inspect infers is used (`inspect_tree`,
`infer_profile`, `render`, `profile_text` back `a2annotate inspect`).

The database loader lives in app.ingest.loader.
"""
from app.ingest.canonical import Location, RunFormatError, content_hash, normalize_run
from app.ingest.detect import detect_format, iter_bytes, iter_path
from app.ingest.items import ImportItem, ReadSummary
from app.ingest.writers import write_files, write_json_array, write_jsonl, write_tree, write_wire

__all__ = [
    "ImportItem", "Location", "ReadSummary", "RunFormatError", "content_hash", "detect_format", "iter_bytes",
    "iter_path", "normalize_run", "write_files", "write_json_array", "write_jsonl", "write_tree", "write_wire",
]
