"""ppi-python, the reference implementation the PPI++ estimates are compared with.

ppi-python imports numba, and numba's coverage support subclasses ``coverage.types.Tracer``
(coverage 7); the test extras hold coverage at 6.5 (irrCAC pins it), which has no
``coverage.types``. numba skips its coverage support when ``import coverage`` fails, so the
import is made with coverage hidden for its duration (coverage itself is untouched)."""
from __future__ import annotations

import sys

_saved = sys.modules.get("coverage")
sys.modules["coverage"] = None  # type: ignore[assignment]  # makes `import coverage` raise ImportError
try:
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # noqa: E402
finally:
    if _saved is None:
        del sys.modules["coverage"]
    else:
        sys.modules["coverage"] = _saved

__all__ = ["ppi_mean_ci", "ppi_mean_pointestimate"]
