"""The detectors' bench entry stays runnable (a small corpus; the full run is `make bench`)."""
from __future__ import annotations

from bench import bench_detectors


def test_bench_rows():
    rows = bench_detectors.main(n_runs=40)
    assert len(rows) == 1 + 5
    timed = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(timed) == 6 and "canonical JSON" in timed[2] and float(timed[3]) > 0
    assert rows[1].startswith("| detector leak -> CF1 vs seeded truth (tp ")
