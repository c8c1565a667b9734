"""Benchmark: the built-in detectors on the demo corpus (not a test).

Times every built-in detector over a synthetic demo corpus (`app.demo.generator`, seed 0) against
a baseline measured in the same process: serialising each run once to canonical JSON (one pass
over every event). Also reports each detector's precision / recall / F1 against the demo's seeded
truth (run x mode x responsible agent), the numbers quoted in docs/detectors.md. Prints markdown
rows ``| what | time / amount | ratio to baseline |``; ``main()`` returns them for ``bench/run.py``.

    python bench/bench_detectors.py            # 1,000 runs
    python bench/bench_detectors.py --quick    # 60 runs, 200 bootstrap resamples (the suite's smoke test)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.config import get_settings
from app.demo.generator import generate_corpus
from app.detectors import builtin_detectors, mode_map, run_detectors
from app.detectors.scoring import score_source
from app.ingest.canonical import canonical_json
from app.taxonomies.loader import load_taxonomy_file


def _cell(value, ci) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def main(quick: bool = False, n_runs: int | None = None) -> list[str]:
    n_runs = n_runs or (60 if quick else 1000)
    n_boot = 200 if quick else 1000
    corpus = generate_corpus(n_runs, seed=0)
    runs = [d.run for d in corpus]
    n_events = sum(len(r["events"]) for r in runs)
    mm = mode_map(load_taxonomy_file(get_settings().taxonomy_dir / "a2-failures.yaml").definition)
    detectors = builtin_detectors()

    t0 = time.perf_counter()
    for r in runs:
        canonical_json(r)
    baseline = time.perf_counter() - t0

    t0 = time.perf_counter()
    results = [run_detectors(r, detectors, mm) for r in runs]
    elapsed = time.perf_counter() - t0

    ref = {d.run["run_id"]: {(t["mode"], t["agent"]) for t in d.truth} for d in corpus}
    from bench.common import row

    rows = [row(f"{len(detectors)} built-in detectors on {n_runs} demo runs ({n_events:,} events)", f"{elapsed:.3f} s",
                f"canonical JSON of the same runs: {baseline:.3f} s", elapsed / baseline)]
    for k, det in enumerate(detectors):
        units = {r["run_id"]: (r["run_id"], {(x["mode"], x["agent"]) for x in res[k].labels})
                 for r, res in zip(runs, results)}
        sc = score_source(units, ref, [mm[det.key]], level="agent", n_boot=n_boot, seed=0)["modes"][0]
        rows.append(row(f"detector {det.name} -> {sc['mode']} vs seeded truth (tp {sc['tp']}, fp {sc['fp']}, "
                        f"fn {sc['fn']})", f"precision {_cell(sc['precision'], sc['precision_ci'])}, recall "
                        f"{_cell(sc['recall'], sc['recall_ci'])}, F1 {_cell(sc['f1'], sc['f1_ci'])}",
                        f"{n_runs} runs", None))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Benchmark the detectors (see module docstring).")
    parser.add_argument("--quick", action="store_true", help="60 runs, 200 bootstrap resamples")
    args = parser.parse_args()
    from bench.common import HEADER

    print("\n".join(HEADER))
    print("\n".join(main(quick=args.quick)))
