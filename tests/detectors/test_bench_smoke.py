"""The detectors' bench entry stays runnable (a small corpus; the full run is `make bench`)."""
from __future__ import annotations

from bench import bench_detectors


def test_bench_rows():
    rows = bench_detectors.main(n_runs=40)
    assert len(rows) == 2 + 5
    base, timed = (r.split("|") for r in rows[:2])
    assert "baseline" in base[1] and base[3].strip() == "1.00" and float(timed[3]) > 0
    assert rows[2].startswith("| detector leak -> CF1 vs seeded truth (tp ")
