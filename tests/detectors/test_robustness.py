"""Every detector on every run the importers read from the test fixtures (tree releases, A2A wire
logs) and on the demo's long run: no detector raises, every label names a real agent and event."""
from __future__ import annotations

from pathlib import Path

from app.demo.generator import generate_long_run
from app.detectors import builtin_detectors, run_detectors
from app.ingest import iter_path

DATA = Path(__file__).resolve().parents[1] / "ingest" / "data"
ALL = {d.name: d.key for d in builtin_detectors()}
MODES = {k: "X" for k in ALL.values()}


def _runs():
    for p in sorted(DATA.iterdir()):
        for item in iter_path(str(p)):
            if item.run is not None:
                yield item.run
    yield generate_long_run(1500, seed=1).run


def test_no_detector_raises_on_imported_shapes():
    n = 0
    for run in _runs():
        n += 1
        agents = {a["id"] for a in run["agents"]}
        seqs = {e["seq"] for e in run["events"]}
        for res in run_detectors(run, builtin_detectors(), MODES):
            assert res.error is None, (run["run_id"], res.detector.name, res.error)
            for lab in res.labels:
                assert lab["agent"] in agents and set(lab["evidence"]) <= seqs
    assert n >= 3
