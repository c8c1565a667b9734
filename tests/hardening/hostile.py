"""Hostile inputs (generated here), shared by the parser, CLI and live-server tests."""
from __future__ import annotations

import io
import json
import zipfile


def run(rid: str, n_events: int = 2, **extra) -> dict:
    """A small valid canonical run."""
    r = {"run_id": rid, "scenario": {"id": "sc-h", "family": "hardening"},
         "principals": [{"id": "p1"}], "agents": [{"id": "a1", "principal": "p1"}],
         "events": [{"seq": i, "kind": "message", "actor": "a1", "content": f"hello {i}"} for i in range(n_events)]}
    r.update(extra)
    return r


def long_int_object(digits: int = 4301) -> bytes:
    """One pretty-printed run whose metadata holds an integer of `digits` digits: the first line
    is not JSON by itself, so format sniffing reads the top-level keys (where ijson crashed)."""
    text = json.dumps(run("long-int"), indent=1)  # metadata first: read before run_id is seen
    return b'{\n "metadata": {"n": 1' + b"0" * (digits - 1) + b"},\n" + text[2:].encode()


def deep(levels: int, key: str = "a") -> bytes:
    return (f'{{"{key}":' * levels).encode() + b"1" + b"}" * levels


def deep_run_jsonl_line(levels: int = 20_000) -> bytes:
    r = json.dumps(run("deep-line"))
    return r[:-1].encode() + b', "metadata": ' + deep(levels) + b"}"


def deep_array(levels: int = 20_000) -> bytes:
    """A top-level array holding one very deep element (40 KB for 20k levels)."""
    return b"[" + b"[" * levels + b"]" * levels + b"]"


def nested_zip(levels: int) -> bytes:
    data = b"\n".join(json.dumps(run(f"zip-{levels}")).encode() for _ in range(1))
    inner = _zip({"runs.jsonl": data})
    for i in range(levels):
        inner = _zip({f"level{i}.zip": inner})
    return inner


def many_members(n: int) -> bytes:
    return _zip({f"f{i}.txt": b"x" for i in range(n)})


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def zip_bomb(mb: int) -> bytes:
    """A zip of one member of `mb` MiB of zeros (compresses ~1000:1)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z, z.open("zeros.jsonl", "w") as f:
        chunk = b"0" * (1 << 20)
        for _ in range(mb):
            f.write(chunk)
    return buf.getvalue()
