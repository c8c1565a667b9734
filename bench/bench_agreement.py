"""Benchmark: agreement_report on synthetic labels (not a test).

Times :func:`app.agreement.units.agreement_report` on 2,500 runs x 20 modes x 3 annotators with
1,000 bootstrap resamples, against a baseline measured in the same process: one plain
``krippendorff.alpha`` call (nominal, no bootstrap) on the pooled run x mode matrix.
Prints markdown table rows ``| what | time | ratio to baseline |`` (``main()`` returns them,
for ``bench/run.py``).

    python bench/bench_agreement.py            # full size
    python bench/bench_agreement.py --quick    # 250 runs, 100 resamples
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.agreement.units import agreement_report, build_matrices

CATEGORIES = ("DD", "GR", "VF", "CF")


def synthetic(n_runs: int, n_modes: int = 20, n_annotators: int = 3, seed: int = 0):
    """Synthetic labels: a latent truth per run x mode (prevalence 3-20 %), each annotator
    flips it with probability 8 %, 95 % of (annotator, run) pairs submitted, 2 agents per run."""
    rng = np.random.default_rng(seed)
    modes = [f"{CATEGORIES[i * len(CATEGORIES) // n_modes]}{i % 5 + 1}" for i in range(n_modes)]
    mode_category = {m: m[:2] for m in modes}
    runs = [f"run-{i:05d}" for i in range(n_runs)]
    annotators = [f"ann{a}" for a in range(n_annotators)]
    prevalence = rng.uniform(0.03, 0.2, n_modes)
    truth = rng.random((n_runs, n_modes)) < prevalence
    blame = rng.integers(0, 2, (n_runs, n_modes))
    subs, rows = [], []
    for a, ann in enumerate(annotators):
        submitted = rng.random(n_runs) < 0.95
        flips = rng.random((n_runs, n_modes)) < 0.08
        marked = truth ^ flips
        wrong_agent = rng.random((n_runs, n_modes)) < 0.1
        for r in np.nonzero(submitted)[0]:
            subs.append((ann, runs[r]))
            for j in np.nonzero(marked[r])[0]:
                agent = int(blame[r, j] ^ wrong_agent[r, j])
                rows.append(
                    (
                        ann,
                        runs[r],
                        modes[j],
                        mode_category[modes[j]],
                        f"agent-{agent}",
                        [int(j), int(j) + 1 + a % 2],
                    )
                )
    labels = pd.DataFrame(rows, columns=["annotator", "run_id", "mode", "category", "agent", "evidence"])
    submissions = pd.DataFrame(subs, columns=["annotator", "run_id"])
    agents = pd.DataFrame([(r, f"agent-{k}") for r in runs for k in range(2)], columns=["run_id", "agent_id"])
    return labels, submissions, modes, mode_category, agents


def main(quick: bool = False) -> list[str]:
    """Run the benchmark; return markdown rows ``| what | time | ratio to baseline |``.

    The same row format as the other benchmarks, for ``bench/run.py`` (``make bench``).
    """
    n_runs, n_boot = (250, 100) if quick else (2500, 1000)
    labels, submissions, modes, mode_category, agents = synthetic(n_runs)

    t0 = time.perf_counter()
    mx = build_matrices(labels, submissions, modes, mode_category)
    pooled = mx.presence.reshape(-1, mx.presence.shape[2]).T.astype(float)
    pooled[pooled < 0] = np.nan
    krippendorff.alpha(reliability_data=pooled, level_of_measurement="nominal")
    baseline = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = agreement_report(labels, submissions, modes, mode_category, agents, n_boot=n_boot, seed=0)
    elapsed = time.perf_counter() - t0
    assert report["overall"]["krippendorff_alpha"]["value"] is not None

    size = f"{n_runs} runs x {len(modes)} modes x 3 annotators"
    return [
        f"| one krippendorff.alpha, pooled {size}, no bootstrap (baseline) | {baseline:.3f} s | 1.00 |",
        f"| agreement_report {size}, {n_boot} resamples | {elapsed:.2f} s | {elapsed / baseline:.2f} |",
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Benchmark agreement_report (see module docstring).")
    parser.add_argument("--quick", action="store_true", help="250 runs and 100 resamples")
    args = parser.parse_args()
    print("| what | time / amount | ratio to baseline |")
    print("|---|---|---|")
    print("\n".join(main(quick=args.quick)))
