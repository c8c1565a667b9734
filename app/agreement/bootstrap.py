"""Unit-level bootstrap for agreement coefficients.

Every coefficient in :mod:`app.agreement.coefficients` is a function of sums over units of
per-unit statistics.  Units with identical rows in the coded ratings matrix ("patterns") have
identical statistics, so the data are compressed to ``P`` distinct patterns with their
multiplicities, and a bootstrap replicate is represented by a weight vector over patterns:
how many times each pattern was drawn when ``n`` units were resampled with replacement.

Two equivalent ways of drawing those weights are used, whichever is cheaper:

* few patterns: ``rng.multinomial(n, counts / n)`` (the pattern counts of a resample of ``n``
  units drawn uniformly with replacement follow exactly this distribution);
* many patterns: draw ``n`` unit indices per replicate with ``rng.integers`` and count the
  patterns they fall in.

Both use the caller's seeded ``numpy.random.Generator``, so a seed gives the same interval.

Each chunk of replicates is a checkpoint (`app.core.checkpoint`): in a job, the replicates done
count as its progress and a cancelled or over-budget job stops before its next chunk; elsewhere
the checkpoint does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from app.core.checkpoint import checkpoint

__all__ = ["bootstrap_values", "percentile_ci", "replicate_weights"]

# Upper bound on the number of cells of one chunk of replicate weights (memory control).
_MAX_CELLS = 4_000_000


def replicate_weights(
    counts: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    *,
    unit_pattern: np.ndarray | None = None,
    cost_per_replicate: int = 0,
) -> Iterator[np.ndarray]:
    """Yield chunks of bootstrap weights, float arrays of shape ``(b, P)``, ``n_boot`` rows in all.

    ``counts`` holds the multiplicity of each of the ``P`` patterns (``n = counts.sum()`` units).
    ``unit_pattern`` (length ``n``, the pattern index of each unit) enables index resampling,
    which is used when it is cheaper than the multinomial draw.  ``cost_per_replicate`` is the
    size of the caller's per-replicate intermediate arrays, used only to size the chunks.
    """
    counts = np.asarray(counts, dtype=np.int64)
    n_pat = counts.shape[0]
    n = int(counts.sum())
    use_index = unit_pattern is not None and n_pat * 25 > n
    per_rep = max(n_pat, cost_per_replicate, n if use_index else 0, 1)
    chunk = int(max(1, min(n_boot, _MAX_CELLS // per_rep)))
    p = counts / n if n > 0 else counts.astype(float)
    done = 0
    while done < n_boot:
        checkpoint(0)  # a cancelled job stops before drawing the next chunk
        b = min(chunk, n_boot - done)
        if use_index:
            assert unit_pattern is not None
            idx = rng.integers(0, n, size=(b, n))
            flat = (np.arange(b)[:, None] * n_pat + unit_pattern[idx]).ravel()
            w = np.bincount(flat, minlength=b * n_pat).reshape(b, n_pat)
        else:
            w = rng.multinomial(n, p, size=b)
        yield w.astype(np.float64)
        done += b
        checkpoint(b)  # the chunk's statistic is computed: b replicates done


def bootstrap_values(
    stat: Callable[[np.ndarray], np.ndarray],
    counts: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    *,
    unit_pattern: np.ndarray | None = None,
    cost_per_replicate: int = 0,
) -> np.ndarray:
    """Return the ``n_boot`` replicate values of ``stat`` (NaN where undefined in a replicate).

    ``stat`` maps a ``(b, P)`` weight array to a ``(b,)`` array of coefficient values.
    """
    out = [
        np.asarray(stat(w), dtype=np.float64)
        for w in replicate_weights(
            counts, n_boot, rng, unit_pattern=unit_pattern, cost_per_replicate=cost_per_replicate
        )
    ]
    return np.concatenate(out) if out else np.empty(0)


def percentile_ci(values: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """Percentile interval of the finite replicate values, or None when there are none.

    Replicates in which the coefficient is undefined (e.g. a resample without variation) are
    dropped before taking the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles.
    """
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    lo, hi = np.quantile(values, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return (float(lo), float(hi))
