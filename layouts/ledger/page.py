"""Ledger page (owner only): every release with filters, totals, budgets and CSV export.

Layouts never query: the callbacks gather a ``LedgerPage`` from the ledger and this module only
turns it into components.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import dash_bootstrap_components as dbc
import pandas as pd
from dash import dcc, html

from dp_engine.bands import NOISE_LABELS
from layouts import ids
from layouts.components.accessible import field
from layouts.components.budget import cap_share, cap_warning
from services.identity.roles import Role
from services.ledger.records import BudgetStatus, DatasetStatus, StoredRelease, TierRecord
from services.views.report import query_words

MAX_ROWS = 500
"""Releases shown on the page (newest first); the CSV export has all of them."""

_RELEASE_COLUMNS = ["#", "ε charged", "Query", "User (role)", "Dataset (version)", "Noise",
                    "Dataset ε added", "When (UTC)"]
_INTERNAL_COLUMNS = ["#", "When (UTC)", "Dataset", "Version", "Key", "Tier", "Mechanism", "ε",
                     "Dataset ε", "How"]
NOT_DP = "not DP"


SETTINGS = {
    "budget:collaborator": "Collaborators' budget (shared by all collaborators)",
    "budget:third_party": "Third parties' budget (shared by all third parties)",
    "budget:owner": "Owner's budget",
    "user_limit:collaborator": "Each collaborator's own limit",
    "user_limit:third_party": "Each third party's own limit",
    "dataset_cap": "Dataset's cap on its total privacy loss",
}
"""The settings the owner may change here (services/ledger/policy_store.py), in words."""
EVERY = "*"


@dataclass(frozen=True)
class Setting:
    """One setting as in force for one dataset: its value and where it comes from."""

    dataset_id: str
    key: str
    value: float | None
    source: str          # "default" | "owner"


@dataclass(frozen=True)
class LedgerPage:
    """Everything the ledger page shows, read by the callbacks."""

    budgets: list[BudgetStatus]
    datasets: list[DatasetStatus]
    users: list[str]
    dataset_ids: list[str]
    totals: pd.DataFrame
    releases: list[StoredRelease]
    release_count: int
    internal: list[TierRecord]
    settings: list[Setting] = ()
    history: list = ()
    all_datasets: list[str] = ()


def _when(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def _eps(x: float | None) -> str:
    return "unlimited" if x is None else f"{x:.4g}"


def _table(header: list[str], rows: list[list], empty: str) -> html.Div | dbc.Table:
    if not rows:
        return html.Div(empty, className="text-muted fst-italic")
    return dbc.Table(
        [html.Thead(html.Tr([html.Th(h) for h in header])),
         html.Tbody([html.Tr([html.Td(c) for c in row]) for row in rows])],
        bordered=False, hover=True, responsive=True, size="sm", striped=True,
        className="small ledger-table",
    )


def _charged(r: StoredRelease) -> str:
    """What the role paid; a paper-mode row: nothing, and its loss as a lower bound."""
    return _eps(r.epsilon) if r.dp else f"0 ({NOT_DP}: loss ≥ {_eps(r.epsilon)})"


def _query(r: StoredRelease) -> html.Span:
    """The query in words; the mechanism and the stored key on hover."""
    return html.Span(query_words(r.answer), title=f"{r.mechanism} · {r.query_key}")


def releases_table(releases: list[StoredRelease], total: int) -> html.Div:
    """The release list (already filtered, newest first) with a 'showing n of N' note."""
    rows = [[r.id, html.Strong(_charged(r)), _query(r), f"{r.user} ({Role(r.role).label})",
             f"{r.dataset_id} ({r.dataset_version[:8]})",
             NOISE_LABELS.get(r.tier, str(r.tier)),
             _eps(r.dataset_loss) if r.dp else f"({NOT_DP})", _when(r.created_at)]
            for r in releases]
    note = (f"Showing the newest {len(rows)} of {total} releases; the CSV export has all."
            if total > len(rows) else f"{total} release{'s' if total != 1 else ''}.")
    return html.Div([html.P(note, className="small text-muted mb-1"),
                     _table(_RELEASE_COLUMNS, rows, "No release matches these filters.")])


def totals_table(totals: pd.DataFrame) -> html.Div | dbc.Table:
    """Per user and dataset: releases, ε charged, dataset-level ε, cache hits, first/last."""
    rows = [[t.user, t.dataset_id, int(t.releases), _eps(float(t.epsilon)),
             _eps(float(t.dataset_loss)), _eps(float(t.unsound_epsilon)), int(t.cache_hits),
             _when(t.first_release), _when(t.last_release)]
            for t in totals.itertuples(index=False)]
    header = ["User", "Dataset", "Releases", "ε charged", "Dataset ε added",
              f"Paper mode ({NOT_DP}, loss ≥)", "Served from cache", "First", "Last"]
    return _table(header, rows, "Nothing released yet.")


def budgets_table(budgets: list[BudgetStatus]) -> html.Div | dbc.Table:
    """Budget per (role, dataset) this period."""
    rows = [[b.dataset_id, Role(b.role).label, _eps(b.limit), _eps(b.spent), _eps(b.remaining),
             _when(b.renews_at) if b.renews_at else "never"]
            for b in budgets]
    header = ["Dataset", "Role", "Limit", "Spent", "Left", "Renews"]
    return _table(header, rows, "No budget has been charged yet.")


def _used(d: DatasetStatus) -> str:
    share = cap_share(d.loss, d.cap)
    return "–" if share is None else f"{share * 100:.0f} %"


def datasets_table(datasets: list[DatasetStatus]) -> html.Div:
    """Each dataset's total (dataset-level) loss against its cap, all time; a warning for
    every dataset at 80 % of its cap or more (non-owners are refused past it)."""
    rows = [[d.dataset_id, _eps(d.loss), _eps(d.cap), _used(d), _eps(d.remaining),
             _eps(d.unsound_loss) if d.unsound_loss else "–"] for d in datasets]
    header = ["Dataset", "Dataset ε (all time)", "Cap", "Used", "Left under the cap",
              f"Paper mode ({NOT_DP}, loss ≥)"]
    warnings = []
    for d in datasets:
        alert = cap_warning(d.loss, d.cap)
        if alert is not None:
            warnings.append(html.Div([html.Strong(f"{d.dataset_id}: "), alert.children],
                                     className=f"alert alert-{alert.color} small py-2 mb-1"))
    return html.Div([*warnings, _table(header, rows, "No dataset has released anything yet.")],
                    id=ids.LEDGER_DATASETS)


HOW = {"fresh": "drawn from the data", "refined": "noise added to tier {parent}",
       "sharpened": "drawn given tier {parent} (gradual release)",
       "bridged": "drawn between tiers (gradual release)",
       "independent": "drawn from the data (a draw of its own)",
       "schema-3": "drawn before lazy tiers"}


def _how(t: TierRecord) -> str:
    how = HOW.get(t.drawn, t.drawn or "drawn from the data").format(parent=t.refined_from)
    if t.dp and t.disclosed_at is None:
        how += "; only the owner has seen it (not counted)"
    return how


def internal_table(records: list[TierRecord]) -> html.Div | dbc.Table:
    """The tier store: every draw, how it was drawn and what it added to its dataset's loss
    (a tier adds only once it reaches a role other than the owner)."""
    rows = [[t.id, _when(t.created_at), t.dataset_id, t.dataset_version,
             html.Code(t.query_key, className="small"), t.tier, t.mechanism, _eps(t.epsilon),
             _eps(t.dataset_loss) if t.dp else f"({NOT_DP}: ≥ {_eps(t.dataset_loss)})",
             _how(t)]
            for t in records]
    return _table(_INTERNAL_COLUMNS, rows, "No internal release yet.")


def settings_table(settings: list[Setting]) -> html.Div | dbc.Table:
    """The budgets and caps in force per dataset, and whether the owner set them."""
    rows = [[s.dataset_id if s.dataset_id != EVERY else "every dataset",
             SETTINGS.get(s.key, s.key), _eps(s.value),
             "set here" if s.source == "owner" else "default (environment)"]
            for s in settings]
    return _table(["Dataset", "Setting", "Value", "From"], rows, "No setting.")


def history_table(history: list) -> html.Div | dbc.Table:
    """Every change the owner made, newest first: who, when, what."""
    rows = [[_when(h.at), h.user, h.dataset_id if h.dataset_id != EVERY else "every dataset",
             SETTINGS.get(h.key, h.key), _eps(h.value)] for h in history]
    return _table(["When (UTC)", "Who", "Dataset", "Setting", "New value"], rows,
                  "No change yet: the defaults from the environment are in force.")


def settings_block(settings: list[Setting], history: list) -> list:
    """The settings in force and the owner's changes (redrawn after each save)."""
    return [settings_table(settings), html.H3("Changes", className="h6 mt-2"),
            history_table(history)]


