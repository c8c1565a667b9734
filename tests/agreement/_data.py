"""Seeded random ratings for the cross-checks (shared by the test modules)."""

from __future__ import annotations

import numpy as np

# (n_units, n_raters, values, share missing)
SHAPES = [
    (30, 2, (1, 2, 3), 0.0),
    (60, 3, (1, 2, 4, 7), 0.15),
    (45, 5, (0, 1), 0.25),
    (80, 4, (1, 3, 4, 6, 10), 0.3),
    (25, 7, (2, 5, 6), 0.1),
]


def random_ratings(
    seed: int, n_units: int, n_raters: int, values: tuple, p_missing: float, agreement: float = 0.6
) -> list[list]:
    """Ratings with real agreement: each rater copies a latent value with prob. ``agreement``."""
    rng = np.random.default_rng(seed)
    latent = rng.choice(values, size=n_units)
    out = []
    for u in range(n_units):
        row = []
        for _ in range(n_raters):
            if rng.random() < p_missing:
                row.append(None)
            elif rng.random() < agreement:
                row.append(int(latent[u]))
            else:
                row.append(int(rng.choice(values)))
        out.append(row)
    return out


def to_float_matrix(ratings: list[list]) -> np.ndarray:
    """units x raters float array with NaN for missing."""
    return np.array([[np.nan if x is None else float(x) for x in row] for row in ratings])
