"""`make bench-scale` stays runnable: bench/bench_scale.py at a toy size (SQLite, 10 runs, two app
processes and a worker on the machine's Redis, 0.4 s load phases).

No timing is asserted: only that every row is a well-formed table row, the other app process
served the stored agreement and report without recomputing, no label save was lost, and the
"## Scale" section replaces itself in RESULTS.md and survives `bench.run` rewriting the file."""
from __future__ import annotations

import redis

from bench import bench_scale, run


def _measured(n: int, seconds: float) -> dict:
    phase = bench_scale.Phase(ok=int(100 * seconds), seconds=seconds)
    return {"backend": "postgresql", "n": n, "cli": seconds, "rest": seconds, "raw": 1.0, "export": 2 * seconds,
            "export_base": 1.0, "agree_job": seconds, "agree_base": 1.0, "report_job": None, "report_base": 1.0,
            "export_rss": 200.0 * seconds, "alone": phase, "health": phase}


def test_growth_rows_judge_linearity():
    rows = bench_scale.growth_rows(_measured(100, 1.0), _measured(1000, 12.0))
    assert all("100 -> 1,000 runs (x10 data; linear: at most 11x)" in r for r in rows), rows
    cli = next(r for r in rows if "CLI import grows" in r)
    assert "| x12.0 | baseline x1.0 | 12.00 | at most 11x | **no** |" in cli, cli
    assert not any("outcome report job" in r for r in rows)  # not measured at one size: no row
    rss = next(r for r in rows if "peak RSS" in r)
    assert "| 12.00 | at most 1.2x | **no** |" in rss, rss
    rows = bench_scale.growth_rows(_measured(100, 1.0), _measured(1000, 10.5))
    assert "| 10.50 | at most 11x | yes |" in next(r for r in rows if "CLI import grows" in r)


def test_bench_scale_quick(tmp_path, monkeypatch):
    redis.Redis.from_url(bench_scale.REDIS).ping()  # a clear failure when Redis is not running
    monkeypatch.setenv("BENCH_SCALE_DIR", str(tmp_path))
    monkeypatch.setenv("UPLOAD_DIR", str(tmp_path / "uploads"))
    rows = bench_scale.main(quick=True)
    assert not [r for r in rows if "not measured" in r], rows
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 6, line
        if cells[3]:
            assert float(cells[3]) > 0, line
    assert len(rows) == 12 and all("SQLite, 10 runs" in r for r in rows), rows
    cached = [r for r in rows if "OTHER app process" in r]
    assert len(cached) == 2 and all("yes (no recompute" in r for r in cached), cached
    saves = next(r for r in rows if "clients saving labels" in r)
    assert "0 errors; 0 lost |" in saves, saves
    assert sum("labels/s while" in r for r in rows) == 3

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Import\n\nold\n\n## Notes: x\n\nnotes\n")
    bench_scale.write_section(bench_scale.section(rows), results)
    bench_scale.write_section(bench_scale.section(rows[:2]), results)  # replaced, not added
    text = results.read_text()
    assert text.count("## Scale") == 1 and text.index("## Import") < text.index("## Scale") < text.index("## Notes")
    assert rows[1] in text and rows[2] not in text
    assert run.kept_sections(results).startswith("## Scale") and rows[1] in run.kept_sections(results)
    run.run(quick=True, out_path=results, only=["bench_coefficients"])  # `make bench` rewrites the file
    text = results.read_text()
    assert "## Coefficients" in text and "## Import" not in text
    assert text.count("## Scale") == 1 and rows[1] in text
