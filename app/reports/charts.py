"""Server-side SVG charts for the reports: no JavaScript, no external assets, no ids.

Every function returns one standalone ``<svg>`` element as a string that can be inlined in
HTML or served as ``image/svg+xml``.  All text is escaped with :func:`html.escape`; each chart
has ``role="img"``, an ``aria-label``, a ``<title>`` and a ``<desc>`` that spells out the data,
and a ``<title>`` tooltip on every mark.  Size follows the content (number of rows, label
lengths).  Output is a pure function of the arguments (no randomness, no element ids, so
several charts can share one page).  Missing values (None or NaN) are drawn as "n/a" / "–".
"""

from __future__ import annotations

import html
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PALETTE", "bar_chart", "dumbbell_chart", "forest_plot", "heatmap"]

#: Okabe-Ito colour-blind-safe palette, darkest first.
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#000000",
)
_FONT = 12
_CHAR_W = 7.0  # approximate advance of one character at 12px sans-serif
_MAX_LABEL = 40
_TEXT = "#222222"
_GRID = "#d0d0d0"
_MISSING_FILL = "#d9d9d9"
_SEQUENTIAL = ("#f7fbff", "#08306b")
_DIVERGING = ("#b2182b", "#f7f7f7", "#2166ac")


# --------------------------------------------------------------------------------------------
# helpers


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _label(value: Any) -> str:
    return "(none)" if value is None else str(value)


def _short(text: str, limit: int = _MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_w(text: str) -> float:
    return len(text) * _CHAR_W


def _n(x: float) -> str:
    """Format a coordinate deterministically."""
    return f"{x:.1f}".removesuffix(".0")


def _value(v: Any, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{where}: expected a number or None, got {v!r}")
    f = float(v)
    if math.isnan(f):
        return None
    if math.isinf(f):
        raise ValueError(f"{where}: infinite value")
    return f


def _fmt(fmt: str, v: float | None) -> str:
    if v is None:
        return "n/a"
    try:
        return fmt.format(v)
    except (ValueError, IndexError, KeyError) as exc:
        raise ValueError(f"value_format {fmt!r} cannot format {v!r}: {exc}") from exc


def _check_title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise ValueError("title: a chart needs a non-empty title (it is its accessible name)")
    return title


def _svg(width: float, height: float, title: str, desc: str, body: list[str]) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" height="{_n(height)}" '
        f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{_esc(title)}" '
        f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="{_FONT}">'
    )
    return (
        "\n".join(
            [
                head,
                f"<title>{_esc(title)}</title>",
                f"<desc>{_esc(desc)}</desc>",
                '<rect width="100%" height="100%" fill="#ffffff"/>',
                *body,
                "</svg>",
            ]
        )
        + "\n"
    )


def _title_text(title: str) -> str:
    return f'<text x="10" y="22" font-size="15" font-weight="bold" fill="{_TEXT}">{_esc(title)}</text>'


def _empty(title: str, description: str | None) -> str:
    desc = (description + " " if description else "") + "No data."
    body = [_title_text(title), f'<text x="10" y="52" fill="{_TEXT}">No data</text>']
    return _svg(max(200.0, 20 + _text_w(title) * 1.25), 70, title, desc, body)


def _domain(values: list[float], lo: float, hi: float) -> tuple[float, float]:
    lo = min([lo, *values])
    hi = max([hi, *values])
    if hi == lo:
        hi = lo + 1.0
    return lo, hi


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def _nice_ticks(lo: float, hi: float, target: int = 4) -> list[float]:
    """Axis ticks at a round step (1, 2, 2.5 or 5 x 10^k) covering lo..hi in about ``target``
    intervals; the first and last tick are the axis ends."""
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw * (1 - 1e-9))
    start = math.floor(lo / step + 1e-9) * step
    count = math.ceil((hi - start) / step - 1e-9)
    return [start + i * step for i in range(count + 1)]


