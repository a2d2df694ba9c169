"""Ledger page (owner only): every release with filters, totals, budgets and CSV export."""

from __future__ import annotations

import json
from datetime import datetime

import dash_bootstrap_components as dbc
import pandas as pd
from dash import dcc, html

from layouts import ids
from services.identity.roles import Role

MAX_ROWS = 500
"""Releases shown on the page (newest first); the CSV export has all of them."""

_ANSWER_CHARS = 160
_RELEASE_COLUMNS = ["#", "When (UTC)", "User", "Role", "Dataset", "Version", "Query", "Tier",
                    "Mechanism", "ε charged", "Dataset ε", "Answer"]


def refusal() -> dbc.Alert:
    return dbc.Alert("The privacy ledger is for the data owner (the hospital) only.",
                     color="warning")


def _when(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def _eps(x: float | None) -> str:
    return "unlimited" if x is None else f"{x:.4g}"


def _short_answer(answer: dict) -> str:
    text = json.dumps(answer, sort_keys=True, default=str)
    return text if len(text) <= _ANSWER_CHARS else text[: _ANSWER_CHARS - 1] + "…"


def _table(header: list[str], rows: list[list], empty: str) -> html.Div | dbc.Table:
    if not rows:
        return html.Div(empty, className="text-muted fst-italic")
    return dbc.Table(
        [html.Thead(html.Tr([html.Th(h) for h in header])),
         html.Tbody([html.Tr([html.Td(c) for c in row]) for row in rows])],
        bordered=False, hover=True, responsive=True, size="sm", striped=True,
        className="small",
    )


def releases_table(releases: list, total: int) -> html.Div:
    """The release list (already filtered, newest first) with a 'showing n of N' note."""
    rows = [[r.id, _when(r.created_at), r.user, r.role, r.dataset_id, r.dataset_version,
             html.Code(r.query_key, className="small"), r.tier, r.mechanism, _eps(r.epsilon),
             _eps(r.dataset_loss), html.Code(_short_answer(r.answer), className="small")]
            for r in releases]
    note = (f"Showing the newest {len(rows)} of {total} releases; the CSV export has all."
            if total > len(rows) else f"{total} release{'s' if total != 1 else ''}.")
    return html.Div([html.P(note, className="small text-muted mb-1"),
                     _table(_RELEASE_COLUMNS, rows, "No release matches these filters.")])


def totals_table(totals: pd.DataFrame) -> html.Div | dbc.Table:
    """Per user and dataset: releases, ε charged, dataset-level ε, cache hits, first/last."""
    rows = [[t.user, t.dataset_id, int(t.releases), _eps(float(t.epsilon)),
             _eps(float(t.dataset_loss)), int(t.cache_hits), _when(t.first_release),
             _when(t.last_release)]
            for t in totals.itertuples(index=False)]
    header = ["User", "Dataset", "Releases", "ε charged", "Dataset ε", "Served from cache",
              "First", "Last"]
    return _table(header, rows, "Nothing released yet.")


def budgets_table(budgets: list, losses: dict[str, float]) -> html.Div | dbc.Table:
    """Budget per (role, dataset) this period, plus each dataset's cumulative loss."""
    rows = [[b.dataset_id, Role(b.role).label, _eps(b.limit), _eps(b.spent), _eps(b.remaining),
             _when(b.renews_at) if b.renews_at else "never", _eps(losses.get(b.dataset_id, 0.0))]
            for b in budgets]
    header = ["Dataset", "Role", "Limit", "Spent", "Left", "Renews", "Dataset ε (all time)"]
    return _table(header, rows, "No budget has been charged yet.")


def _filter(label: str, cid: str, values: list[str], placeholder: str) -> dbc.Col:
    return dbc.Col([
        dbc.Label(label, html_for=cid, className="fw-semibold small mb-1"),
        dcc.Dropdown(id=cid, options=[{"label": v, "value": v} for v in values],
                     placeholder=placeholder, clearable=True),
    ], md=4)


def layout(services, identity) -> html.Div | dbc.Alert:
    """The page for ``identity``; anyone but the owner gets a refusal."""
    if identity.role is not Role.OWNER or not identity.authenticated:
        return refusal()
    ledger = services.ledger
    totals = ledger.totals()
    losses = {d: ledger.dataset_loss(d) for d in ledger.dataset_ids()}
    return html.Div([
        html.H2("Privacy ledger", className="h4"),
        html.P("Every noisy answer that left the server, who received it, and what it cost. "
               "A repeated request is served from this ledger and costs nothing.",
               className="text-muted"),
        dbc.Card(dbc.CardBody([
            html.H3("Budgets", className="h6"),
            budgets_table(ledger.budgets(), losses),
        ]), className="mb-3"),
        dbc.Row([
            _filter("User", ids.LEDGER_FILTER_USER, ledger.users(), "All users"),
            _filter("Dataset", ids.LEDGER_FILTER_DATASET, ledger.dataset_ids(), "All datasets"),
            dbc.Col([
                dbc.Button("Export CSV", id=ids.LEDGER_EXPORT, color="secondary",
                           className="mt-4"),
                dcc.Download(id=ids.LEDGER_DOWNLOAD),
            ], md=4),
        ], className="mb-3 g-3"),
        dbc.Card(dbc.CardBody([
            html.H3("Totals per user and dataset", className="h6"),
            html.Div(totals_table(totals), id=ids.LEDGER_TOTALS),
        ]), className="mb-3"),
        dbc.Card(dbc.CardBody([
            html.H3("Releases", className="h6"),
            html.Div(releases_table(ledger.releases(limit=MAX_ROWS), ledger.count_releases()),
                     id=ids.LEDGER_TABLE),
        ])),
    ])
