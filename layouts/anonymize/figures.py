"""Figures of the Anonymize page: two quasi-identifiers before and after, coloured by group.

Building a figure is separate from computing the anonymization: the callback hands over plain
lists (the owner's own data, never sent to another role).
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
             "#000000")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross")
LABEL = "k-anonymity, not differential privacy"


def empty_figure(text: str = "Run the anonymizer to see the records before and after.") -> dict:
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=380, template="plotly_white", margin={"l": 20, "r": 20, "t": 30})
    return fig.to_dict()


def _few_whole_numbers(*columns: Sequence) -> bool:
    """True for a score or year column: whole numbers with at most 12 distinct values."""
    seen = {v for col in columns for v in col if v is not None}
    return 0 < len(seen) <= 12 and all(
        isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer()
        for v in seen)


def before_after_scatter(x_label: str, y_label: str, before_x: Sequence, before_y: Sequence,
                         after_x: Sequence, after_y: Sequence, groups: Sequence[int], *,
                         method: str, k: int) -> dict:
    """Side-by-side scatter; colour and marker cycle with the group so neighbours differ."""
    fig = make_subplots(rows=1, cols=2, shared_xaxes=True, shared_yaxes=True,
                        subplot_titles=("Before (original records)", f"After ({method}, k = {k})"))
    colours = [OKABE_ITO[g % len(OKABE_ITO)] for g in groups]
    symbols = [SYMBOLS[(g // len(OKABE_ITO)) % len(SYMBOLS)] for g in groups]
    hover = [f"group {g}" for g in groups]
    marker = {"color": colours, "symbol": symbols, "size": 7, "opacity": 0.75,
              "line": {"width": 0.5, "color": "#333333"}}
    for col, (xs, ys) in enumerate(((before_x, before_y), (after_x, after_y)), start=1):
        fig.add_trace(go.Scattergl(
            x=list(xs), y=list(ys), mode="markers", text=hover, showlegend=False, marker=marker,
            hovertemplate=f"{x_label}: %{{x}}<br>{y_label}: %{{y}}<br>%{{text}}<extra></extra>"),
            row=1, col=col)
    fig.update_xaxes(title_text=x_label)
    fig.update_yaxes(title_text=y_label, col=1)
    if _few_whole_numbers(before_x, after_x):
        fig.update_xaxes(tickformat="d", dtick=1)
    if _few_whole_numbers(before_y, after_y):
        fig.update_yaxes(tickformat="d", dtick=1)
    fig.update_layout(height=420, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 60, "b": 50},
                      title={"text": f"Records coloured by group — {LABEL}", "font": {"size": 14}})
    return fig.to_dict()