def _hex(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _mix(c1: str, c2: str, t: float) -> str:
    a, b = _hex(c1), _hex(c2)
    return "#" + "".join(f"{math.floor(x + (y - x) * t + 0.5):02x}" for x, y in zip(a, b))  # half-up


def _luminance(color: str) -> float:
    def lin(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = _hex(color)
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def _ink(fill: str) -> str:
    """Text colour with the better WCAG contrast on ``fill``."""
    lum = _luminance(fill)
    return "#ffffff" if (1.05 / (lum + 0.05)) > ((lum + 0.05) / 0.05) else "#000000"


def _series_list(
    series: Mapping[str, Sequence[Any]] | Sequence[tuple[str, Sequence[Any]]],
) -> list[tuple[str, list]]:
    items = list(series.items()) if isinstance(series, Mapping) else list(series)
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) != 2:
            raise ValueError(f"series[{i}]: expected a (name, values) pair")
        out.append((str(item[0]), list(item[1])))
    return out


# --------------------------------------------------------------------------------------------
# charts


def bar_chart(
    categories: Sequence[Any],
    series: Mapping[str, Sequence[float | None]] | Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    description: str | None = None,
    value_format: str = "{:.0%}",
    max_value: float | None = None,
    axis_label: str | None = None,
) -> str:
    """Return a grouped horizontal bar chart as an SVG string.

    ``categories`` label the groups (rows, top to bottom); ``series`` maps each series name to
    one value per category (e.g. categories = models, series = modes, values = prevalence).
    The value axis spans 0 .. max(values, ``max_value``) (negative values extend it leftwards).
    Missing values draw no bar and the label "n/a".  Each bar carries its value as text.
    """
    title = _check_title(title)
    cats = [_label(c) for c in categories]
    sers = _series_list(series)
    vals: list[list[float | None]] = []
    for name, values in sers:
        if len(values) != len(cats):
            raise ValueError(f"series {name!r}: {len(values)} values for {len(cats)} categories")
        vals.append([_value(v, f"series {name!r} value {j}") for j, v in enumerate(values)])
    if not cats or not sers:
        return _empty(title, description)

    present = [v for row in vals for v in row if v is not None]
    hi0 = 0.0 if max_value is None else float(max_value)
    lo, hi = _domain(present, 0.0, hi0)
    if not present and max_value is None:
        hi = 1.0
    ticks = _nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]

    bar_h, bar_gap, group_gap = 14.0, 2.0, 12.0
    label_w = max(_text_w(_short(c)) for c in cats) + 12
    plot_w = 360.0
    value_w = max(_text_w(_fmt(value_format, v)) for row in vals for v in row) + 10
    legend_items = [(name, PALETTE[i % len(PALETTE)]) for i, (name, _) in enumerate(sers)]
    legend_w = sum(18 + _text_w(_short(n, 30)) + 14 for n, _ in legend_items)
    x0 = 10 + label_w
    width = max(x0 + plot_w + value_w + 10, 20 + legend_w, 20 + _text_w(title) * 1.25)
    legend_y = 44.0
    top = legend_y + 20
    group_h = len(sers) * (bar_h + bar_gap) - bar_gap
    plot_h = len(cats) * (group_h + group_gap)
    axis_y = top + plot_h
    height = axis_y + 34 + (16 if axis_label else 0)

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    body = [_title_text(title)]
    lx = 10.0
    for name, color in legend_items:
        body.append(f'<rect x="{_n(lx)}" y="{_n(legend_y - 10)}" width="12" height="12" fill="{color}"/>')
        body.append(
            f'<text x="{_n(lx + 18)}" y="{_n(legend_y)}" fill="{_TEXT}">{_esc(_short(name, 30))}</text>'
        )
        lx += 18 + _text_w(_short(name, 30)) + 14
    for t in ticks:
        body.append(
            f'<line x1="{_n(x(t))}" y1="{_n(top - 4)}" x2="{_n(x(t))}" y2="{_n(axis_y)}" stroke="{_GRID}"/>'
        )
        body.append(
            f'<text x="{_n(x(t))}" y="{_n(axis_y + 16)}" text-anchor="middle" fill="{_TEXT}">'
            f"{_esc(_fmt(value_format, t))}</text>"
        )
    if axis_label:
        body.append(
            f'<text x="{_n(x0 + plot_w / 2)}" y="{_n(axis_y + 32)}" text-anchor="middle" '
            f'fill="{_TEXT}">{_esc(axis_label)}</text>'
        )
    zero = x(0.0)
    desc_parts = []
    for i, cat in enumerate(cats):
        gy = top + i * (group_h + group_gap)
        body.append(
            f'<text x="{_n(x0 - 8)}" y="{_n(gy + group_h / 2 + 4)}" text-anchor="end" fill="{_TEXT}">'
            f"<title>{_esc(cat)}</title>{_esc(_short(cat))}</text>"
        )
        cells = []
        for s, (name, _) in enumerate(sers):
            v = vals[s][i]
            by = gy + s * (bar_h + bar_gap)
            text = _fmt(value_format, v)
            cells.append(f"{name} {text}")
            tip = f"{cat}, {name}: {text}"
            if v is not None:
                left, right = min(zero, x(v)), max(zero, x(v))
                body.append(
                    f'<rect x="{_n(left)}" y="{_n(by)}" width="{_n(max(right - left, 0.0))}" '
                    f'height="{_n(bar_h)}" fill="{PALETTE[s % len(PALETTE)]}">'
                    f"<title>{_esc(tip)}</title></rect>"
                )
                tx, anchor = (right + 4, "start") if v >= 0 else (left - 4, "end")
            else:
                tx, anchor = zero + 4, "start"
            body.append(
                f'<text x="{_n(tx)}" y="{_n(by + bar_h - 3)}" text-anchor="{anchor}" font-size="11" '
                f'fill="{_TEXT}">{_esc(text)}</text>'
            )
        desc_parts.append(f"{cat}: " + ", ".join(cells))
    body.append(
        f'<line x1="{_n(zero)}" y1="{_n(top - 4)}" x2="{_n(zero)}" y2="{_n(axis_y)}" stroke="#555555"/>'
    )
    desc = (
        (description + " " if description else "")
        + "Grouped horizontal bar chart. "
        + "; ".join(desc_parts)
        + "."
    )
    return _svg(width, height, title, desc, body)


