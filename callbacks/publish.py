"""Publish page (owner) and published views (audience): authorize, validate, ask the service.

The owner check runs on the server for every call (``callbacks.guard``; ``PublishService``
refuses anyone else too). A published page is drawn by Dash Pages (one opening = one delivery
per figure), titled with its own title for those who may open it; its HTML export, its CSV and
its JSON release reports (with each figure's reproduction script) are plain routes behind the
same session guard.
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import date, timedelta

import dash_bootstrap_components as dbc
import flask
from dash import ALL, Input, Output, State, ctx, dcc, no_update

from callbacks import guard
from dp_engine.errors import DPError
from layouts import ids
from layouts.components.graph_config import GRAPH_CONFIG
from layouts.components.shell import page_title
from layouts.publish import page as layout
from layouts.publish import view as view_layout
from layouts.publish.export import page_html
from services import reproduce
from services.container import Services
from services.identity.roles import Role
from services.ledger import db as ledger_db
from services.publish.export import page_csv
from services.publish.service import (
    EXPORT_CHANNEL,
    NOT_FOUND,
    OWNER_ONLY,
    Draft,
    PublishError,
    parse_audience,
)
from services.views.report import release_report

log = logging.getLogger(__name__)
VIEW_PATH = re.compile(r"^/views/([^/]{1,100})(/demo)?/?$")
DEFAULT_DAYS = 30


def _alert(text: str, colour: str = "warning") -> dbc.Alert:
    return dbc.Alert(text, color=colour, className="py-2")


def _text(value) -> str:
    """A text field from the browser: the string, else empty (the service checks it)."""
    return value if isinstance(value, str) else ""


# ---- the two pages ---------------------------------------------------------------------------

def view_for(services: Services, identity, path: str):
    """``/views/<slug>`` (or ``.../demo``) for ``identity``: the page, a closed notice for its
    audience, or the one answer shared by unknown pages and pages that are not theirs."""
    m = VIEW_PATH.match(path)
    opened = services.publish.open(identity, m.group(1)) if m else None
    if opened is None:
        return view_layout.not_found(NOT_FOUND)
    if opened.state != "ok":
        return view_layout.closed(opened)
    if m and m.group(2):
        return view_layout.demo_deck(opened, GRAPH_CONFIG)
    return view_layout.view_page(opened, GRAPH_CONFIG)


def view_title(path: str) -> str:
    """The document title at ``/views/<slug>`` (and its demo): the page's own title for those
    who may open it, a neutral one for anyone else (nothing is read but the title)."""
    m = VIEW_PATH.match(path or "")
    services: Services = flask.current_app.extensions["cohort"]
    title = services.publish.title_for(services.identity.current(), m.group(1)) if m else None
    if title is None:
        return page_title(PUBLISHED)
    return page_title(f"{title} (demo)" if m.group(2) else title)


def publish_view(services: Services, identity, _path: str = "/publish"):
    """The owner's Publish page (the guard lets only the owner in)."""
    datasets = [(d.id, d.title) for d in services.registry.list()]
    today = ledger_db.now().date()
    return layout.publish_page(datasets, services.publish.pages(identity),
                               today + timedelta(days=DEFAULT_DAYS))


PUBLISHED = "Published page"
PAGE = guard.Page("publish", "/publish", "Publish", Role.OWNER, publish_view)
VIEW_PAGE = guard.Page("view", "/views/<slug>", PUBLISHED, Role.THIRD_PARTY, view_for, nav=False,
                       title_at=view_title)
"""A published page (and its demo): open to every role, its audience checked by the service;
titled with the page's own title."""


# ---- owner callbacks -------------------------------------------------------------------------

def _draft(dataset, title, audience, user, expires, picked, captions, orders) -> Draft:
    """A draft from untrusted form values (checked again by the service)."""
    try:
        expires_on = date.fromisoformat(expires) if isinstance(expires, str) else None
    except ValueError:
        expires_on = None
    if expires_on is None:
        raise PublishError("Choose an expiry date (YYYY-MM-DD).")
    keys = [k for k in (picked or []) if isinstance(k, str)]
    cap = {c["id"]["index"]: c.get("value") for c in captions or [] if _pm(c)}
    pos = {o["id"]["index"]: o.get("value") for o in orders or [] if _pm(o)}

    def order(item: tuple[int, str]) -> tuple[float, int]:
        n, key = item
        value = pos.get(key)
        return (float(value) if isinstance(value, int | float) else n + 1, n)

    ordered = [k for _, k in sorted(enumerate(keys), key=order)]
    return Draft(_text(title), _text(dataset), parse_audience(audience, user), expires_on,
                 tuple((k, cap.get(k) if isinstance(cap.get(k), str) else "") for k in ordered))


