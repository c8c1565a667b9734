"""Reading a large JSON array streams: memory does not grow with the file.

Measured at two sizes, 8x apart: the peak (tracemalloc) is the reader's buffer and one record,
the same for both files and well below the larger one; a reader holding the file (or its runs)
would peak at several times the file's size, and 8x higher on the larger file. (It was one
12.5 MB file with `peak < size / 10`, four times the records to read under tracemalloc.)"""
from __future__ import annotations

import os
import tracemalloc

from app.ingest import iter_path, normalize_run, write_json_array

from .factory import small_run

SIZES = (500, 4_000)


def _peak_reading(path, n: int) -> int:
    count = 0
    last = None
    tracemalloc.start()
    try:
        for item in iter_path(path):
            count += item.run is not None
            last = item.run
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == n and last["run_id"] == f"r{n - 1}"
    return peak


def test_large_json_array_is_streamed(tmp_path):
    from app.ingest.registry import registry

    registry()  # loaded once per process (entry points, reader modules): not the streaming's memory
    peaks, sizes = [], []
    for n in SIZES:
        path = tmp_path / f"big-{n}.json"
        write_json_array((normalize_run(small_run(i)) for i in range(n)), path)
        sizes.append(os.path.getsize(path))
        peaks.append(_peak_reading(path, n))
    assert sizes[1] > 2_000_000 and sizes[1] > 7 * sizes[0]
    assert peaks[1] < sizes[1] / 2, (peaks, sizes)
    assert peaks[1] < 1.25 * peaks[0] + 64 * 1024, (peaks, sizes)  # flat: not growing with the file