def dumbbell_chart(
    groups: Sequence[Any],
    first: Sequence[float | None],
    second: Sequence[float | None],
    *,
    title: str,
    first_label: str = "aggregate success",
    second_label: str = "principal success",
    description: str | None = None,
    value_format: str = "{:.0%}",
    domain: tuple[float, float] = (0.0, 1.0),
) -> str:
    """Return a dumbbell chart as an SVG string: per group (row), a circle at ``first`` and a
    square at ``second`` joined by a line, e.g. aggregate success vs the agent's own principal's
    success.  Both values are also printed in two columns at the right.  The axis covers
    ``domain`` widened to include every value.  A missing value draws no mark and prints "n/a".
    """
    title = _check_title(title)
    names = [_label(g) for g in groups]
    if len(first) != len(names) or len(second) != len(names):
        raise ValueError(
            f"first has {len(first)} and second has {len(second)} values for {len(names)} groups"
        )
    a = [_value(v, f"first value {i}") for i, v in enumerate(first)]
    b = [_value(v, f"second value {i}") for i, v in enumerate(second)]
    if not names:
        return _empty(title, description)
    lo, hi = _domain([v for v in a + b if v is not None], float(domain[0]), float(domain[1]))
    ticks = _nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]

    row_h = 26.0
    label_w = max(_text_w(_short(n)) for n in names) + 12
    plot_w = 320.0
    col_w = max(max(_text_w(_fmt(value_format, v)) for v in a + b), _text_w("n/a")) + 14
    heads = (_short(first_label, 24), _short(second_label, 24))
    col_w = max(col_w, _text_w(heads[0]) / 2 + 8, _text_w(heads[1]) / 2 + 8)
    x0 = 10 + label_w
    legend_y = 44.0
    top = legend_y + 30
    axis_y = top + len(names) * row_h
    legend_w = 36 + _text_w(heads[0]) + 36 + _text_w(heads[1])
    width = max(x0 + plot_w + 2 * col_w + 20, 20 + legend_w, 20 + _text_w(title) * 1.25)
    height = axis_y + 30
    c1, c2 = PALETTE[0], PALETTE[5]

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    body = [_title_text(title)]
    body.append(f'<circle cx="16" cy="{_n(legend_y - 4)}" r="6" fill="{c1}"/>')
    body.append(f'<text x="28" y="{_n(legend_y)}" fill="{_TEXT}">{_esc(heads[0])}</text>')
    lx = 28 + _text_w(heads[0]) + 20
    body.append(f'<rect x="{_n(lx - 6)}" y="{_n(legend_y - 10)}" width="12" height="12" fill="{c2}"/>')
    body.append(f'<text x="{_n(lx + 12)}" y="{_n(legend_y)}" fill="{_TEXT}">{_esc(heads[1])}</text>')
    col1 = x0 + plot_w + 10 + col_w / 2
    col2 = col1 + col_w
    # column heads: the legend symbols above the two value columns
    body.append(
        f'<circle cx="{_n(col1)}" cy="{_n(top - 12)}" r="5" fill="{c1}"><title>{_esc(first_label)}</title></circle>'
    )
    body.append(
        f'<rect x="{_n(col2 - 5)}" y="{_n(top - 17)}" width="10" height="10" fill="{c2}">'
        f"<title>{_esc(second_label)}</title></rect>"
    )
    for t in ticks:
        body.append(
            f'<line x1="{_n(x(t))}" y1="{_n(top - 4)}" x2="{_n(x(t))}" y2="{_n(axis_y)}" stroke="{_GRID}"/>'
        )
        body.append(
            f'<text x="{_n(x(t))}" y="{_n(axis_y + 16)}" text-anchor="middle" fill="{_TEXT}">'
            f"{_esc(_fmt(value_format, t))}</text>"
        )
    desc_parts = []
    for i, name in enumerate(names):
        cy = top + i * row_h + row_h / 2
        ta, tb = _fmt(value_format, a[i]), _fmt(value_format, b[i])
        desc_parts.append(f"{name}: {first_label} {ta}, {second_label} {tb}")
        body.append(
            f'<text x="{_n(x0 - 8)}" y="{_n(cy + 4)}" text-anchor="end" fill="{_TEXT}">'
            f"<title>{_esc(name)}</title>{_esc(_short(name))}</text>"
        )
        if a[i] is not None and b[i] is not None:
            body.append(
                f'<line x1="{_n(x(a[i]))}" y1="{_n(cy)}" x2="{_n(x(b[i]))}" y2="{_n(cy)}" '
                f'stroke="#888888" stroke-width="3"/>'
            )
        if a[i] is not None:
            body.append(
                f'<circle cx="{_n(x(a[i]))}" cy="{_n(cy)}" r="7" fill="{c1}">'
                f"<title>{_esc(f'{name}, {first_label}: {ta}')}</title></circle>"
            )
        if b[i] is not None:
            body.append(
                f'<rect x="{_n(x(b[i]) - 4.5)}" y="{_n(cy - 4.5)}" width="9" height="9" fill="{c2}">'
                f"<title>{_esc(f'{name}, {second_label}: {tb}')}</title></rect>"
            )
        body.append(
            f'<text x="{_n(col1)}" y="{_n(cy + 4)}" text-anchor="middle" fill="{_TEXT}">{_esc(ta)}</text>'
        )
        body.append(
            f'<text x="{_n(col2)}" y="{_n(cy + 4)}" text-anchor="middle" fill="{_TEXT}">{_esc(tb)}</text>'
        )
    desc = (description + " " if description else "") + "Dumbbell chart. " + "; ".join(desc_parts) + "."
    return _svg(width, height, title, desc, body)


