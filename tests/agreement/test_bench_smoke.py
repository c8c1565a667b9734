"""The benchmark stays runnable (quick mode only; the full run is not a test)."""

from __future__ import annotations

from bench import bench_agreement


def test_bench_quick_returns_markdown_rows():
    rows = bench_agreement.main(quick=True)
    assert len(rows) == 2
    base, report = (r.split("|") for r in rows)
    assert "baseline" in base[1] and base[3].strip() == "1.00"
    assert report[1].strip().startswith("agreement_report 250 runs")
    assert float(report[2].split()[0]) > 0 and float(report[3]) > 0
