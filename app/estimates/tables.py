"""The estimates table as CSV or Parquet bytes (pandas / pyarrow), for the API, the CLI and the page."""
from __future__ import annotations

import io
from typing import Any

import pandas as pd

from app.estimates.service import ROW_COLUMNS

MEDIA = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


def rows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a frame with the columns of :data:`ROW_COLUMNS`, in that order."""
    frame = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    for c in ("rate", "ci_low", "ci_high", "lam", "n_effective"):
        frame[c] = frame[c].astype("float64")
    return frame


def table_bytes(rows: list[dict[str, Any]], fmt: str) -> tuple[bytes, str]:
    """Returns (bytes, media type) of the rows as ``csv`` or ``parquet``."""
    frame = rows_frame(rows)
    buf = io.BytesIO()
    if fmt == "csv":
        frame.to_csv(buf, index=False)
    elif fmt == "parquet":
        frame.to_parquet(buf, index=False)
    else:
        raise ValueError(f"unknown table format {fmt!r}")
    return buf.getvalue(), MEDIA[fmt]
