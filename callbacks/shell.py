"""Routing: every page registered with Dash Pages and drawn through the one guard; the
navigation bar and the session badge.

Dash Pages' registry is global to the process while a process may hold several apps (tests
build many): registering is idempotent, and a page's layout finds its own app's services
when it is drawn (``flask.current_app``). Callbacks are registered per app.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import dash
import flask
from dash import Input, Output, State

from callbacks import anonymize, data, explore, ledger, publish, studio
from callbacks.guard import Page, allowed, open_page
from callbacks.server.auth import logout_token
from layouts import ids
from layouts.components import shell
from services.container import Services

PAGES: tuple[Page, ...] = (explore.PAGE, data.PAGE, ledger.PAGE, anonymize.PAGE, publish.PAGE,
                           studio.PAGE)
"""The pages of the navigation bar, in its order."""
VIEW = publish.VIEW_PAGE
UNKNOWN = Page("not_found_404", "/not-found", explore.PAGE.label, explore.PAGE.lowest,
               explore.PAGE.render, nav=False)
"""Any other path shows Explore (Dash Pages draws the page named ``not_found_404``)."""
_BY_PATH = {p.path: p for p in PAGES}
_VIEW_PATH = re.compile(r"^/views/.")


def page_at(path: str | None) -> Page:
    """The page Dash Pages draws at ``path``."""
    path = (path or "/").rstrip("/") or "/"
    if path in _BY_PATH:
        return _BY_PATH[path]
    return VIEW if _VIEW_PATH.match(path) else UNKNOWN


def page_title(path: str | None) -> str:
    """The document title at ``path`` (also the first HTML's, see ``app.install_page_titles``)."""
    return page_at(path).title_for(path or "/")


def page_titles() -> dict[str, str]:
    """Every navigation page's title, by path."""
    return {p.path: p.title for p in PAGES}


def page_for(services: Services, identity, path: str):
    """What ``identity`` sees at ``path``: the page, or the guard's refusal."""
    return open_page(page_at(path), services, identity, path)


def _requested_path(default: str) -> str:
    """The path the router is drawing (Dash Pages passes the query string, not the path)."""
    path = dash.callback_context.inputs.get(f"{ids.PAGE_LOCATION}.pathname")
    return path if isinstance(path, str) else default


def _layout(page: Page, **_query: Any):
    """``page`` for the session of this request, drawn with its app's services."""
    services: Services = flask.current_app.extensions["cohort"]
    return open_page(page, services, services.identity.current(), _requested_path(page.path))


def _title(page: Page, **_path_variables: Any) -> str:
    """A page's title for the path the router is drawing (Dash Pages calls it per visit)."""
    return page.title_for(_requested_path(page.path))


def register_pages() -> None:
    """Every page into Dash Pages' registry, with its URL (or URL template) and title."""
    for order, page in enumerate((*PAGES, VIEW, UNKNOWN)):
        templated = "<" in page.path
        title = functools.partial(_title, page) if page.title_at else page.title
        dash.register_page(f"callbacks.{page.name}", name=page.label, title=title,
                           order=order, path=None if templated else page.path,
                           path_template=page.path if templated else None,
                           layout=functools.partial(_layout, page))


def register_callbacks(app, services: Services) -> None:
    @app.callback(
        Output(ids.NAV, "children"), Output(ids.SESSION_BADGE, "children"),
        Input(ids.URL, "pathname"),
    )
    def _frame(pathname):
        identity = services.identity.current()
        path = pathname if isinstance(pathname, str) else "/"
        links = [(p.path, p.label) for p in PAGES if p.nav and allowed(p, identity)]
        return (shell.nav_links(links, path),
                shell.session_badge(identity.user, identity.role, logout_token()))

    # The navbar's menu button at phone width (state also told to screen readers).
    app.clientside_callback(
        "function (n, open) { const next = n ? !open : false;"
        " return [next, next ? 'true' : 'false']; }",
        Output(ids.NAV_COLLAPSE, "is_open"), Output(ids.NAV_TOGGLE, "aria-expanded"),
        Input(ids.NAV_TOGGLE, "n_clicks"), State(ids.NAV_COLLAPSE, "is_open"),
    )
