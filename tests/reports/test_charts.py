"""SVG charts: valid XML, escaped text, accessible names, marks for every value, determinism."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from app.reports.charts import bar_chart, dumbbell_chart, heatmap

NS = "{http://www.w3.org/2000/svg}"
EVIL = 'model <script>alert("x")</script> & co'


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    assert root.get("role") == "img"
    w, h = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}" and w > 0 and h > 0
    return root


def visible(t: ET.Element) -> str:
    """Rendered text of a <text> element: its own text and tails, not its <title> tooltip."""
    return (t.text or "") + "".join(c.tail or "" for c in t)


def texts(root: ET.Element) -> list[str]:
    return [visible(t) for t in root.iter(f"{NS}text")]


def test_bar_chart_structure_and_escaping():
    svg = bar_chart(
        [EVIL, "model-b"],
        {"CF1": [0.25, None], "GR3 <b>": [0.5, 1.0]},
        title="Mode prevalence & model",
        description="Share of agent-runs.",
    )
    assert "<script>" not in svg and "<b>" not in svg
    root = parse(svg)
    assert root.get("aria-label") == "Mode prevalence & model"
    assert root.find(f"{NS}title").text == "Mode prevalence & model"
    desc = root.find(f"{NS}desc").text
    assert desc.startswith("Share of agent-runs. Grouped horizontal bar chart.")
    assert f"{EVIL}: CF1 25%, GR3 <b> 50%" in desc and "model-b: CF1 n/a, GR3 <b> 100%" in desc
    bars = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    # 2 categories x 2 series minus the one missing value = 3 bars, each with a tooltip
    assert [b.find(f"{NS}title").text for b in bars] == [
        f"{EVIL}, CF1: 25%",
        f"{EVIL}, GR3 <b>: 50%",
        "model-b, GR3 <b>: 100%",
    ]
    widths = [float(b.get("width")) for b in bars]
    # domain 0..1 over 360px: 0.25 -> 90, 0.5 -> 180, 1.0 -> 360
    assert widths == [90.0, 180.0, 360.0]
    labels = texts(root)
    assert EVIL in labels and "n/a" in labels and "25%" in labels and "GR3 <b>" in labels
    assert svg == bar_chart(
        [EVIL, "model-b"],
        {"CF1": [0.25, None], "GR3 <b>": [0.5, 1.0]},
        title="Mode prevalence & model",
        description="Share of agent-runs.",
    )


def test_bar_chart_axis_uses_round_steps():
    # max value 1/3: raw step (1/3)/4 = 0.083 -> round step 0.1 -> axis 0 .. 0.4 in 5 ticks;
    # the bar for 1/3 is then (1/3)/0.4 of the 360px plot = 300px
    root = parse(bar_chart(["m"], {"CF2": [1 / 3]}, title="t"))
    labels = texts(root)
    assert [t for t in labels if t.endswith("%")] == ["0%", "10%", "20%", "30%", "40%", "33%"]
    bar = next(r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None)
    assert float(bar.get("width")) == pytest.approx(300.0, abs=0.051)


def test_bar_chart_grows_with_content_and_rejects_bad_input():
    small = parse(bar_chart(["a"], {"s": [0.1]}, title="t"))
    big = parse(bar_chart(["a" * 30, "b", "c"], {"s": [0.1, 0.2, 0.3], "u": [0.1, 0.2, 0.3]}, title="t"))
    assert float(big.get("width")) > float(small.get("width"))
    assert float(big.get("height")) > float(small.get("height"))
    with pytest.raises(ValueError, match="series 's': 1 values for 2 categories"):
        bar_chart(["a", "b"], {"s": [0.1]}, title="t")
    with pytest.raises(TypeError, match="series 's' value 0: expected a number"):
        bar_chart(["a"], {"s": ["high"]}, title="t")
    with pytest.raises(ValueError, match="title"):
        bar_chart(["a"], {"s": [0.1]}, title="")
    empty = parse(bar_chart([], {}, title="Nothing"))
    assert "No data" in texts(empty)


def test_dumbbell_chart():
    svg = dumbbell_chart(
        ["model-a / h<x>", "model-b", "model-c"],
        [0.8, 1.0, math.nan],
        [0.4, None, 0.2],
        title="Aggregate vs own principal",
    )
    root = parse(svg)

    def marks(tag: str) -> list[str]:
        """Tooltips of the data marks (the column-head symbols carry just the series name)."""
        tips = [m.find(f"{NS}title") for m in root.iter(f"{NS}{tag}")]
        return [t.text for t in tips if t is not None and ": " in t.text]

    # circles for model-a and model-b (model-c's first value is missing); squares for a and c
    assert marks("circle") == [
        "model-a / h<x>, aggregate success: 80%",
        "model-b, aggregate success: 100%",
    ]
    assert marks("rect") == [
        "model-a / h<x>, principal success: 40%",
        "model-c, principal success: 20%",
    ]
    # one connecting line only where both values exist (model-a); 0.8 -> x0+256, 0.4 -> x0+128
    lines = [ln for ln in root.iter(f"{NS}line") if ln.get("stroke-width") == "3"]
    assert len(lines) == 1
    assert float(lines[0].get("x1")) - float(lines[0].get("x2")) == pytest.approx(128.0, abs=0.11)
    assert root.find(f"{NS}desc").text == (
        "Dumbbell chart. model-a / h<x>: aggregate success 80%, principal success 40%; "
        "model-b: aggregate success 100%, principal success n/a; "
        "model-c: aggregate success n/a, principal success 20%."
    )
    with pytest.raises(ValueError, match="3 groups"):
        dumbbell_chart(["a", "b", "c"], [0.1], [0.2, 0.3, 0.4], title="t")


def test_heatmap_with_missing_cells_and_scale():
    svg = heatmap(
        ["model-a", "model-b"],
        ["model-a", "model-b & c"],
        [[0.0, 1.0], [0.5, None]],
        title="Cross-play: mean principal score",
        row_title="side A",
        col_title="side B",
    )
    root = parse(svg)
    cells = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert [c.find(f"{NS}title").text for c in cells] == [
        "model-a / model-a: 0.00",
        "model-a / model-b & c: 1.00",
        "model-b / model-a: 0.50",
        "model-b / model-b & c: no data",
    ]
    # sequential scale over the data range 0..1: ends are the two scale colours; 0.5 is the
    # half-up rounded midpoint of #f7fbff (247,251,255) and #08306b (8,48,107):
    # (247+8)/2 = 127.5 -> 128 = 0x80, (251+48)/2 = 149.5 -> 150 = 0x96, (255+107)/2 = 181 = 0xb5
    assert [c.get("fill") for c in cells] == ["#f7fbff", "#08306b", "#8096b5", "#d9d9d9"]
    labels = texts(root)
    for expected in ("0.00", "1.00", "0.50", "–", "no data", "side A", "side B", "model-b & c"):
        assert expected in labels
    # legend: five swatches 0, .25, .5, .75, 1
    assert [t for t in labels if t in ("0.25", "0.75")] == ["0.25", "0.75"]
    # value text is white on the dark cell and black on the light one
    # (the first "1.00" / "0.00" texts are the cells; the later ones are legend labels)
    fills = [(visible(t), t.get("fill")) for t in root.iter(f"{NS}text")]
    assert next(f for v, f in fills if v == "1.00") == "#ffffff"
    assert next(f for v, f in fills if v == "0.00") == "#000000"
    assert "Colour scale sequential, from 0.00 to 1.00." in root.find(f"{NS}desc").text


def test_heatmap_diverging_for_kappa():
    svg = heatmap(["alice", "bob"], ["alice", "bob"], [[1.0, -0.5], [-0.5, 1.0]], title="Pairwise kappa")
    root = parse(svg)
    fills = [r.get("fill") for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    # auto diverging, symmetric -1..1: 1.0 -> blue end #2166ac; -0.5 -> halfway between red
    # #b2182b (178,24,43) and white #f7f7f7 (247,247,247): 212.5 -> 213 = 0xd5,
    # 135.5 -> 136 = 0x88, 145 = 0x91
    assert fills == ["#2166ac", "#d58891", "#d58891", "#2166ac"]
    assert "no data" not in texts(root)
    with pytest.raises(ValueError, match="values row 1 has 1 cells for 2 column labels"):
        heatmap(["a", "b"], ["a", "b"], [[1, 2], [3]], title="t")
    with pytest.raises(ValueError, match="scale must be"):
        heatmap(["a"], ["a"], [[1]], title="t", scale="rainbow")


def test_forest_plot_row_colours_notes_and_legend():
    from app.reports.charts import PALETTE, forest_plot

    series = {"Fleiss κ": [(0.2, 0.1, 0.3), (0.8, 0.7, 0.9)], "Gwet AC1": [(0.9, 0.85, 0.95), (0.8, 0.75, 0.85)]}
    plain = forest_plot(["CF1", "GR1"], series, title="t")
    svg = forest_plot(["CF1", "GR1"], series, title="t", row_colors={"Fleiss κ": ["#d35400", None]},
                      row_notes=["⚑ paradox", None], legend_extra=[("paradox", "#d35400")])
    root = parse(svg)
    # the flagged row's kappa (bar and dot) in the warning colour; its AC1 and the other row keep theirs
    circles = [c.get("fill") for c in root.iter(f"{NS}circle")]
    assert circles.count("#d35400") == 1
    lines = [ln.get("stroke") for ln in root.iter(f"{NS}line") if ln.get("stroke-width") == "3"]
    assert lines == ["#d35400", PALETTE[1], PALETTE[0], PALETTE[1]]
    assert any(visible(t) == "CF1 ⚑ paradox" for t in root.iter(f"{NS}text"))
    assert any(visible(t) == "paradox" for t in root.iter(f"{NS}text"))   # the legend entry
    assert "#d35400" not in plain and "paradox" not in plain             # without the options: as before
    with pytest.raises(ValueError, match="row_colors"):
        forest_plot(["CF1", "GR1"], series, title="t", row_colors={"Fleiss κ": ["#000"]})
    with pytest.raises(ValueError, match="do not exist"):
        forest_plot(["CF1", "GR1"], series, title="t", row_colors={"nope": [None, None]})
    with pytest.raises(ValueError, match="row_notes"):
        forest_plot(["CF1", "GR1"], series, title="t", row_notes=["x"])
