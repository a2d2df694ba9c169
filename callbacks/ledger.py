"""Ledger page callbacks: filter releases and totals, export CSV — owner only, checked per call
(``callbacks.guard``)."""

from __future__ import annotations

from datetime import UTC, datetime

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
    return page.layout(page.LedgerPage(
        budgets=ledger.budgets(), datasets=ledger.dataset_statuses(), users=ledger.users(),
        dataset_ids=ledger.dataset_ids(), totals=ledger.totals(),
        releases=ledger.releases(limit=page.MAX_ROWS), release_count=ledger.count_releases(),
        internal=ledger.internal_releases(limit=page.MAX_ROWS)))


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
        Output(ids.LEDGER_DOWNLOAD, "data"),
        Input(ids.LEDGER_EXPORT, "n_clicks"),
        State(ids.LEDGER_FILTER_USER, "value"), State(ids.LEDGER_FILTER_DATASET, "value"),
        prevent_initial_call=True,
    )
    def _export(_clicks, user, dataset):
        return export(services, user, dataset)
