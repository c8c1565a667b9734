"""The benchmarks stay runnable: every section in quick mode (tiny sizes, one repetition).

No timing is asserted: only that every row is a well-formed table row with a ratio."""

from __future__ import annotations

from bench import run


def test_bench_quick_mode_runs_every_section(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DIR", str(tmp_path))
    monkeypatch.setenv("BENCH_REPEAT", "1")
    text = run.run(quick=True, out_path=tmp_path / "RESULTS.md")
    assert (tmp_path / "RESULTS.md").read_text() == text
    for title, _ in run.SECTIONS:
        assert f"## {title}" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| work")]
    assert len(rows) >= 15
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 6, line
        if cells[3]:
            assert float(cells[3]) > 0, line