def _pm(item) -> bool:
    return isinstance(item, dict) and isinstance(item.get("id"), dict) and "index" in item["id"]


def register_callbacks(app, services: Services) -> None:
    """Bind the Publish callbacks and the export routes to ``app``."""

    @app.callback(Output(ids.PUB_FIGURES, "options"), Output(ids.PUB_FIGURES, "value"),
                  Input(ids.PUB_DATASET, "value"))
    def _candidates(dataset):
        identity = services.identity.current()
        try:
            cands = services.publish.candidates(identity, _text(dataset))
        except DPError:
            return [], []
        return layout.candidate_options(cands), []

    @app.callback(Output(ids.PUB_SELECTED, "children"),
                  Input(ids.PUB_FIGURES, "value"), State(ids.PUB_FIGURES, "options"))
    def _selected(picked, options):
        if guard.owner(services) is None:
            return None
        labels = {o.get("value"): o.get("label") for o in options or []
                  if isinstance(o, dict)}
        return layout.selected_rows([(k, str(labels[k])) for k in picked or []
                                     if isinstance(k, str) and k in labels])

    form = [State(ids.PUB_DATASET, "value"), State(ids.PUB_TITLE, "value"),
            State(ids.PUB_AUDIENCE, "value"), State(ids.PUB_USER, "value"),
            State(ids.PUB_EXPIRES, "value"), State(ids.PUB_FIGURES, "value"),
            State({"type": ids.PUB_CAPTION, "index": ALL}, "value"),
            State({"type": ids.PUB_ORDER, "index": ALL}, "value")]

    def _with_ids(captions, orders) -> tuple[list, list]:
        """The captions' and positions' states with their ids (as the browser sent them)."""
        found: dict[str, list] = {ids.PUB_CAPTION: [], ids.PUB_ORDER: []}
        for state in ctx.states_list or []:
            if isinstance(state, list) and state and _pm(state[0]):
                kind = state[0]["id"].get("type")
                if kind in found:
                    found[kind] = state
        return found[ids.PUB_CAPTION], found[ids.PUB_ORDER]

    @app.callback(Output(ids.PUB_QUOTE_OUT, "children"), Output(ids.PUB_QUOTED, "data"),
                  Output(ids.PUB_CONFIRM, "disabled"),
                  Input(ids.PUB_QUOTE, "n_clicks"), *form, prevent_initial_call=True)
    def _quote(_n, dataset, title, audience, user, expires, picked, captions, orders):
        identity = guard.owner(services)
        if identity is None:
            return _alert(OWNER_ONLY), None, True
        try:
            draft = _draft(dataset, title, audience, user, expires, picked,
                           *_with_ids(captions, orders))
            quotes = services.publish.quote(identity, draft)
        except DPError as exc:
            return _alert(str(exc)), None, True
        except Exception:
            log.exception("Publish quote failed")
            return _alert("The cost could not be computed; nothing was released.",
                          "danger"), None, True
        return (layout.quote_table(quotes), {"total": quotes.total},
                not quotes.affordable)

    @app.callback(Output(ids.PUB_MESSAGE, "children"), Output(ids.PUB_LIST, "children"),
                  Output(ids.PUB_CONFIRM, "disabled", allow_duplicate=True),
                  Input(ids.PUB_CONFIRM, "n_clicks"),
                  Input({"type": ids.PUB_WITHDRAW, "index": ALL}, "n_clicks"),
                  *form, State(ids.PUB_QUOTED, "data"), prevent_initial_call=True)
    def _act(_n, withdraw_clicks, dataset, title, audience, user, expires, picked, captions,
             orders, quoted):
        identity = guard.owner(services)
        if identity is None:
            return _alert(OWNER_ONLY), no_update, True
        trigger = ctx.triggered_id
        try:
            if isinstance(trigger, dict) and trigger.get("type") == ids.PUB_WITHDRAW:
                if not any(withdraw_clicks or []):
                    return no_update, no_update, no_update
                done = services.publish.withdraw(identity, str(trigger.get("index")))
                msg = _alert("The page was withdrawn." if done else "There is no such page.",
                             "info")
                return msg, layout.page_list(services.publish.pages(identity)), no_update
            cost = quoted.get("total") if isinstance(quoted, dict) else None
            if trigger != ids.PUB_CONFIRM or not isinstance(cost, int | float):
                return _alert("Check the cost before publishing."), no_update, True
            draft = _draft(dataset, title, audience, user, expires, picked,
                           *_with_ids(captions, orders))
            page = services.publish.publish(identity, draft, confirmed_cost=float(cost))
        except DPError as exc:
            return _alert(str(exc)), no_update, True
        except Exception:
            log.exception("Publishing failed")
            return _alert("The page could not be published. Check the ledger for what was "
                          "released.", "danger"), no_update, True
        link = f"/views/{page.slug}"
        msg = dbc.Alert(["Published: ", flask_link(link)], color="success", className="py-2")
        return msg, layout.page_list(services.publish.pages(identity)), True

    @app.callback(Output(ids.PUB_COHORT_PERIOD, "value"),
                  Output(ids.PUB_COHORT_INCLUSION, "value"),
                  Output(ids.PUB_COHORT_SOURCE, "value"),
                  Output(ids.PUB_COHORT_MESSAGE, "children"),
                  Input(ids.PUB_DATASET, "value"))
    def _cohort(dataset):
        identity = guard.owner(services)
        if identity is None:
            return "", "", "", _alert(OWNER_ONLY)
        try:
            cohort = services.publish.cohort(identity, _text(dataset))
        except DPError:
            return "", "", "", None
        return (*layout.cohort_values(cohort), None)

    @app.callback(Output(ids.PUB_COHORT_MESSAGE, "children", allow_duplicate=True),
                  Input(ids.PUB_COHORT_SAVE, "n_clicks"),
                  State(ids.PUB_DATASET, "value"), State(ids.PUB_COHORT_PERIOD, "value"),
                  State(ids.PUB_COHORT_INCLUSION, "value"),
                  State(ids.PUB_COHORT_SOURCE, "value"), prevent_initial_call=True)
    def _save_cohort(_n, dataset, period, inclusion, source):
        identity = guard.owner(services)
        if identity is None:
            return _alert(OWNER_ONLY)
        try:
            saved = services.publish.save_cohort(identity, _text(dataset), period, inclusion,
                                                 source)
        except DPError as exc:
            return _alert(str(exc))
        except Exception:
            log.exception("Saving a cohort description failed")
            return _alert("The description could not be saved; nothing was changed.", "danger")
        return _alert(f"Saved: every published page of '{saved.dataset_id}' shows it.",
                      "success")

    register_routes(app.server, services)


