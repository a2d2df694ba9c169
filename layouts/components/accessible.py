"""Accessible building blocks: labelled form fields and charts with a data-table alternative.

Every control gets a programmatic label (``<label for=...>``; radio groups a fieldset and
legend), and every chart is followed by a table of the numbers it draws (WCAG 1.1.1, 1.3.1,
4.1.2). ``assets/a11y.js`` carries the label onto widgets whose markup Dash owns (dropdowns).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import dash_bootstrap_components as dbc
import numpy as np
from dash import dcc, html, no_update

from layouts.components.graph_config import GRAPH_CONFIG

MAX_TABLE_ROWS = 200
"""Rows shown in a chart's table (a scatter of every record would be unreadable)."""

TABLE_SUMMARY = "Data table of this chart"
_GROUP_CONTROLS = (dbc.RadioItems, dbc.Checklist, dcc.RadioItems, dcc.Checklist)
_RADIOS = (dbc.RadioItems,)   # dcc.RadioItems has no name prop; none in the app uses it
_BOX_STATS = (("lowerfence", "Lower whisker"), ("q1", "Lower quartile"), ("median", "Median"),
              ("q3", "Upper quartile"), ("upperfence", "Upper whisker"))


def label_id(control_id: str) -> str:
    """The id of the label element of the control ``control_id``."""
    return f"{control_id}--label"


def field(label: str, control: Any, help_text: str = "", *,
          class_name: str = "mb-3") -> html.Div | html.Fieldset:
    """``control`` under a visible label that names it for assistive technology.

    Radio and check groups become a fieldset whose legend names the group; every other
    control gets ``<label for=control.id>``.
    """
    cid = getattr(control, "id", None)
    if not isinstance(cid, str):
        raise ValueError(f"field({label!r}): the control needs a string id to be labelled")
    hint = [dbc.FormText(help_text, id=f"{cid}--help")] if help_text else []
    if isinstance(control, _GROUP_CONTROLS):
        if isinstance(control, _RADIOS) and not getattr(control, "name", None):
            control.name = cid   # one radio group: one tab stop, arrow keys move in it
        return html.Fieldset(
            [html.Legend(label, id=label_id(cid), className="form-label fw-semibold small mb-1"),
             control, *hint], className=class_name)
    return html.Div(
        [html.Label(label, id=label_id(cid), htmlFor=cid,
                    className="form-label fw-semibold small mb-1"), control, *hint],
        className=class_name)


def progress(value: float, text: str, name: str, colour: str = "primary") -> html.Div:
    """A Bootstrap progress bar named ``name`` for assistive technology, its ``text``
    readable on every colour (``text-bg-*`` picks dark text on yellow)."""
    shown = max(0.0, min(float(value), 100.0))
    return html.Div(
        html.Div(text, className=f"progress-bar text-bg-{colour}",
                 style={"width": f"{shown:g}%"}),
        className="progress", role="progressbar",
        **{"aria-label": name, "aria-valuenow": f"{shown:.0f}", "aria-valuemin": "0",
           "aria-valuemax": "100", "aria-valuetext": text})


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _values(trace: Mapping, key: str) -> list:
    """A trace's array as a list (plain or numpy, or Plotly's base64 typed-array form)."""
    raw = trace.get(key)
    if isinstance(raw, Mapping) and isinstance(raw.get("bdata"), str):
        try:
            raw = np.frombuffer(base64.b64decode(raw["bdata"]), dtype=np.dtype(raw["dtype"]))
        except (ValueError, TypeError, KeyError):
            return []
    if isinstance(raw, np.ndarray):
        return raw.ravel().tolist()
    return list(raw) if isinstance(raw, list | tuple) else []


def _list(value: Any) -> list:
    return list(value) if isinstance(value, list | tuple) else []


def _at(values: list, i: int, default: Any = None) -> Any:
    return values[i] if i < len(values) else default


def _trace_rows(trace: Mapping) -> list[dict[str, Any]]:
    """One row per point (or per box) of a trace: its series and x beside what it draws."""
    name = trace.get("name") or ""
    xs = _values(trace, "x")
    if trace.get("type") == "box" and trace.get("median") is not None:
        stats = {text: _values(trace, key) for key, text in _BOX_STATS}
        n = max(len(v) for v in stats.values())
        return [{"Series": name, "x": _at(xs, i, name),
                 **{text: _at(v, i) for text, v in stats.items() if v}} for i in range(n)]
    ys = _values(trace, "y")
    error = trace.get("error_y")
    errs = _values(error, "array") if isinstance(error, Mapping) else []
    return [{"Series": name, "x": x, "y": _at(ys, i),
             **({"± error": _at(errs, i)} if errs else {})}
            for i, x in enumerate(xs or range(len(ys)))]