def heatmap(
    row_labels: Sequence[Any],
    col_labels: Sequence[Any],
    values: Sequence[Sequence[float | None]],
    *,
    title: str,
    description: str | None = None,
    row_title: str | None = None,
    col_title: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    value_format: str = "{:.2f}",
    scale: str | None = None,
) -> str:
    """Return a heatmap as an SVG string (e.g. a cross-play matrix or a pairwise kappa matrix).

    ``values[i][j]`` is the cell of row i and column j; None / NaN cells are grey with "–".
    Every cell shows its value.  The colour scale spans ``vmin`` .. ``vmax`` (default: the data
    range); ``scale`` is ``"sequential"`` (light -> dark blue) or ``"diverging"`` (red - white -
    blue, centred on 0, symmetric when the range is taken from the data); by default diverging
    when the range crosses 0.  A legend of five swatches (plus "no data" when needed) is drawn
    under the matrix.
    """
    title = _check_title(title)
    rows = [_label(r) for r in row_labels]
    cols = [_label(c) for c in col_labels]
    if len(values) != len(rows):
        raise ValueError(f"values has {len(values)} rows for {len(rows)} row labels")
    grid: list[list[float | None]] = []
    for i, row in enumerate(values):
        if len(row) != len(cols):
            raise ValueError(f"values row {i} has {len(row)} cells for {len(cols)} column labels")
        grid.append([_value(v, f"values[{i}][{j}]") for j, v in enumerate(row)])
    if not rows or not cols:
        return _empty(title, description)
    if scale not in (None, "sequential", "diverging"):
        raise ValueError(f"scale must be 'sequential', 'diverging' or None, got {scale!r}")

    present = [v for row in grid for v in row if v is not None]
    lo = float(vmin) if vmin is not None else (min(present) if present else 0.0)
    hi = float(vmax) if vmax is not None else (max(present) if present else 1.0)
    if scale is None:
        scale = "diverging" if lo < 0 < hi else "sequential"
    if scale == "diverging" and vmin is None and vmax is None:
        m = max(abs(lo), abs(hi))
        lo, hi = -m, m
    if hi <= lo:
        hi = lo + 1.0

    def color(v: float) -> str:
        t = min(1.0, max(0.0, (v - lo) / (hi - lo)))
        if scale == "sequential":
            return _mix(_SEQUENTIAL[0], _SEQUENTIAL[1], t)
        if t < 0.5:
            return _mix(_DIVERGING[0], _DIVERGING[1], t * 2)
        return _mix(_DIVERGING[1], _DIVERGING[2], (t - 0.5) * 2)

    cell_texts = [_fmt(value_format, v) for row in grid for v in row if v is not None]
    col_short = [_short(c, 18) for c in cols]
    cell_w = max(
        48.0, max(_text_w(c) for c in col_short) + 10, max([_text_w(t) for t in cell_texts] or [0]) + 10
    )
    cell_h = 28.0
    label_w = max(max(_text_w(_short(r, 30)) for r in rows), _text_w(row_title or "")) + 12
    x0 = 10 + label_w
    top = 44.0 + (18 if col_title else 0)
    grid_top = top + 20
    grid_w = cell_w * len(cols)
    grid_bottom = grid_top + cell_h * len(rows)
    legend_y = grid_bottom + 22
    swatches = _ticks(lo, hi)
    swatch_w = max(52.0, max(_text_w(_fmt(value_format, t)) for t in swatches) + 10)
    has_missing = len(present) < len(rows) * len(cols)
    legend_w = swatch_w * len(swatches) + (90 if has_missing else 0)
    width = max(x0 + grid_w + 10, 20 + legend_w, 20 + _text_w(title) * 1.25)
    height = legend_y + 44

    body = [_title_text(title)]
    if col_title:
        body.append(
            f'<text x="{_n(x0 + grid_w / 2)}" y="{_n(top - 6)}" text-anchor="middle" font-weight="bold" '
            f'fill="{_TEXT}">{_esc(col_title)}</text>'
        )
    if row_title:
        body.append(
            f'<text x="10" y="{_n(grid_top - 6)}" font-weight="bold" fill="{_TEXT}">{_esc(row_title)}</text>'
        )
    for j, c in enumerate(cols):
        cx = x0 + j * cell_w + cell_w / 2
        body.append(
            f'<text x="{_n(cx)}" y="{_n(grid_top - 6)}" text-anchor="middle" fill="{_TEXT}">'
            f"<title>{_esc(c)}</title>{_esc(col_short[j])}</text>"
        )
    desc_parts = []
    for i, r in enumerate(rows):
        y = grid_top + i * cell_h
        body.append(
            f'<text x="{_n(x0 - 8)}" y="{_n(y + cell_h / 2 + 4)}" text-anchor="end" fill="{_TEXT}">'
            f"<title>{_esc(r)}</title>{_esc(_short(r, 30))}</text>"
        )
        cells = []
        for j, c in enumerate(cols):
            v = grid[i][j]
            x = x0 + j * cell_w
            fill = _MISSING_FILL if v is None else color(v)
            text = "–" if v is None else _fmt(value_format, v)
            tip = f"{r} / {c}: {'no data' if v is None else text}"
            cells.append(f"{c} {'no data' if v is None else text}")
            body.append(
                f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(cell_w)}" height="{_n(cell_h)}" fill="{fill}" '
                f'stroke="#ffffff"><title>{_esc(tip)}</title></rect>'
            )
            body.append(
                f'<text x="{_n(x + cell_w / 2)}" y="{_n(y + cell_h / 2 + 4)}" text-anchor="middle" '
                f'fill="{_ink(fill)}">{_esc(text)}</text>'
            )
        desc_parts.append(f"{r}: " + ", ".join(cells))
    lx = 10.0
    for t in swatches:
        fill = color(t)
        body.append(
            f'<rect x="{_n(lx)}" y="{_n(legend_y)}" width="{_n(swatch_w)}" height="14" fill="{fill}" '
            f'stroke="#999999"/>'
        )
        body.append(
            f'<text x="{_n(lx + swatch_w / 2)}" y="{_n(legend_y + 30)}" text-anchor="middle" font-size="11" '
            f'fill="{_TEXT}">{_esc(_fmt(value_format, t))}</text>'
        )
        lx += swatch_w
    if has_missing:
        lx += 16
        body.append(
            f'<rect x="{_n(lx)}" y="{_n(legend_y)}" width="14" height="14" fill="{_MISSING_FILL}" '
            f'stroke="#999999"/>'
        )
        body.append(
            f'<text x="{_n(lx + 20)}" y="{_n(legend_y + 11)}" font-size="11" fill="{_TEXT}">no data</text>'
        )
    scale_text = f"Colour scale {scale}, from {_fmt(value_format, lo)} to {_fmt(value_format, hi)}."
    axes = f"Rows: {row_title}. " if row_title else ""
    axes += f"Columns: {col_title}. " if col_title else ""
    desc = (
        (description + " " if description else "")
        + "Heatmap. "
        + axes
        + scale_text
        + " "
        + "; ".join(desc_parts)
        + "."
    )
    return _svg(width, height, title, desc, body)


