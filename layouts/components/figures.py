"""Plotly figures built from public answers only (DP numbers and public metadata).

No function here sees a row of data: a box plot is drawn from DP quantiles, never from
individual points, and hover text shows the DP value with its 95 % interval.
Figures are plain Plotly JSON (dicts): building ``plotly.graph_objects`` figures validates
and deep-copies a template on every call, which cost most of a callback's time.
"""

from __future__ import annotations

import math
from typing import Any

from dp_engine.bands import NOISE_LABELS
from services.views.answer import ViewAnswer

Figure = dict[str, Any]

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000"]
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
GRID = "#e5e9f0"
CHART_HEIGHT = 450    # px of every chart (Plotly's default height, kept when relaid out)
MODEBAR = 28          # px of the modebar's row at the top of a chart
TITLE_HEIGHT = 44     # px of a title and its subtitle line
LEGEND_ROW = 26       # px of one row of a horizontal legend (compare tiles wrap to two)


def top_margin(legend: float) -> int:
    """The top margin that holds the modebar's row, then the title (Plotly centres it in the
    margin), then a legend ``legend`` px high right above the plot, none over another."""
    return int(max(2 * MODEBAR + TITLE_HEIGHT, TITLE_HEIGHT + 2 * legend))


def fmt(v: float | None, digits: int = 3) -> str:
    """A number for people: 3 significant digits, thousands separated, "–" when missing."""
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


def subtitle(ans: ViewAnswer, compact: bool = False) -> str:
    tier = NOISE_LABELS[ans.tier]
    if compact:
        return f"ε = {fmt(ans.epsilon)} · {tier} noise"
    if not ans.dp:
        return f"PyDPLib paper mode · labelled ε = {fmt(ans.epsilon)} · {tier} noise"
    return f"{ans.mechanism_label} · ε = {fmt(ans.epsilon)} · {tier} noise"


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "gridcolor": GRID, "zerolinecolor": GRID,
            "automargin": True, **extra}


def is_withheld(ans: ViewAnswer, g: int) -> bool:
    """True when group ``g`` has no value at this noise level (shown as a labelled gap)."""
    return bool(ans.withheld[g]) if g < len(ans.withheld) else False


def withheld_text(ans: ViewAnswer, g: int) -> str:
    reason = ans.withheld_reason[g] if g < len(ans.withheld_reason) else ""
    return f"withheld: {reason or 'too few patients to show at this noise level'}"


def caption(ans: ViewAnswer) -> str:
    """What the error bars mean and which groups are withheld (drawn under the chart)."""
    if not ans.dp:
        return "Paper mode: no interval is stated (not differentially private)."
    what = ("The error bar on each median is its 95 % interval; whiskers are the DP 5th and "
            "95th percentiles." if ans.figure == "box" else
            "Error bars: the 95 % interval of each DP value.")
    parts = [what, "Each group's ε and expected error are listed beside the chart."]
    gone = [ans.groups[g] for g in range(len(ans.groups)) if is_withheld(ans, g)]
    if gone:
        parts.append(f"Withheld (too few patients to show at this noise level): "
                     f"{', '.join(gone)}.")
    return " ".join(parts)


def _figure(ans: ViewAnswer, data: list[dict], title: str, compact: bool, *,
            xaxis: dict, yaxis: dict, showlegend: bool,
            annotations: list[dict] | None = None, **layout: Any) -> Figure:
    if compact:   # compare mode: the tier is the headline, the view is shared by all three
        title = f"{NOISE_LABELS[ans.tier].capitalize()} noise · {ans.role.replace('_', ' ')} tier"
    return {
        "data": data,
        "layout": {
            # the title in the middle of the top margin, below the modebar's row, the legend
            # between it and the plot, the axes' labels alone below: nothing drawn over
            # anything else (the margin is sized for that: ``top_margin``)
            "title": {"text": f"{title}<br><sup>{subtitle(ans, compact)}</sup>", "x": 0.01,
                      "xanchor": "left", "font": {"size": 14 if compact else 17}},
            "font": {"family": FONT, "size": 12, "color": "#1d2733"},
            "height": CHART_HEIGHT,   # fixed: a taller top margin (wrapped title) shrinks
            "paper_bgcolor": "#ffffff",  # the plot, never collapses the chart
            "plot_bgcolor": "#ffffff",
            "colorway": PALETTE,
            "margin": {"l": 60, "r": 20, "b": 40,
                       "t": top_margin(LEGEND_ROW * (2 if compact else 1) if showlegend
                                       else 0)},
            "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.01,
                       "yanchor": "bottom",   # a narrow tile: the legend's title on its own row
                       "title": {"text": ans.group_label,
                                 **({"side": "top left"} if compact else {})}},
            "hoverlabel": {"font": {"family": FONT}},
            "showlegend": showlegend,
            "xaxis": xaxis,
            "yaxis": yaxis,
            "annotations": list(annotations or []),
            **layout,
        },
    }


