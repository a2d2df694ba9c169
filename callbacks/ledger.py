"""Ledger page callbacks: filter releases and totals, export CSV — owner only, checked per call
(``callbacks.guard``)."""

from __future__ import annotations

from datetime import UTC, datetime

import dash_bootstrap_components as dbc
from dash import Input, Output, State, dcc, no_update

from callbacks import guard
from layouts import ids
from layouts.ledger import page
from services.container import Services
from services.identity.roles import Role


def _clean(value) -> str | None:
    """A filter value from the browser: a non-empty string, else no filter."""
    return value if isinstance(value, str) and value else None


def page_view(services: Services, identity, _path: str = "/ledger"):
    """The whole ledger page (the guard lets only the owner in): the data is read here, the
    layout only draws."""
    ledger = services.ledger
    everything = [d.id for d in services.registry.list()]
    return page.layout(page.LedgerPage(
        budgets=ledger.budgets(), datasets=ledger.dataset_statuses(), users=ledger.users(),
        dataset_ids=ledger.dataset_ids(), totals=ledger.totals(),
        releases=ledger.releases(limit=page.MAX_ROWS), release_count=ledger.count_releases(),
        internal=ledger.internal_releases(limit=page.MAX_ROWS),
        settings=settings(services, everything), history=ledger.policy_history(),
        all_datasets=everything))


def settings(services: Services, dataset_ids: list[str]) -> list[page.Setting]:
    """Every setting in force, for every dataset and per dataset where the owner set one."""
    ledger = services.ledger
    changed = {(h.dataset_id, h.key) for h in ledger.policy_history(limit=10_000)}
    out = []
    for ds in [page.EVERY, *dataset_ids]:
        policy = ledger.policy_for(ds)
        for key in page.SETTINGS:
            if ds != page.EVERY and (ds, key) not in changed:
                continue      # a dataset shows only what differs from every dataset's
            value = _value(policy, key)
            source = "owner" if (ds, key) in changed or (page.EVERY, key) in changed \
                else "default"
            out.append(page.Setting(ds, key, value, source))
    return out


def _value(policy, key: str) -> float | None:
    kind, _, role = key.partition(":")
    if kind == "budget":
        return policy.limit(role)
    if kind == "user_limit":
        return policy.user_limit(role)
    return policy.dataset_cap


@guard.owner_only(lambda: (guard.refusal(PAGE), no_update))
def save_setting(services: Services, dataset, key, value):
    """Record the owner's new setting (every input untrusted); (message, settings block)."""
    everything = [d.id for d in services.registry.list()]
    if dataset not in (page.EVERY, *everything) or key not in page.SETTINGS:
        return _alert("Choose a dataset and a setting from the lists.", "warning"), no_update
    if value in (None, ""):
        number = None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    else:
        return _alert("Type a number of ε (0 or more), or leave it empty for no limit.",
                      "warning"), no_update
    identity = services.identity.current()
    try:
        services.ledger.set_policy(dataset_id=dataset, key=key, value=number,
                                   user=identity.user)
    except ValueError as exc:
        return _alert(str(exc), "warning"), no_update
    where = "every dataset" if dataset == page.EVERY else f"dataset '{dataset}'"
    shown = "no limit" if number is None else f"ε {number:g}"
    block = page.settings_block(settings(services, everything), services.ledger.policy_history())
    return (_alert(f"Saved: {page.SETTINGS[key].lower()} on {where} is now {shown}, in force "
                   "from the next request.", "success"), block)


def _alert(text: str, colour: str):
    return dbc.Alert(text, color=colour, className="small py-2")


PAGE = guard.Page("ledger", "/ledger", "Ledger", Role.OWNER, page_view)


@guard.owner_only(lambda: (guard.refusal(PAGE), ""))
def filtered_view(services: Services, user, dataset):
    """(releases table, totals table) for the filters; a refusal for anyone but the owner."""
    ledger = services.ledger
    user, dataset = _clean(user), _clean(dataset)
    releases = ledger.releases(user=user, dataset_id=dataset, limit=page.MAX_ROWS)
    total = ledger.count_releases(user=user, dataset_id=dataset)
    totals = ledger.totals()
    if user:
        totals = totals[totals["user"] == user]
    if dataset:
        totals = totals[totals["dataset_id"] == dataset]
    return page.releases_table(releases, total), page.totals_table(totals)


@guard.owner_only(no_update)
def export(services: Services, user, dataset):
    """The CSV download for the filters, or nothing for anyone but the owner."""
    user, dataset = _clean(user), _clean(dataset)
    csv_text = services.ledger.export_csv(user=user, dataset_id=dataset)
    parts = ["ledger", *(p for p in (dataset, user) if p),
             datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")]
    safe = "-".join("".join(ch if ch.isalnum() or ch in "._" else "_" for ch in p)
                    for p in parts)
    return dcc.send_string(csv_text, f"{safe}.csv", type="text/csv")


def register_callbacks(app, services: Services) -> None:
    @app.callback(
        Output(ids.LEDGER_TABLE, "children"), Output(ids.LEDGER_TOTALS, "children"),
        Input(ids.LEDGER_FILTER_USER, "value"), Input(ids.LEDGER_FILTER_DATASET, "value"),
        prevent_initial_call=True,
    )
    def _filter(user, dataset):
        return filtered_view(services, user, dataset)

    @app.callback(
        Output(ids.LEDGER_SET_MESSAGE, "children"), Output(ids.LEDGER_SETTINGS, "children"),
        Input(ids.LEDGER_SET_SAVE, "n_clicks"),
        State(ids.LEDGER_SET_DATASET, "value"), State(ids.LEDGER_SET_KEY, "value"),
        State(ids.LEDGER_SET_VALUE, "value"),
        prevent_initial_call=True,
    )
    def _save(clicks, dataset, key, value):
        if not clicks:
            return no_update, no_update
        return save_setting(services, dataset, key, value)

    @app.callback(
        Output(ids.LEDGER_DOWNLOAD, "data"),
        Input(ids.LEDGER_EXPORT, "n_clicks"),
        State(ids.LEDGER_FILTER_USER, "value"), State(ids.LEDGER_FILTER_DATASET, "value"),
        prevent_initial_call=True,
    )
    def _export(_clicks, user, dataset):
        return export(services, user, dataset)