def _card(title: str, *body, **props) -> dbc.Card:
    """A card headed ``title``; ``props`` are the card's own (its className)."""
    return dbc.Card(dbc.CardBody([html.H2(title, className="h6"), *body]), **props)


def settings_card(data: LedgerPage) -> dbc.Card:
    """Change a budget, a per-user limit or a dataset's cap: in force at once, everywhere."""
    datasets = [{"label": "Every dataset", "value": EVERY}] + [
        {"label": d, "value": d} for d in data.all_datasets]
    return _card(
        "Budget settings",
        html.P("A change binds the very next request on every server worker and is kept in "
               "the ledger with who made it and when. Leave the value empty for no limit.",
               className="small text-muted"),
        dbc.Row([
            dbc.Col(field("Dataset", dcc.Dropdown(id=ids.LEDGER_SET_DATASET, options=datasets,
                                                  value=EVERY, clearable=False)), md=3),
            dbc.Col(field("Setting", dcc.Dropdown(
                id=ids.LEDGER_SET_KEY, clearable=False, value="budget:third_party",
                options=[{"label": v, "value": k} for k, v in SETTINGS.items()])), md=4),
            dbc.Col(field("New value (ε)", dbc.Input(id=ids.LEDGER_SET_VALUE, type="number",
                                                     min=0, step="any")), md=2),
            dbc.Col(dbc.Button("Save", id=ids.LEDGER_SET_SAVE, color="primary",
                               className="mt-4"), md=2),
        ], className="g-2"),
        html.Div(id=ids.LEDGER_SET_MESSAGE, role="status", **{"aria-live": "polite"}),
        html.Div(settings_block(list(data.settings), list(data.history)),
                 id=ids.LEDGER_SETTINGS),
        className="mb-3")


