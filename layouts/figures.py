"""Plotly figures built from public answers only (DP numbers and public metadata).

No function here sees a row of data: a box plot is drawn from DP quantiles, never from
individual points, and hover text shows the DP value with its 95 % interval.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from dp_engine.bands import NOISE_LABELS
from services.releases import ViewAnswer

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000"]
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


def _num(v: float | None, digits: int = 3) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


def subtitle(ans: ViewAnswer, compact: bool = False) -> str:
    tier = NOISE_LABELS[ans.tier]
    if compact:
        return f"ε = {_num(ans.epsilon)} · {tier} noise"
    if ans.mechanism == "paper":
        return f"PyDPLib paper mode · labelled ε = {_num(ans.epsilon)} · {tier} noise"
    return f"{ans.mechanism_label} · ε = {_num(ans.epsilon)} · {tier} noise"


def _base(fig: go.Figure, ans: ViewAnswer, title: str, compact: bool) -> go.Figure:
    if compact:   # compare mode: the tier is the headline, the view is shared by all three
        title = f"{NOISE_LABELS[ans.tier].capitalize()} noise · {ans.role.replace('_', ' ')} tier"
    fig.update_layout(
        title={"text": f"{title}<br><sup>{subtitle(ans, compact)}</sup>", "x": 0.01,
               "font": {"size": 14 if compact else 17}},
        template="plotly_white",
        font={"family": FONT, "size": 12},
        colorway=PALETTE,
        margin={"l": 60, "r": 20, "t": 80, "b": 110 if compact else 60},
        legend={"orientation": "h", "y": -0.45 if compact else -0.2,
                "title": {"text": ans.group_label}},
        hoverlabel={"font": {"family": FONT}},
        bargap=0.15,
    )
    return fig


def _ci(ans: ViewAnswer, g: int, c: int) -> tuple[float | None, float | None]:
    return ans.ci_low[g][c], ans.ci_high[g][c]


def histogram(ans: ViewAnswer, compact: bool = False) -> go.Figure:
    fig = go.Figure()
    owner_paper = ans.mechanism == "paper"
    for g, name in enumerate(ans.groups):
        ys = [v if v is not None else 0 for v in ans.values[g]]
        custom = [[_num(lo), _num(hi)] for lo, hi in zip(ans.ci_low[g], ans.ci_high[g],
                                                          strict=True)]
        interval = "" if owner_paper else "<br>95 % interval: %{customdata[0]} – %{customdata[1]}"
        fig.add_bar(
            x=ans.cells, y=ys, name=name, customdata=custom,
            hovertemplate=f"{ans.x_label}: %{{x}}<br>{name}: %{{y}} patients"
                          f"{interval}<extra></extra>",
            marker_color=PALETTE[g % len(PALETTE)],
        )
    title = f"{ans.x_label} — patient counts" + (f" by {ans.group_label}" if ans.group else "")
    fig.update_layout(barmode="group" if len(ans.groups) > 1 else "relative",
                      showlegend=len(ans.groups) > 1)
    fig.update_xaxes(title_text=ans.x_label)
    fig.update_yaxes(title_text="Patients (DP count)", rangemode="tozero")
    return _base(fig, ans, title, compact)


def _per_group_bars(ans: ViewAnswer, statistic: str, compact: bool) -> go.Figure:
    vals = [row[0] for row in ans.values]
    lo = [row[0] for row in ans.ci_low]
    hi = [row[0] for row in ans.ci_high]
    paper = ans.mechanism == "paper"
    err_plus = [None if (v is None or h is None) else h - v for v, h in zip(vals, hi, strict=True)]
    err_minus = [None if (v is None or l_ is None) else v - l_
                 for v, l_ in zip(vals, lo, strict=True)]
    custom = [[_num(a), _num(b)] for a, b in zip(lo, hi, strict=True)]
    unit = f" {ans.unit}" if ans.unit else ""
    interval = "" if paper else "<br>95 % interval: %{customdata[0]} – %{customdata[1]}" + unit
    fig = go.Figure(go.Bar(
        y=ans.groups, x=vals, orientation="h", customdata=custom,
        marker_color=[PALETTE[i % len(PALETTE)] for i in range(len(vals))],
        error_x=None if paper else {"type": "data", "symmetric": False, "array": err_plus,
                                    "arrayminus": err_minus, "color": "#444"},
        hovertemplate=f"{ans.group_label or 'Group'}: %{{y}}<br>{statistic}: %{{x:.3g}}{unit}"
                      f"{interval}<extra></extra>",
    ))
    title = f"{statistic} {ans.x_label.split(' (')[0].lower()}" + (
        f" by {ans.group_label}" if ans.group else "")
    fig.update_xaxes(title_text=f"{statistic} {ans.x_label}")
    fig.update_yaxes(title_text=ans.group_label or "", type="category")
    fig.update_layout(showlegend=False)
    return _base(fig, ans, title, compact)


def box(ans: ViewAnswer, compact: bool = False) -> go.Figure:
    """Box plot drawn from DP quantiles only: whiskers q0.05/q0.95, box q1–q3, median."""
    fig = go.Figure()
    for g, name in enumerate(ans.groups):
        q = ans.values[g]
        if any(v is None for v in q):
            continue
        colour = PALETTE[g % len(PALETTE)]
        fig.add_trace(go.Box(
            x=[name], lowerfence=[q[0]], q1=[q[1]], median=[q[2]], q3=[q[3]],
            upperfence=[q[4]], name=name, marker_color=colour, boxpoints=False,
            hoverinfo="skip",
        ))
        lo, hi = _ci(ans, g, 2)
        fig.add_scatter(
            x=[name], y=[q[2]], mode="markers", showlegend=False,
            marker={"color": colour, "size": 9, "symbol": "diamond",
                    "line": {"color": "#222", "width": 1}},
            customdata=[[_num(q[0]), _num(q[1]), _num(q[3]), _num(q[4]), _num(lo), _num(hi)]],
            hovertemplate=(f"{name}<br>median %{{y:.3g}} {ans.unit}"
                           + ("" if ans.mechanism == "paper" else
                              "<br>95 % interval of the median: %{customdata[4]} – "
                              "%{customdata[5]}")
                           + "<br>q1 %{customdata[1]} · q3 %{customdata[2]}"
                           "<br>5th–95th percentile %{customdata[0]} – %{customdata[3]}"
                           "<extra></extra>"),
        )
    title = f"Median {ans.x_label.split(' (')[0].lower()}" + (
        f" by {ans.group_label}" if ans.group else "")
    fig.update_xaxes(title_text=ans.group_label or "", type="category")
    fig.update_yaxes(title_text=ans.x_label)
    fig.update_layout(showlegend=False)
    return _base(fig, ans, title, compact)


def build(ans: ViewAnswer, compact: bool = False) -> go.Figure:
    """The figure of a view."""
    if ans.view == "histogram":
        return histogram(ans, compact)
    if ans.view == "median":
        return box(ans, compact)
    return _per_group_bars(ans, "Mean" if ans.view == "mean" else "Variance of", compact)
