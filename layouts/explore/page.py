"""Explore page: controls, chart area and the privacy side panel (no computation here)."""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import dcc, html

from dp_engine.bands import NOISE_BANDS, NOISE_LABELS
from dp_engine.schema import NUMERIC_KINDS, Schema
from layouts import ids
from layouts.components.accessible import field
from layouts.explore.my_releases import my_releases
from services.identity.roles import Role
from services.views.queries import GROUPABLE_KINDS, MECHANISMS, PRESETS, VIEWS

DEFAULT_PRESET = "fig2"
"""The controls start on this preset's view (shown as a free preview; nothing is released)."""


def role_options(granted: Role) -> list[dict]:
    """Only the granted role and lower ones (the server clamps anyway)."""
    return [{"label": f"{r.label} — {NOISE_LABELS[r.noise_factor]} noise "
                      f"({NOISE_BANDS[r.noise_factor][0]:g}–{NOISE_BANDS[r.noise_factor][1]:g} %)",
             "value": r.value} for r in granted.allowed()]


def column_options(schema: Schema, *, numeric_only: bool = False) -> list[dict]:
    return [{"label": c.display, "value": c.name} for c in schema.queryable_columns()
            if not numeric_only or c.kind in NUMERIC_KINDS]


def group_options(schema: Schema) -> list[dict]:
    return [{"label": "No grouping", "value": "none"},
            *[{"label": c.display, "value": c.name} for c in schema.queryable_columns()
              if c.kind in GROUPABLE_KINDS and c.categories]]


def layout(datasets: list, identity) -> html.Div:
    """The page for ``identity``; ``datasets`` are the ones this role may query."""
    granted: Role = identity.role
    owner = granted is Role.OWNER
    if not datasets:
        return dbc.Alert("No dataset is available to your role yet: the data owner has to "
                         "confirm a dataset's public schema first.", color="info")
    first = datasets[0]
    preset = PRESETS[DEFAULT_PRESET]
    controls = [
        field("Reproduce a paper figure (one-click release)",
               dcc.Dropdown(id=ids.EX_PRESET, clearable=True, value=None,
                            placeholder="Choose a figure to release it",
                            options=[{"label": p.label, "value": k} for k, p in PRESETS.items()]),
               "Choosing one releases it at once; the list shows each one's cost."),
        field("Dataset",
               dcc.Dropdown(id=ids.EX_DATASET, clearable=False, value=first.id,
                            options=[{"label": d.title or d.id, "value": d.id}
                                     for d in datasets])),
        field("View as", dbc.RadioItems(id=ids.EX_ROLE, value=granted.value,
                                         options=role_options(granted)),
               "You can preview a less privileged role, never a more privileged one."),
        field("View",
               dcc.Dropdown(id=ids.EX_VIEW, clearable=False, value=preset.view,
                            options=[{"label": v, "value": k} for k, v in VIEWS.items()])),
        field("Measured column",
               dcc.Dropdown(id=ids.EX_X, clearable=False, value=preset.x,
                            options=column_options(first.schema))),
        field("Group by",
               dcc.Dropdown(id=ids.EX_GROUP, clearable=False, value=preset.group or "none",
                            options=group_options(first.schema))),
        field("Leave out groups",
               dcc.Dropdown(id=ids.EX_WITHOUT, multi=True, value=[], options=[],
                            placeholder="None: every group is in the view"),
               "A small group can set a view's price; the view without it costs less."),
    ]
    if owner:
        controls += [
            field("Mechanism",
                   dbc.RadioItems(id=ids.EX_MECHANISM, value="sound",
                                  options=[{"label": v, "value": k}
                                           for k, v in MECHANISMS.items()]),
                   "Paper mode reproduces PyDPLib; it is not differentially private "
                   "as labelled."),
            dbc.Switch(id=ids.EX_COMPARE, label="Compare low / medium / high noise",
                       value=False, className="mb-2"),
        ]
    else:
        # Hidden stand-ins keep one callback signature; paper mode is simply not offered
        # and the server answers any forged value in sound mode.
        controls.append(html.Div(
            [dbc.RadioItems(id=ids.EX_MECHANISM, value="sound",
                            options=[{"label": MECHANISMS["sound"], "value": "sound"}]),
             dbc.Switch(id=ids.EX_COMPARE, value=False)], hidden=True))
    # The chart column comes first below 992 px (phones): the Release button and the chart
    # open the page there too, the controls follow them.
    return html.Div([
        html.H1("Explore the cohort", className="h3 mb-1"),
        html.P("Every number released here is differentially private and labelled with the ε "
               "that produced it; until you press Release the chart is a free, simulated "
               "preview.", className="text-muted mb-2 d-none d-md-block explore-intro"),
        dbc.Row(id=ids.EX_ROW, className="explore-row", children=[
            dbc.Col([dbc.Card(dbc.CardBody(controls), className="controls-card mb-3"),
                     dbc.Card(dbc.CardBody(my_releases()), className="controls-card")],
                    lg=3, md=12, className="mb-3 controls-col order-2 order-lg-1"),
            dbc.Col([release_bar(),
                     html.Div(id=ids.EX_MESSAGE, role="status", **{"aria-live": "polite"}),
                     dcc.Loading(html.Div(id=ids.EX_GRAPHS, className="graphs", tabIndex="-1",
                                          role="region", **{"aria-label": "Result"}),
                                 id=ids.EX_LOADING, type="default", delay_show=300)],
                    lg=6, md=12, className="mb-3 graphs-col order-1 order-lg-2"),
            dbc.Col(html.Aside(id=ids.EX_PANEL, **{"aria-label": "Privacy panel"}),
                    lg=3, md=12, className="panel-col order-3"),
        ]),
        dcc.Download(id=ids.EX_DOWNLOAD),
        dcc.Store(id=ids.EX_FOCUS, data=0),
    ])


def release_bar() -> html.Div:
    """The Release button (its label states the cost) and the line beside it, right above
    the chart, so the price and the chart are read together without scrolling."""
    return html.Div([
        dbc.Button("Release", id=ids.EX_RELEASE, color="primary", className="release-button",
                   disabled=True, n_clicks=0),
        html.Div(id=ids.EX_RELEASE_NOTE, className="small text-muted release-note",
                 role="status", **{"aria-live": "polite"}),
    ], className="release-bar mb-2")