def _filter(label: str, cid: str, values: list[str], placeholder: str) -> dbc.Col:
    return dbc.Col(field(label, dcc.Dropdown(id=cid, options=[{"label": v, "value": v}
                                                               for v in values],
                                             placeholder=placeholder, clearable=True),
                         class_name=""), md=4)


def layout(data: LedgerPage) -> html.Div:
    """The owner's page (the callbacks refuse everyone else before gathering ``data``)."""
    return html.Div([
        html.H1("Privacy ledger", className="h4"),
        html.P("Every noisy answer that left the server, who received it, and what it cost. "
               "A repeated request is served from this ledger and costs nothing. Whoever "
               "causes a release pays for it: a role is charged what it sees, a grouping's DP "
               "group sizes are charged to whoever priced them, and a dataset's loss grows "
               "only when an answer reaches a role other than the owner (the owner's own "
               "views are not a disclosure), plus its calibration (the DP number of records "
               "and a DP pilot of each numeric column, drawn once). Paper-mode answers are "
               "not differentially private: they are recorded with a lower bound of their "
               "loss and left out of every total.",
               className="text-muted"),
        settings_card(data),
        _card("Budgets", budgets_table(data.budgets), html.H2("Datasets", className="h6 mt-3"),
              datasets_table(data.datasets), className="mb-3"),
        dbc.Row([
            _filter("User", ids.LEDGER_FILTER_USER, data.users, "All users"),
            _filter("Dataset", ids.LEDGER_FILTER_DATASET, data.dataset_ids, "All datasets"),
            dbc.Col([
                dbc.Button("Export CSV", id=ids.LEDGER_EXPORT, color="secondary",
                           className="mt-4"),
                dcc.Download(id=ids.LEDGER_DOWNLOAD),
            ], md=4),
        ], className="mb-3 g-3"),
        _card("Totals per user and dataset",
              html.Div(totals_table(data.totals), id=ids.LEDGER_TOTALS), className="mb-3"),
        _card("Releases", html.Div(releases_table(data.releases, data.release_count),
                                   id=ids.LEDGER_TABLE), className="mb-3"),
        _card("Internal releases (dataset-level loss only)", internal_table(data.internal)),
    ])