def forest_plot(
    groups: Sequence[Any],
    series: Mapping[str, Sequence[tuple[float | None, float | None, float | None]]],
    *,
    title: str,
    description: str | None = None,
    value_format: str = "{:.1%}",
    domain: tuple[float, float] = (0.0, 1.0),
    colors: Mapping[str, str] | None = None,
    row_colors: Mapping[str, Sequence[str | None]] | None = None,
    row_notes: Sequence[str | None] | None = None,
    legend_extra: Sequence[tuple[str, str]] = (),
) -> str:
    """Return a forest plot as an SVG string: per group, one line per series (e.g. the methods
    ``human``, ``judge``, ``ppi``) with a marker at the estimate and a bar over its interval
    ``(estimate, low, high)``, the numbers printed at the right.  A missing estimate prints
    "n/a"; a missing interval draws the marker alone.  ``colors`` overrides a series' colour
    (default the palette in order).  ``row_colors`` maps a series to one colour per group (None
    keeps the series' colour), e.g. the rows carrying a warning; ``row_notes`` (one per group)
    appends a short note to the group's label and its tooltip (e.g. "⚑ kappa paradox");
    ``legend_extra`` adds (label, colour) entries to the legend."""
    title = _check_title(title)
    names = [_label(g) for g in groups]
    keys = list(series)
    if not keys:
        raise ValueError("series: a forest plot needs at least one series")
    vals: dict[str, list[tuple[float | None, float | None, float | None]]] = {}
    for k in keys:
        if len(series[k]) != len(names):
            raise ValueError(f"series {k!r} has {len(series[k])} values for {len(names)} groups")
        vals[k] = [tuple(_value(v, f"{k} value {i}") for v in triple)  # type: ignore[misc]
                   for i, triple in enumerate(series[k])]
    if not names:
        return _empty(title, description)
    checks = [(f"row_colors[{k!r}]", v) for k, v in (row_colors or {}).items()] + [("row_notes", row_notes)]
    for what, seq in checks:
        if seq is not None and len(seq) != len(names):
            raise ValueError(f"{what} has {len(seq)} entries for {len(names)} groups")
    unknown = set(row_colors or {}) - set(keys)
    if unknown:
        raise ValueError(f"row_colors names series that do not exist: {sorted(unknown)}")
    rcol = {k: list((row_colors or {}).get(k) or [None] * len(names)) for k in keys}
    rnote = list(row_notes) if row_notes is not None else [None] * len(names)
    every = [v for k in keys for t in vals[k] for v in t if v is not None]
    lo, hi = _domain(every, float(domain[0]), float(domain[1]))
    ticks = _nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]
    palette = {k: (colors or {}).get(k, PALETTE[i % len(PALETTE)]) for i, k in enumerate(keys)}

    line_h, gap = 18.0, 10.0
    group_h = line_h * len(keys) + gap
    label_w = max(_text_w(_short(n) + (" " + rnote[i] if rnote[i] else "")) for i, n in enumerate(names)) + 12
    series_w = max(_text_w(k) for k in keys) + 12
    plot_w = 320.0

    def cell(t: tuple[float | None, float | None, float | None]) -> str:
        est, a, b = t
        if est is None:
            return "n/a"
        text = _fmt(value_format, est)
        return text + (f" [{_fmt(value_format, a)}, {_fmt(value_format, b)}]" if a is not None and b is not None else "")

    cells = {k: [cell(t) for t in vals[k]] for k in keys}
    col_w = max(_text_w(c) for k in keys for c in cells[k]) + 14
    x0 = 10 + label_w + series_w
    legend_y = 44.0
    top = legend_y + 22
    axis_y = top + len(names) * group_h
    legend_w = sum(36 + _text_w(k) for k in keys) + sum(36 + _text_w(lab) for lab, _ in legend_extra)
    width = max(x0 + plot_w + col_w + 20, 20 + legend_w, 20 + _text_w(title) * 1.25)
    height = axis_y + 30

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    body = [_title_text(title)]
    lx = 16.0
    for k in keys:
        body.append(f'<circle cx="{_n(lx)}" cy="{_n(legend_y - 4)}" r="5" fill="{palette[k]}"/>')
        body.append(f'<text x="{_n(lx + 10)}" y="{_n(legend_y)}" fill="{_TEXT}">{_esc(k)}</text>')
        lx += 36 + _text_w(k)
    for lab, col in legend_extra:
        body.append(f'<rect x="{_n(lx - 5)}" y="{_n(legend_y - 9)}" width="10" height="10" fill="{_esc(col)}"/>')
        body.append(f'<text x="{_n(lx + 10)}" y="{_n(legend_y)}" fill="{_TEXT}">{_esc(lab)}</text>')
        lx += 36 + _text_w(lab)
    for t in ticks:
        body.append(f'<line x1="{_n(x(t))}" y1="{_n(top - 4)}" x2="{_n(x(t))}" y2="{_n(axis_y)}" stroke="{_GRID}"/>')
        body.append(f'<text x="{_n(x(t))}" y="{_n(axis_y + 16)}" text-anchor="middle" fill="{_TEXT}">'
                    f"{_esc(_fmt(value_format, t))}</text>")
    desc_parts = []
    for i, name in enumerate(names):
        gy = top + i * group_h
        note = rnote[i]
        shown_name = _short(name) + (" " + note if note else "")
        body.append(f'<text x="10" y="{_n(gy + line_h * len(keys) / 2 + 4)}" fill="{_TEXT}">'
                    f"<title>{_esc(name + (': ' + note if note else ''))}</title>{_esc(shown_name)}</text>")
        if i:
            body.append(f'<line x1="10" y1="{_n(gy - gap / 2)}" x2="{_n(width - 10)}" y2="{_n(gy - gap / 2)}" '
                        f'stroke="{_GRID}" stroke-dasharray="2 3"/>')
        parts = []
        for j, k in enumerate(keys):
            cy = gy + j * line_h + line_h / 2
            est, a, b = vals[k][i]
            text = cells[k][i]
            parts.append(f"{k} {text}")
            body.append(f'<text x="{_n(x0 - 8)}" y="{_n(cy + 4)}" text-anchor="end" fill="{_TEXT}">{_esc(k)}</text>')
            tip = _esc(f"{name}, {k}: {text}" + (f" ({note})" if note else ""))
            color = _esc(rcol[k][i]) if rcol[k][i] else palette[k]
            if est is not None and a is not None and b is not None:
                body.append(f'<line x1="{_n(x(a))}" y1="{_n(cy)}" x2="{_n(x(b))}" y2="{_n(cy)}" '
                            f'stroke="{color}" stroke-width="3"><title>{tip}</title></line>')
            if est is not None:
                body.append(f'<circle cx="{_n(x(est))}" cy="{_n(cy)}" r="5" fill="{color}">'
                            f"<title>{tip}</title></circle>")
            body.append(f'<text x="{_n(x0 + plot_w + 10)}" y="{_n(cy + 4)}" fill="{_TEXT}">{_esc(text)}</text>')
        desc_parts.append(f"{name}" + (f" ({note})" if note else "") + ": " + ", ".join(parts))
    desc = (description + " " if description else "") + "Forest plot. " + "; ".join(desc_parts) + "."
    return _svg(width, height, title, desc, body)
