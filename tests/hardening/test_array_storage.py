"""A JSON array holding an integer beyond 2^63-1 imports like the same runs as JSON Lines, on
both backends (ijson stopped reading the array at that run, uncounted)."""
from __future__ import annotations

import json

from app.ingest.loader import import_paths
from tests.hardening import hostile


def test_big_integer_in_an_array_imports_the_same_as_jsonl(engine, tmp_path):
    runs = [hostile.run("big-a"), hostile.run("big-b", metadata={"n": 2**70, "m": -(2**64)}), hostile.run("big-c")]
    arr = tmp_path / "runs.json"
    arr.write_text(json.dumps(runs))
    s1 = import_paths(engine, [str(arr)])
    assert (s1.imported, s1.rejected) == (3, 0), s1.errors
    jl = tmp_path / "runs.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in runs))
    s2 = import_paths(engine, [str(jl)])
    assert (s2.imported, s2.unchanged, s2.rejected) == (0, 3, 0), s2.errors
    bad_seq = tmp_path / "seq.json"  # beyond what the seq column holds: that run rejected, naming the field
    bad = hostile.run("big-d")
    bad["events"][0]["hop"] = 2**63
    bad_seq.write_text(json.dumps([bad, hostile.run("big-e")]))
    s3 = import_paths(engine, [str(bad_seq)])
    assert (s3.imported, s3.rejected) == (1, 1)
    assert "field events[0].hop" in s3.errors[0]["location"]
