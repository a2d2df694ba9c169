"""The app frame: navigation bar, session badge and the page container (Dash Pages draws each
page into it; the pages themselves are declared in ``callbacks.shell``)."""

from __future__ import annotations

from collections.abc import Iterable

import dash
import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from services.identity.roles import Role

PRODUCT = "Private Cohort Explorer"
MAIN_ID = ids.PAGE
"""The skip link's target: the page body."""


def page_title(label: str) -> str:
    """The document title of the page labelled ``label``."""
    return f"{label} · {PRODUCT}"


def layout() -> html.Div:
    """Static frame; Dash Pages draws the page body into ``dash.page_container``."""
    brand = html.A([html.Img(src="/assets/logo.svg", height="30", alt=""),
                    html.Span(PRODUCT, className="brand-text")],
                   href="/", className="navbar-brand d-flex align-items-center gap-2")
    toggle = html.Button(html.Span(className="navbar-toggler-icon"), id=ids.NAV_TOGGLE,
                         n_clicks=0, type="button", className="navbar-toggler",
                         **{"aria-label": "Menu", "aria-controls": ids.NAV_COLLAPSE,
                            "aria-expanded": "false"})
    menu = dbc.Collapse([dbc.Nav(id=ids.NAV, className="me-auto", navbar=True),
                         html.Div(id=ids.SESSION_BADGE, className="session-badge")],
                        id=ids.NAV_COLLAPSE, is_open=False, navbar=True)
    return html.Div([
        dcc.Location(id=ids.URL, refresh=False),
        # An empty, hidden graph makes the browser fetch and parse plotly.js while the
        # first answer is being computed, instead of after it arrives.
        html.Div(dcc.Graph(id=ids.PRELOAD_GRAPH, figure={"data": [], "layout": {}},
                           config={"staticPlot": True}), hidden=True),
        html.A("Skip to main content", href=f"#{MAIN_ID}",
               className="skip-link visually-hidden-focusable"),
        dbc.Navbar(dbc.Container([brand, toggle, menu], fluid=True), color="primary", dark=True,
                   expand="md", className="mb-3"),
        dbc.Container(html.Main(dash.page_container, id=ids.PAGE, tabIndex="-1"), fluid=True,
                      className="pb-5"),
    ])


def nav_links(pages: Iterable[tuple[str, str]], pathname: str) -> list[dbc.NavItem]:
    """Links to ``pages`` ((path, label): the ones the session's role may open)."""
    return [dbc.NavItem(dbc.NavLink(label, href=path, active=path == pathname))
            for path, label in pages]


def session_badge(user: str, role: Role, logout_csrf: str | None) -> list:
    """Role and user; a sign-out form (POST with the session's CSRF token) when signed in."""
    items: list = [dbc.Badge(role.label, color="light", text_color="primary", className="me-2"),
                   html.Span(user, className="text-white small")]
    if logout_csrf:
        items.append(html.Form(
            [dcc.Input(type="hidden", name="csrf", value=logout_csrf),
             html.Button("Log out", type="submit", className="btn btn-link link-light btn-sm")],
            action="/logout", method="post", className="d-inline ms-2"))
    return items


def forbidden(label: str) -> dbc.Alert:
    return dbc.Alert(f"The {label} page is for the data owner (the hospital). Your role cannot "
                     "open it.", color="warning")
