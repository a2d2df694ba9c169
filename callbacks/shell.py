"""Routing: render the page for the path, for the session's role only."""

from __future__ import annotations

import json
import logging

from dash import Input, Output, State

from callbacks import publish, studio
from callbacks.ledger import page_view as ledger_page
from layouts import ids
from layouts.anonymize import page as anonymize
from layouts.components import shell
from layouts.data import page as data
from layouts.explore import page as explore
from services.container import Services
from services.identity import access
from services.identity.roles import Role
from services.identity.session import logout_token

log = logging.getLogger(__name__)


def page_for(services: Services, identity, path: str):
    """The page at ``path`` for ``identity``, or a refusal below the page's lowest role."""
    role: Role = identity.role
    if publish.is_view_path(path):   # a published page: its own access rules
        return publish.view_for(services, identity, path)
    label, lowest = shell.PAGES.get(path, shell.PAGES["/"])
    if role.rank < lowest.rank:
        return shell.forbidden(label)
    if path == "/data":
        return data.layout(services.registry, identity)
    if path == "/ledger":
        return ledger_page(services, identity)
    if path == "/publish":
        return publish.publish_view(services, identity)
    if path == "/release":
        return studio.studio_view(services, identity)
    if path == "/anonymize":
        return anonymize.layout(services.registry, identity)
    return explore.layout(access.queryable(identity, services.registry.list()), identity)


def register_callbacks(app, services: Services) -> None:
    @app.callback(
        Output(ids.PAGE, "children"), Output(ids.NAV, "children"),
        Output(ids.SESSION_BADGE, "children"),
        Input(ids.URL, "pathname"),
    )
    def _route(pathname):
        identity = services.identity.current()
        path = pathname if isinstance(pathname, str) else "/"
        return (page_for(services, identity, path), shell.nav_links(identity.role, path),
                shell.session_badge(identity.user, identity.role, logout_token()))

    # Each route's own document title, also after in-page navigation (no reload).
    app.clientside_callback(
        "function (path) { const titles = " + json.dumps(shell.page_titles()) + ";"
        " document.title = titles[path] || titles['/']; return ''; }",
        Output(ids.TITLE_SINK, "children"), Input(ids.URL, "pathname"),
    )
    # The navbar's menu button at phone width (state also told to screen readers).
    app.clientside_callback(
        "function (n, open) { const next = n ? !open : false;"
        " return [next, next ? 'true' : 'false']; }",
        Output(ids.NAV_COLLAPSE, "is_open"), Output(ids.NAV_TOGGLE, "aria-expanded"),
        Input(ids.NAV_TOGGLE, "n_clicks"), State(ids.NAV_COLLAPSE, "is_open"),
    )
