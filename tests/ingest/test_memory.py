"""Reading a large JSON array streams: memory does not grow with the file."""
from __future__ import annotations

import os
import tracemalloc

from app.ingest import iter_path, normalize_run, write_json_array

from .factory import small_run

N = 20_000


def test_large_json_array_is_streamed(tmp_path):
    path = tmp_path / "big.json"
    write_json_array((normalize_run(small_run(i)) for i in range(N)), path)
    size = os.path.getsize(path)
    assert size > 10_000_000
    count = 0
    last = None
    from app.ingest.registry import registry

    registry()  # loaded once per process (entry points, reader modules): not the streaming's memory
    tracemalloc.start()
    try:
        for item in iter_path(path):
            count += item.run is not None
            last = item.run
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == N and last["run_id"] == f"r{N - 1}"
    assert peak < size / 10, (peak, size)