def _interval(ans: ViewAnswer, unit: str = "") -> str:
    if not ans.dp:   # paper mode states no interval
        return ""
    return "<br>95 % interval: %{customdata[0]} – %{customdata[1]}" + unit


def _error_bars(values: list, low: list, high: list) -> dict[str, Any]:
    """Asymmetric error bars from 95 % intervals (None where there is no value)."""
    return {
        "type": "data", "symmetric": False, "color": "#444", "thickness": 1.2,
        "array": [None if (v is None or h is None) else h - v
                  for v, h in zip(values, high, strict=True)],
        "arrayminus": [None if (v is None or lo is None) else v - lo
                       for v, lo in zip(values, low, strict=True)],
    }


def _gap_note(text: str, **where: Any) -> dict[str, Any]:
    """A label where a withheld group's value would be (never a number)."""
    return {"text": text, "showarrow": False, "font": {"size": 11, "color": "#5b2a00"},
            "bgcolor": "#fff4e5", "bordercolor": "#b35c00", "borderwidth": 1, **where}


def histogram(ans: ViewAnswer, compact: bool = False) -> Figure:
    data = []
    notes = []
    who = "patient" if ans.privacy_unit == "patient" else "record"
    for g, name in enumerate(ans.groups):
        if is_withheld(ans, g):
            data.append({"type": "bar", "x": ans.cells, "y": [None] * len(ans.cells),
                         "name": f"{name} ({withheld_text(ans, g)})", "hoverinfo": "skip",
                         "marker": {"color": PALETTE[g % len(PALETTE)]}})
            notes.append(_gap_note(f"{name}: {withheld_text(ans, g)}", xref="paper",
                                   yref="paper", x=0.5, y=1 - 0.08 * len(notes),
                                   xanchor="center"))
            continue
        data.append({
            "type": "bar",
            "x": ans.cells,
            "y": [v if v is not None else 0 for v in ans.values[g]],
            "name": name,
            "customdata": [[fmt(lo), fmt(hi)]
                           for lo, hi in zip(ans.ci_low[g], ans.ci_high[g], strict=True)],
            "hovertemplate": f"{ans.x_label}: %{{x}}<br>{name}: %{{y}} {ans.error_unit or who}"
                             f"{_interval(ans)}<extra></extra>",
            "marker": {"color": PALETTE[g % len(PALETTE)]},
        })
        if ans.dp:
            data[-1]["error_y"] = _error_bars(ans.values[g], ans.ci_low[g], ans.ci_high[g])
    title = f"{ans.x_label} — {who} counts" + (f" by {ans.group_label}" if ans.group else "")
    grouped = len(ans.groups) > 1
    return _figure(ans, data, title, compact, showlegend=grouped, annotations=notes,
                   barmode="group" if grouped else "relative", bargap=0.15,
                   xaxis=_axis(ans.x_label, type="category"),
                   yaxis=_axis(f"{who.capitalize()}s (DP count)", rangemode="tozero"))


def bars(ans: ViewAnswer, compact: bool = False) -> Figure:
    """One statistic per group (mean, variance) as horizontal bars with 95 % intervals."""
    statistic = ans.statistic_label or ans.view.capitalize()
    vals = [row[0] for row in ans.values]
    lo = [row[0] for row in ans.ci_low]
    hi = [row[0] for row in ans.ci_high]
    paper = not ans.dp
    unit = f" {ans.unit}" if ans.unit else ""
    trace: dict[str, Any] = {
        "type": "bar", "orientation": "h", "y": ans.groups, "x": vals,
        "customdata": [[fmt(a), fmt(b)] for a, b in zip(lo, hi, strict=True)],
        "marker": {"color": [PALETTE[i % len(PALETTE)] for i in range(len(vals))]},
        "hovertemplate": f"{ans.group_label or 'Group'}: %{{y}}<br>{statistic}: "
                         f"%{{x:.3g}}{unit}{_interval(ans, unit)}<extra></extra>",
    }
    if not paper:
        trace["error_x"] = _error_bars(vals, lo, hi)
    notes = [_gap_note(withheld_text(ans, g), xref="paper", yref="y", x=0.02, y=group,
                       xanchor="left")
             for g, group in enumerate(ans.groups) if is_withheld(ans, g)]
    name = ans.x_label.split(" (")[0].lower()
    title = f"{statistic} {name}" + (f" by {ans.group_label}" if ans.group else "")
    return _figure(ans, [trace], title, compact, showlegend=False, annotations=notes,
                   xaxis=_axis(f"{statistic} {ans.x_label}"),
                   yaxis=_axis(ans.group_label or "", type="category"))


