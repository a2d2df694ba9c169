"""Explore-page callbacks: authorize, validate, ask the release service, build figures."""

from __future__ import annotations

import logging
from dataclasses import replace

import dash_bootstrap_components as dbc
from dash import Input, Output, dcc, no_update

from dp_engine.errors import DPError
from layouts import ids
from layouts import panel as panels
from layouts.explore import column_options, group_options
from layouts.figures import build
from services.container import Services
from services.identity import access
from services.identity.roles import Role
from services.views.queries import PRESETS, parse_request

log = logging.getLogger(__name__)
ROW = "explore-row"
GRAPH_CONFIG = {"displaylogo": False, "responsive": True,
                "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def _alert(text: str, colour: str = "warning") -> dbc.Alert:
    return dbc.Alert(text, color=colour, className="py-2")


def _graph(fig, index: int | str) -> dcc.Graph:
    return dcc.Graph(id={"type": ids.EX_GRAPH, "index": str(index)}, figure=fig,
                     config=GRAPH_CONFIG, className="dp-graph")


def render(services: Services, dataset, role, view, x, group, mechanism, compare):
    """The whole Explore answer for the session: (graphs, panel, message, row class)."""
    identity = services.identity.current()
    granted: Role = identity.role
    raw = {"dataset": dataset, "role": role, "view": view, "x": x, "group": group,
           "mechanism": mechanism}
    try:
        ds = services.registry.get(dataset if isinstance(dataset, str) else "",
                                   owner=granted is Role.OWNER)
        req = parse_request(raw, granted, ds.schema)
        if compare is True and access.is_owner(identity):
            answers = [services.releases.answer(identity, replace(req, role=r), dataset=ds)
                       for r in (Role.OWNER, Role.COLLABORATOR, Role.THIRD_PARTY)]
            graphs = dbc.Row([dbc.Col(_graph(build(a, compact=True), a.tier), lg=4, md=12)
                              for a in answers], className="g-2")
            return graphs, panels.compare_panel(answers, granted), None, ROW + " compare"
        ans = services.releases.answer(identity, req, dataset=ds)
        return _graph(build(ans), "main"), panels.panel(ans, granted), None, ROW
    except DPError as exc:
        return no_update, no_update, _alert(str(exc)), no_update
    except Exception:  # never a 500: log for the operator, a plain message for the user
        log.exception("Explore view failed")
        return no_update, no_update, _alert(
            "This view could not be computed. Nothing was charged and your data and budget "
            "are unchanged; try another view or contact the data owner.", "danger"), no_update


def register_callbacks(app, services: Services) -> None:
    """Bind the Explore callbacks to ``app`` (never the global dash.callback)."""

    @app.callback(
        Output(ids.EX_X, "options"), Output(ids.EX_GROUP, "options"),
        Input(ids.EX_DATASET, "value"),
    )
    def _columns(dataset):
        identity = services.identity.current()
        try:
            ds = services.registry.get(dataset if isinstance(dataset, str) else "",
                                       owner=identity.role is Role.OWNER)
        except DPError:
            return [], []
        return column_options(ds.schema), group_options(ds.schema)

    @app.callback(
        Output(ids.EX_VIEW, "value"), Output(ids.EX_X, "value"), Output(ids.EX_GROUP, "value"),
        Output(ids.EX_ROLE, "value"),
        Input(ids.EX_PRESET, "value"),
        prevent_initial_call=True,
    )
    def _preset(key):
        preset = PRESETS.get(key) if isinstance(key, str) else None
        if preset is None:
            return no_update, no_update, no_update, no_update
        granted = services.identity.current().role
        role = access.viewing_role(granted, preset.role.value) if preset.role else granted
        return preset.view, preset.x, preset.group or "none", role.value

    @app.callback(
        Output(ids.EX_GRAPHS, "children"), Output(ids.EX_PANEL, "children"),
        Output(ids.EX_MESSAGE, "children"), Output(ids.EX_ROW, "className"),
        Input(ids.EX_DATASET, "value"), Input(ids.EX_ROLE, "value"),
        Input(ids.EX_VIEW, "value"), Input(ids.EX_X, "value"), Input(ids.EX_GROUP, "value"),
        Input(ids.EX_MECHANISM, "value"), Input(ids.EX_COMPARE, "value"),
    )
    def _render(dataset, role, view, x, group, mechanism, compare):
        return render(services, dataset, role, view, x, group, mechanism, compare)
