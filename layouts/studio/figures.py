"""Release page figures and their table alternatives, from a run's summaries only.

Every figure is plain Plotly JSON built from ``services.studio.summaries`` (bin counts, five
numbers, shares, correlation matrices): no rows reach the browser. Each figure has a table
of the same numbers (``*_table``) shown under it for screen readers and exact reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from layouts.components.figures import FONT, GRID, PALETTE, fmt

Figure = dict[str, Any]
Table = tuple[list[str], list[list[str]]]
SIDES = (("original", "Original", PALETTE[0]), ("dp", "DP copy", PALETTE[1]))


def _sides(item: Mapping[str, Any], key: str) -> list[tuple[str, str, Any]]:
    """(label, colour, value) of the sides present (the original is the owner's only); a
    side's label may be renamed by the item (``dp_label``: "Synthetic copy")."""
    return [(item.get(f"{side}_label", label), colour, item[f"{key}_{side}"])
            for side, label, colour in SIDES if item.get(f"{key}_{side}") is not None]


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title, "font": {"size": 14}}, "font": {"family": FONT},
            "margin": {"l": 50, "r": 20, "t": 40, "b": 40}, "height": 300,
            "plot_bgcolor": "white", "legend": {"orientation": "h", "y": -0.2}, **extra}


def histogram(item: Mapping[str, Any]) -> Figure:
    """Overlaid bars of the counts on the column's public bins."""
    edges = item["edges"]
    mids = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    data = [{"type": "bar", "name": label, "x": mids, "y": counts, "width": widths,
             "marker": {"color": colour}, "opacity": 0.6}
            for label, colour, counts in _sides(item, "counts")]
    return {"data": data, "layout": _layout(
        f"{item['label']}: distribution", barmode="overlay",
        xaxis={"title": {"text": item["label"]}, "gridcolor": GRID},
        yaxis={"title": {"text": "rows"}, "gridcolor": GRID})}


def histogram_table(item: Mapping[str, Any]) -> Table:
    edges, sides = item["edges"], _sides(item, "counts")
    rows = [[f"{fmt(a)} to {fmt(b)}", *[str(c[i]) for _, _, c in sides]]
            for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))]
    return ["bin", *[f"{label} rows" for label, _, _ in sides]], rows


FIVE = ("minimum", "lower quartile", "median", "upper quartile", "maximum")


def box(item: Mapping[str, Any]) -> Figure:
    """Boxes drawn from the five numbers (no points)."""
    data = []
    for label, colour, five in _sides(item, "box"):
        lo, q1, med, q3, hi = five
        data.append({"type": "box", "name": label, "q1": [q1], "median": [med], "q3": [q3],
                     "lowerfence": [lo], "upperfence": [hi], "x": [label],
                     "marker": {"color": colour}, "boxpoints": False})
    return {"data": data, "layout": _layout(
        f"{item['label']}: box", showlegend=False,
        yaxis={"title": {"text": item["label"]}, "gridcolor": GRID})}


def box_table(item: Mapping[str, Any]) -> Table:
    sides = _sides(item, "box")
    rows = [[name, *[fmt(five[i]) for _, _, five in sides]] for i, name in enumerate(FIVE)]
    return ["statistic", *[label for label, _, _ in sides]], rows


def pies(item: Mapping[str, Any]) -> Figure:
    """One pie per side, side by side."""
    sides = _sides(item, "shares")
    n = len(sides)
    data = [{"type": "pie", "name": label, "title": {"text": label},
             "labels": list(shares), "values": list(shares.values()), "sort": False,
             "marker": {"colors": PALETTE}, "textinfo": "percent",
             "domain": {"x": [k / n + 0.02, (k + 1) / n - 0.02], "y": [0, 1]}}
            for k, (label, _, shares) in enumerate(sides)]
    return {"data": data, "layout": _layout(f"{item['label']}: category shares")}


def pies_table(item: Mapping[str, Any]) -> Table:
    sides = _sides(item, "shares")
    cats = list(sides[0][2]) if sides else []
    rows = [[str(c), *[f"{100 * s.get(c, 0.0):.1f} %" for _, _, s in sides]] for c in cats]
    return ["category", *[f"{label} share" for label, _, _ in sides]], rows


def heatmap(corr: Mapping[str, Any], side: str) -> Figure:
    label = dict((s, lab) for s, lab, _ in SIDES)[side]
    return {"data": [{"type": "heatmap", "z": corr[side], "x": corr["names"],
                      "y": corr["names"], "zmin": -1, "zmax": 1, "colorscale": "RdBu",
                      "reversescale": True}],
            "layout": _layout(f"Correlations: {label}", height=360,
                              margin={"l": 120, "r": 20, "t": 40, "b": 100})}


def correlation_table(corr: Mapping[str, Any]) -> Table:
    names = corr["names"]
    sides = [(lab, corr[s]) for s, lab, _ in SIDES if corr.get(s) is not None]
    rows = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            vals = [m[i][j] for _, m in sides]
            diff = (fmt(abs(vals[0] - vals[1])) if len(vals) == 2 and None not in vals
                    else "—")
            rows.append([f"{names[i]} × {names[j]}", *[fmt(v) for v in vals], diff])
    return ["pair", *[lab for lab, _ in sides], "difference"], rows