def box(ans: ViewAnswer, compact: bool = False) -> Figure:
    """Box plot drawn from DP quantiles only: whiskers q0.05/q0.95, box q1–q3, median."""
    data = []
    notes = []
    for g, name in enumerate(ans.groups):
        q = ans.values[g]
        if is_withheld(ans, g) or any(v is None for v in q):
            data.append({"type": "scatter", "x": [name], "y": [None], "mode": "markers",
                         "showlegend": False, "hoverinfo": "skip"})   # keeps the gap's place
            notes.append(_gap_note(withheld_text(ans, g) if is_withheld(ans, g)
                                   else "no value", xref="x", yref="paper", x=name, y=0.5,
                                   textangle=-90))
            continue
        colour = PALETTE[g % len(PALETTE)]
        lo, hi = ans.ci_low[g][2], ans.ci_high[g][2]
        data.append({
            "type": "box", "x": [name], "lowerfence": [q[0]], "q1": [q[1]],
            "median": [q[2]], "q3": [q[3]], "upperfence": [q[4]], "name": name,
            "marker": {"color": colour}, "boxpoints": False, "hoverinfo": "skip",
        })
        median_ci = ("" if not ans.dp else
                     "<br>95 % interval of the median: %{customdata[4]} – %{customdata[5]}")
        data.append({
            "type": "scatter", "x": [name], "y": [q[2]], "mode": "markers",
            "showlegend": False,
            "marker": {"color": colour, "size": 9, "symbol": "diamond",
                       "line": {"color": "#222", "width": 1}},
            "customdata": [[fmt(q[0]), fmt(q[1]), fmt(q[3]), fmt(q[4]), fmt(lo),
                            fmt(hi)]],
            **({"error_y": _error_bars([q[2]], [lo], [hi])} if ans.dp else {}),
            "hovertemplate": f"{name}<br>median %{{y:.3g}} {ans.unit}{median_ci}"
                             "<br>q1 %{customdata[1]} · q3 %{customdata[2]}"
                             "<br>5th–95th percentile %{customdata[0]} – %{customdata[3]}"
                             "<extra></extra>",
        })
    title = f"Median {ans.x_label.split(' (')[0].lower()}" + (
        f" by {ans.group_label}" if ans.group else "")
    return _figure(ans, data, title, compact, showlegend=False, annotations=notes,
                   xaxis=_axis(ans.group_label or "", type="category"),
                   yaxis=_axis(ans.x_label))


FIGURES = {"histogram": histogram, "bars": bars, "box": box}
"""Figure builders by the kind a view plan names (``ViewAnswer.figure``)."""


VALUE_AXIS = {"histogram": "yaxis", "bars": "xaxis", "box": "yaxis"}
"""The axis that carries the released values, by figure kind (bars are horizontal)."""
RANGE_PAD = 0.05
"""Share of the span left free beyond the largest (and smallest) value drawn."""


def shared_range(answers: list[ViewAnswer]) -> tuple[float, float] | None:
    """One range for the value axis of several answers drawn side by side (compare mode),
    so that equal heights mean equal values: it holds every shown value and interval end
    (and zero, where bars start). None when nothing is shown or the kinds differ."""
    kinds = {a.figure for a in answers}
    if len(kinds) != 1:
        return None
    points: list[float] = []
    for a in answers:
        for g in range(len(a.groups)):
            if is_withheld(a, g):
                continue
            for row in (a.values, a.ci_low, a.ci_high):
                if g < len(row):
                    points += [float(v) for v in row[g] if v is not None and math.isfinite(v)]
    if not points:
        return None
    lo, hi = min(points), max(points)
    if kinds != {"box"}:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    pad = RANGE_PAD * ((hi - lo) or abs(hi) or 1.0)
    return (lo if lo == 0.0 else lo - pad, hi + pad)


def build(ans: ViewAnswer, compact: bool = False,
          value_range: tuple[float, float] | None = None) -> Figure:
    """The figure of an answer, of the kind its view plan chose; ``value_range``: a fixed
    range for its value axis (``shared_range`` of the figures it is compared with)."""
    fig = FIGURES[ans.figure](ans, compact)
    if value_range is not None:
        axis = fig["layout"][VALUE_AXIS[ans.figure]]
        axis.update(range=[value_range[0], value_range[1]], autorange=False)
        axis.pop("rangemode", None)
    return fig