def _title(container: Any) -> str:
    title = container.get("title") if isinstance(container, Mapping) else None
    text = title.get("text") if isinstance(title, Mapping) else title
    return text if isinstance(text, str) else ""


def figure_table(figure: Any, caption: str = "") -> html.Table:
    """The numbers a Plotly figure draws, as a table (its text alternative).

    Bar and line traces give one row per point (series, x, y, error bar), precomputed box
    plots one row per box (whiskers, quartiles, median); a column a trace lacks shows "–".
    Only what the figure already holds is shown, so nothing private is added.
    """
    fig = figure.to_plotly_json() if hasattr(figure, "to_plotly_json") else figure
    fig = fig if isinstance(fig, Mapping) else {}
    traces = [t for t in _list(fig.get("data")) if isinstance(t, Mapping)]
    layout = fig.get("layout") if isinstance(fig.get("layout"), Mapping) else {}
    records = [row for trace in traces for row in _trace_rows(trace)]
    keys = list(dict.fromkeys(key for row in records for key in row))  # first-seen order
    rows = [[row.get(key) for key in keys] for row in records]
    x_title, y_title = _title(layout.get("xaxis")), _title(layout.get("yaxis"))
    header = [{"x": x_title or "x", "y": y_title or "y"}.get(k, k) for k in keys]
    shown = rows[:MAX_TABLE_ROWS]
    text = caption or _title(layout)
    if len(rows) > len(shown):
        text = f"{text} (first {len(shown)} of {len(rows)} points)".strip()
    body = [html.Tr([html.Td(_cell(v)) for v in row]) for row in shown]
    if not body:
        body = [html.Tr(html.Td("Nothing is plotted yet.", colSpan=max(1, len(header))))]
    return html.Table(
        [html.Caption(text or "Chart data"),
         html.Thead(html.Tr([html.Th(h, scope="col") for h in header])),
         html.Tbody(body)],
        className="table table-sm small chart-table")


def data_table(model: tuple[Sequence[Any], Sequence[Sequence[Any]]],
               caption: str | None = None) -> dbc.Table:
    """(header, rows) as a table whose first cell of each row heads that row."""
    header, rows = model
    return dbc.Table([*([html.Caption(caption, className="small")] if caption else []),
                      html.Thead(html.Tr([html.Th(h, scope="col") for h in header])),
                      html.Tbody([html.Tr([html.Th(r[0], scope="row"),
                                           *[html.Td(c) for c in r[1:]]]) for r in rows])],
                     size="sm", bordered=True, responsive=True, className="small data-table")


def chart_table_children(figure: Any) -> list | Any:
    """What a callback that redraws a chart returns to its ``table_id`` (``no_update`` when
    the figure is not redrawn)."""
    if figure is no_update:
        return no_update
    return _table_children(figure_table(figure))


def _table_children(table: Any) -> list:
    return [html.Summary(TABLE_SUMMARY, className="small"),
            html.Div(table, className="table-responsive")]


def chart_table(table: Any, table_id: str | None = None) -> html.Details:
    """A chart's table, folded under a summary right after the chart."""
    props = {"id": table_id} if table_id else {}
    return html.Details(_table_children(table), className="chart-alt mt-1 mb-3", **props)


def chart(figure: Any, graph_id: str | dict, table: Any = None, *,
          table_id: str | None = None, note: Any = None, **graph_props: Any) -> html.Div:
    """A ``dcc.Graph`` followed by its text alternative (``figure_table`` unless given).

    ``graph_props`` go to the graph (className, ...); the config is always the app's one
    ``GRAPH_CONFIG`` (nothing leaves the machine). ``note``: text under the chart (what its
    marks mean), HTML so that it wraps on any screen. A callback that redraws the figure
    returns a new ``figure_table`` to ``table_id`` as well.
    """
    table = table if table is not None else figure_table(figure)
    graph_props.pop("config", None)
    notes = [html.P(note, className="chart-note small mb-1")] if note else []
    return html.Div([dcc.Graph(id=graph_id, figure=figure, config=GRAPH_CONFIG, **graph_props),
                     *notes, chart_table(table, table_id)], className="chart")