def flask_link(href: str):
    return dcc.Link(href, href=href, id="publish-new-link", className="alert-link")


# ---- export routes ---------------------------------------------------------------------------

def register_routes(server: flask.Flask, services: Services) -> None:
    """``/views/<slug>/export.html``, ``/views/<slug>/page.csv`` and
    ``/views/<slug>/reports.json`` (same access rules)."""

    def _opened(slug: str):
        opened = services.publish.open(services.identity.current(), slug,
                                       channel=EXPORT_CHANNEL)
        if opened is None:
            flask.abort(404, NOT_FOUND)
        if opened.state != "ok":
            flask.abort(410, opened.message)
        return opened

    @server.get("/views/<slug>/export.html", endpoint="published_export_html")
    def _export_html(slug: str):
        opened = _opened(slug)
        return flask.Response(page_html(opened, GRAPH_CONFIG), mimetype="text/html",
                              headers=_attachment(opened.page.slug + ".html"))

    @server.get("/views/<slug>/page.csv", endpoint="published_page_csv")
    def _page_csv(slug: str):
        opened = _opened(slug)
        return flask.Response(page_csv(opened), mimetype="text/csv",
                              headers=_attachment(opened.page.slug + ".csv"))

    @server.get("/views/<slug>/reports.json", endpoint="published_reports")
    def _reports(slug: str):
        opened = _opened(slug)
        user = services.identity.current().user
        body = {"page": {"title": opened.page.title, "slug": opened.page.slug,
                         "audience": opened.page.audience.label,
                         "tier_role": opened.page.tier_role.value,
                         "total_epsilon": opened.total_epsilon},
                "figures": [{"caption": f.ref.caption,
                             **release_report(f.release, exported_by=user,
                                              reproduce=_script(services, f.release))}
                            for f in opened.figures]}
        return flask.Response(json.dumps(_finite(body), indent=2, allow_nan=False, default=str),
                              mimetype="application/json",
                              headers=_attachment(opened.page.slug + "-reports.json"))


def _script(services: Services, release) -> dict | None:
    script = reproduce.for_release(release, ledger=services.ledger, registry=services.registry)
    return None if script is None else script.to_dict()


def _finite(value):
    """JSON without NaN or infinity (not valid JSON): such numbers become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _attachment(name: str) -> dict[str, str]:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
    return {"Content-Disposition": f'attachment; filename="{safe}"'}
